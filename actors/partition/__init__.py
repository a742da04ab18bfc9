"""The offsets partition actor: one per partition and replica.

Owns: the actor shell `OffsetPartition` (`actor.py`: the Ray methods and the
request path, delegating to its parts; its docstring says which part owns
what), what the parts share (`host.py`: the core's `PartitionRuntime`, the
log, the I/O threads, the supervised tasks), the load and reload
(`loading.py`), the serving loops (`serving.py`: flush, timers, topics,
gauges, maintenance; the write-path rule carried out), its replica roles
(`roles.py`: leader, follower, standby, epochs), the leader's pushes and the high watermark (`leader.py`), the
follower's appends and truncation (`follower.py`), the push link between
them (`link.py`), disk-failure handling and recovery (`recovery.py`), log
maintenance (`maintenance.py`: snapshots and compaction), reading its log
files for Spark (`export.py`), and the topic registry's view its shard's
consumer groups assign from (`topics_watch.py`), and the Ray path's
authorizer (`ray_guard.py`: the callers' credentials and the ACLs).

Rules: protocol decisions are the core's (`coordinator`), replication
decisions the pure `coordinator.replication`; this package moves requests,
records and time into them and results out. A background task that fails
fails the partition (it reloads), never silently.
Imports: `actors.core`, `coordinator`, `log`, Ray. Not the controller, the
client or anything above them.
"""
