"""The gateway's Kafka API handlers, one module per family; each translates, none decides.

`metadata` (Metadata, FindCoordinator, DescribeCluster), `membership`
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup), `offsets` (OffsetCommit,
OffsetFetch, OffsetDelete, ListOffsets, OffsetForLeaderEpoch), `consumer`
(ConsumerGroupHeartbeat, KIP-848), `admin` (ListGroups, DescribeGroups,
DeleteGroups, ConsumerGroupDescribe), `acls` (DescribeAcls, CreateAcls,
DeleteAcls), `data` (Fetch, Produce). Each
handler takes the request context and a parsed kio request, sends the
coordinator's request through the service client (`calls`) or reads the
topic registry (`topics`), and builds the kio response of the request's
version (`entities`).
"""
