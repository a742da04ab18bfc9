"""The consumer group type of KIP-848 (ConsumerGroupHeartbeat), beside the classic group.

Kafka keeps it in `coordinator/group/modern/consumer/`. This package holds its
pure layer so far: the server-side assignors (`assignors/`), the target
assignment (`target.py`) and per-member reconciliation (`reconciliation.py`).
It imports nothing from the classic group's modules, only shared helpers
(`coordinator.routing`), so the classic code can move without touching it.
"""
