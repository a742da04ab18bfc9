"""Test support for the gateway's Kafka APIs: kio requests from plain values, a gateway
in front of the running service, one request and its answer on a raw connection."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kio.index import load_request_schema

from gateway.handlers.entities import build

from tests.gateway.gateway_support import GatewayThread, connect, read_response, request_frame


def kio_request(api_key: int, version: int, **values: Any) -> Any:
    """The kio request entity of `api_key` at `version` (fields it lacks are dropped;
    durations in ms and nested structs as mappings, as gateway.handlers.entities.build takes)."""
    return build(load_request_schema(api_key, version), values)


def service_gateway() -> Iterator[GatewayThread]:
    """A gateway on 127.0.0.1 in front of the running service (for a module fixture)."""
    import actors

    running = GatewayThread(actors.connect())
    yield running
    running.close()


def exchange(gateway: GatewayThread, request: Any) -> Any:
    """`request` sent on a new connection; its kio response."""
    with connect(gateway.port) as sock:
        sock.sendall(request_frame(request, correlation_id=1))
        _, response = read_response(sock, request.__api_key__, request.__version__)
    return response
