"""A grow's new partitions start in turn (actors/controller/repartition.py, step 1): the
watch leaves them to the driver, which lets each start once the one before serves, so
their replicas' process starts never all land on the running partitions at once."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.controller.fake import FakeCluster
from tests.controller.helpers import run, watch
from tests.controller.test_replicated import started


def test_new_partitions_start_one_after_another_each_once_the_one_before_serves() -> None:
    async def scenario() -> None:
        cluster, _, plane = await started(FakeCluster(), num_partitions=2)
        create = cluster.create
        served_at_create: list[tuple[int, list[int]]] = []

        def recording_create(name: str, partition: int | None, *args: Any) -> Any:
            served = [p for p in range(2, 6) if plane._routed(p) is not None]
            served_at_create.append((-1 if partition is None else partition, served))
            return create(name, partition, *args)

        cluster.create = recording_create  # type: ignore[method-assign]
        await plane.repartition_to(6)
        for _ in range(200):
            await watch(plane)
            await asyncio.sleep(0)
            if all(plane._routed(p) is not None for p in range(6)):
                break
        assert all(plane._routed(p) is not None for p in range(6)), "every new partition serves"
        order = [partition for partition, _ in served_at_create]
        assert order == sorted(order) and set(order) == {2, 3, 4, 5}, order
        assert order.count(2) == 3, "a partition's replicas start together"
        for partition, served in served_at_create:
            assert served == list(range(2, partition)), (partition, served)
        await plane.shutdown()

    run(scenario())
