"""Test support for the gateway's Kafka APIs: kio requests from plain values."""

from __future__ import annotations

from typing import Any

from kio.index import load_request_schema

from gateway.handlers.entities import build


def kio_request(api_key: int, version: int, **values: Any) -> Any:
    """The kio request entity of `api_key` at `version` (fields it lacks are dropped;
    durations in ms and nested structs as mappings, as gateway.handlers.entities.build takes)."""
    return build(load_request_schema(api_key, version), values)
