"""How any process of the Ray cluster reaches the service.

Owns: `Client` (`client.py`: routing by Kafka's group-to-partition hash, the
cached routing table, typed calls for every request), retries with backoff
until a deadline (`retry.py`), admin calls fanned out to many partitions and
whole across a repartition (`fanout.py`), coalescing concurrent commits into one call
per partition (`coalesce.py`), and the topic registry, a singleton actor
with every topic's partition count, end and start offsets and their history
(`topics.py`, `end_history.py`), and the service's ACLs it keeps
(`acl_table.py`; callers `acls.py`; what each Kafka listener enforces,
`acl_watch.py`).

Rules: a call ends by its deadline, whatever the actor it waits on does;
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS and dead actors are retried
after a routing refresh, every other answer goes to the caller.
Imports: `actors.core`, `coordinator`, Ray. Not the partition or controller
code (it talks to their actors through handles), members or the CLI.
"""
