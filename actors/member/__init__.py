"""Consumers as members of a group: `GroupMember` and `AsyncGroupMember`.

Owns: the blocking member (`group_member.py`) and the asyncio one
(`async_group_member.py`), and the decisions both drivers run, one loop per
group protocol: the classic one (`loop.py`: join, sync, heartbeat, rejoin,
the leader's client-side assignors of `coordinator.assignors`) and the
consumer protocol of KIP-848 (`consumer_loop.py`: heartbeats at the
coordinator's interval, incremental reconciliation of the assignment the
coordinator computes), what the two share (`loop_base.py`: polling, closing,
a fatal error), and their public types and errors (`api.py`). Commits and the
rebalance listener work alike in both.

Imports: `actors.client`, `actors.core`, `actors.service` (to connect),
`coordinator`. Not the partition, controller or CLI code.
"""
