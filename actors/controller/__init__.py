"""The controller: which actor leads each offsets partition, at which epoch.

Owns: the `Controller` actor (`actor.py`, named, detached, restarted by
Ray), its decisions in plain asyncio code (`plane.py`: `ControlPlane`, the
watch loop, routing, status; `succession.py`: leadership moves of
single-copy partitions; `publish.py`: served means recorded first;
`standbys.py`; `replicas.py`: `ReplicatedPlane`, elections, ISR, and
`moves.py`: replica moves), liveness (`health.py`), the metadata
(`state.py`) in Ray's GCS store (`ray_store.py`), the `Cluster` it acts
through (`cluster_view.py`, Ray's in `ray_cluster.py`, a fake in tests),
and the recovery of replicas after a full restart (`forgotten_logs.py`).

Rules: every decision is resumable (an intent saved before it is acted on);
one operation per partition at a time; placement, ISR and election rules
are the pure `coordinator.replication`'s.
Imports: `actors.core`, `actors.partition` (to create partition actors),
`coordinator`, `log`, Ray. Not the client, members or the CLI.
"""
