"""A recording stand-in for actors.Client, and `call`: gateway.apis on one kio
request without Ray, its response checked to round-trip through kio."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer

from actors.client.fanout import one_round
from coordinator.routing import Routing, partition_for
from gateway import apis


class FakeClient:
    """Records the coordinator requests; answers with `answer(request)`."""

    def __init__(self, answer: Callable[[Any], Any], num_partitions: int = 3) -> None:
        self.answer = answer
        self.num_partitions = num_partitions
        self.sent: list[tuple[Any, int | None]] = []
        self.leaders: list[Any] = ["leader"] * num_partitions
        self.routing = Routing(num_partitions)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    async def fan_out_async(self, plan: Any, through: Any = None) -> list[Any]:
        """A fanned-out admin request, one round (no repartition here), through `send_async`."""
        return await one_round(plan, self, self.send_async, through)

    def leader(self, partition: int) -> Any:
        return self.leaders[partition]

    async def refresh_async(self) -> None:
        pass

    async def send_async(
        self, request: Any, partition: int | None = None, timeout_s: float | None = None
    ) -> Any:
        self.sent.append((request, partition))
        response = self.answer(request)
        if isinstance(response, BaseException):
            raise response
        return response

    join_group_async = sync_group_async = send_async


GATEWAY = apis.GatewayInfo(
    node_id=3, host="gw.example", port=19092, brokers=((1, "other", 9), (3, "gw.example", 19092))
)


def call(client: FakeClient, request: Any) -> Any:
    """`apis.handle` on `request`, its response checked to round-trip through kio."""
    ctx = apis.RequestContext(
        client_id="cid",
        client_host="10.0.0.9",
        api_version=request.__version__,
        correlation_id=1,
        principal=None,
        gateway=GATEWAY,
        client=client,  # type: ignore[arg-type]
    )
    response = asyncio.run(apis.handle(ctx, request))
    if response is not None:
        schema = load_response_schema(request.__api_key__, request.__version__)
        assert type(response) is schema
        out = io.BytesIO()
        entity_writer(schema)(out, response)
        assert entity_reader(schema)(out.getvalue(), 0)[0] == response
    return response
