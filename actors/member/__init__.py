"""Consumers as members of a group: `GroupMember` and `AsyncGroupMember`.

Owns: the blocking member (`group_member.py`) and the asyncio one
(`async_group_member.py`), the member loop they share (`loop.py`: join,
sync, heartbeat, rejoin, commit, the rebalance listener, a clean leave), and
their public types and errors (`api.py`). The assignment itself is computed
by the client-side assignors of `coordinator.assignors`.

Imports: `actors.client`, `actors.core`, `actors.service` (to connect),
`coordinator`. Not the partition, controller or CLI code.
"""
