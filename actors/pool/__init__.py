"""Consumer pools: a group's members as Ray actors, scaled on the group's live lag.

Owns: `ConsumerPool` (`pool.py`: membership, the control thread that reads the
group's live lag and applies coordinator/pool_policy.py's decision, SPREAD
placement, the autoscaler request) and `PoolMember` (`member.py`: the actor
running the user's `process_fn` on its partitions and committing) and each member's
record in Ray's GCS (`ledger.py`: activated or not, errors, commits; what a member
restarted by Ray reads back). docs/python-api.md.

Imports: `actors.client`, `actors.member`, `actors.service`, `coordinator`.
"""
