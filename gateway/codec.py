"""Kafka frames to kio entities and back, and the ApiVersions answer.

Owns the bytes of one frame (the size prefix is the server's): the request
header, the body, the response header and body, all read and written by kio
(never by hand). Rules, as Kafka's broker (SocketServer, RequestContext):
- An api key or version outside the advertised table, a frame too short for
  its header, or a body kio cannot parse is a `FrameError`: the connection
  is closed and nothing is answered.
- ApiVersions is the exception: a version above the highest we speak is
  answered with a v0 body, UNSUPPORTED_VERSION and only the ApiVersions range
  (KIP-511), so the client can retry with a version we know.
- Responses use the header version of their own schema (v0 for every
  ApiVersions version, as Kafka).
- kio's native reader refuses tagged fields it does not know (KeyError),
  where Kafka skips them; kio has no API to skip them, so such a frame is a
  `FrameError` too. Clients only send the tags of the versions we advertise,
  which kio knows.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import read_int16, read_int32
from kio.static.constants import EntityType

SASL_HANDSHAKE = 17
API_VERSIONS = 18
SASL_AUTHENTICATE = 36
# The ApiVersions versions kio has schemas for; the answer to any higher one is the v0 error body.
API_VERSIONS_RANGE = (0, 4)
# api key, version and correlation id: the part of every request header read before the schema is known.
FIXED_HEADER_BYTES = 8
# Kafka's rule for ApiVersions v3+ client_software_name/version (ApiVersionsRequest.isValid).
_SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

VersionTable = Mapping[int, tuple[int, int]]


class FrameError(Exception):
    """A frame the gateway will not answer: its connection is closed."""


@dataclass(frozen=True, slots=True)
class Request:
    """One parsed request; `body` is the kio request entity, None for an
    ApiVersions request at a version we do not speak (`unsupported_api_versions`)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any

    @property
    def unsupported_api_versions(self) -> bool:
        return self.api_key == API_VERSIONS and self.api_version > API_VERSIONS_RANGE[1]


def read_request(frame: bytes, versions: VersionTable) -> Request:
    """Parse one frame (without its size prefix) of an api key and version in `versions`."""
    if len(frame) < FIXED_HEADER_BYTES:
        raise FrameError(f"truncated request header ({len(frame)} bytes)")
    api_key, _ = read_int16(frame, 0)
    api_version, _ = read_int16(frame, 2)
    if api_key == API_VERSIONS and api_version > API_VERSIONS_RANGE[1]:
        # Kafka parses none of it but the correlation id and answers as v0 (KIP-511).
        correlation_id, _ = read_int32(frame, 4)
        return Request(api_key, api_version, correlation_id, None, None)
    if api_key not in versions:
        raise FrameError(f"unknown api key {api_key}")
    low, high = versions[api_key]
    if not low <= api_version <= high:
        raise FrameError(f"api key {api_key} version {api_version} outside {low}-{high}")
    schema = _request_schema(api_key, api_version)
    try:
        header, used = entity_reader(schema.__header_schema__)(frame, 0)
        body, _ = entity_reader(schema)(frame, used)
    except KeyError as exc:
        raise FrameError(f"{schema.__name__} v{api_version}: unknown tagged field ({exc})") from None
    except Exception as exc:  # kio raises DecodeError, ValueError and others on bad bytes
        raise FrameError(f"malformed {schema.__name__} v{api_version}: {type(exc).__name__} {exc}") from None
    return Request(api_key, api_version, header.correlation_id, header.client_id, body)


@cache
def _request_schema(api_key: int, api_version: int) -> Any:
    """kio's request class (kio resolves it by module name on every call: ~6 us a request)."""
    return load_request_schema(api_key, api_version)


def _body(response: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(response))(out, response)
    return out.getvalue()


def _frame(correlation_id: int, response: Any, body: bytes) -> bytes:
    """The size-prefixed frame of `response` (`body` encoded), under its schema's header version."""
    header_schema = type(response).__header_schema__
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    entity_writer(header_schema)(out, header_schema(correlation_id=correlation_id))
    out.write(body)
    frame = out.getbuffer()
    frame[:4] = (len(frame) - 4).to_bytes(4, "big")
    return bytes(frame)


class ResponseWriter:
    """Response frames, each response object encoded once: one written again (an answer that
    repeats, `handlers.entities.RepeatedResponses`) costs its header only. The bodies of recent
    small responses are kept by identity, each beside its (immutable) entity, so an id is
    never mistaken for a later object's. One per event loop; bounded: forgets every body
    when full."""

    def __init__(self, capacity: int = 512, max_body_bytes: int = 4096) -> None:
        self.capacity = capacity
        self.max_body_bytes = max_body_bytes
        self._bodies: dict[int, tuple[Any, bytes]] = {}

    def write(self, correlation_id: int, response: Any) -> bytes:
        kept = self._bodies.get(id(response))
        if kept is not None and kept[0] is response:
            return _frame(correlation_id, response, kept[1])
        body = _body(response)
        if len(body) <= self.max_body_bytes:
            if len(self._bodies) >= self.capacity:
                self._bodies.clear()
            self._bodies[id(response)] = (response, body)
        return _frame(correlation_id, response, body)


def advertised_versions(supported: VersionTable, extra: VersionTable) -> dict[int, tuple[int, int]]:
    """The table ApiVersions answers and requests are checked against: the
    APIs' table, the transport's own (`extra`: SASL when on) and ApiVersions."""
    return dict(sorted({**supported, **extra, API_VERSIONS: API_VERSIONS_RANGE}.items()))


def api_versions_response(request: Request, versions: VersionTable) -> Any:
    """Kafka's answer to ApiVersions at `request.api_version`."""
    if request.unsupported_api_versions:
        return _api_versions_body(0, ErrorCode.unsupported_version, {API_VERSIONS: API_VERSIONS_RANGE})
    if request.api_version >= 3 and not _valid_software(request.body):
        return _api_versions_body(request.api_version, ErrorCode.invalid_request, {})
    return _api_versions_body(request.api_version, ErrorCode.none, versions)


def _valid_software(body: Any) -> bool:
    return all(
        _SOFTWARE_NAME.fullmatch(value) is not None
        for value in (body.client_software_name, body.client_software_version)
    )


def _api_versions_body(version: int, error: ErrorCode, versions: VersionTable) -> Any:
    module = load_payload_module(API_VERSIONS, version, EntityType.response)
    entries = tuple(
        module.ApiVersion(api_key=key, min_version=low, max_version=high)
        for key, (low, high) in versions.items()
    )
    fields: dict[str, Any] = {"error_code": error, "api_keys": entries}
    if version >= 1:
        fields["throttle_time"] = timedelta(0)
    return load_response_schema(API_VERSIONS, version)(**fields)
