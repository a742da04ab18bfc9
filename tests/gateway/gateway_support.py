"""Test support for the gateway: a gateway on its own event loop in a thread
(`GatewayThread`), so blocking raw sockets and synchronous Kafka clients can
talk to it from the test; raw Kafka frames written and read with kio."""

from __future__ import annotations

import asyncio
import io
import socket
import ssl
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any

from kio.index import load_response_schema
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsV0
from kio.schema.api_versions.v1.request import ApiVersionsRequest as ApiVersionsV1
from kio.schema.api_versions.v2.request import ApiVersionsRequest as ApiVersionsV2
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.api_versions.v4.request import ApiVersionsRequest as ApiVersionsV4
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from actors.core import loops
from gateway.server import Gateway


class GatewayThread:
    """`Gateway(*args, **kwargs)` listening on 127.0.0.1 (or `host`), served in a thread by a
    loop of the kind `raygroups gateway` runs on (`actors.core.loops`)."""

    def __init__(self, *args: Any, host: str = "127.0.0.1", **kwargs: Any):
        self._loop = loops.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="gateway", daemon=True)
        self._thread.start()
        self.gateway: Gateway = self.call(_make(args, kwargs))
        self.host, self.port = self.call(self.gateway.start(host, 0))

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def call(self, coroutine: Coroutine[Any, Any, Any], timeout_s: float = 30.0) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout_s)

    def stats(self) -> dict[str, int]:
        return self.call(_stats(self.gateway))

    def close(self) -> None:
        self.call(self.gateway.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


async def _make(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Gateway:
    return Gateway(*args, **kwargs)


async def _stats(gateway: Gateway) -> dict[str, int]:
    return gateway.stats()


def request_frame(request: Any, correlation_id: int, client_id: str | None = "raw-test") -> bytes:
    """The size-prefixed frame of a kio request entity."""
    header_schema = type(request).__header_schema__
    out = io.BytesIO()
    entity_writer(header_schema)(
        out,
        header_schema(
            request_api_key=request.__api_key__,
            request_api_version=request.__version__,
            correlation_id=correlation_id,
            client_id=client_id,
        ),
    )
    entity_writer(type(request))(out, request)
    return sized(out.getvalue())


def sized(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def connect(port: int, host: str = "127.0.0.1", timeout_s: float = 10.0) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout_s)
    sock.settimeout(timeout_s)
    return sock


def read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed frame's payload; None when the server closed the connection."""
    head = _recv_exactly(sock, 4)
    if head is None:
        return None
    payload = _recv_exactly(sock, int.from_bytes(head, "big"))
    assert payload is not None, "connection closed inside a frame"
    return payload


def read_response(sock: socket.socket, api_key: int, version: int) -> tuple[int, Any]:
    """(correlation id, kio response entity) of the next frame, as `api_key` at `version`."""
    payload = read_frame(sock)
    assert payload is not None, "connection closed instead of answering"
    return parse_response(payload, api_key, version)


def parse_response(payload: bytes, api_key: int, version: int) -> tuple[int, Any]:
    """(correlation id, kio response entity) of a response frame without its size prefix."""
    schema = load_response_schema(api_key, version)
    header, used = entity_reader(schema.__header_schema__)(payload, 0)
    body, _ = entity_reader(schema)(payload, used)
    return header.correlation_id, body


def closed_without_answer(sock: socket.socket) -> bool:
    """True when the server closes the connection and sends nothing more."""
    return _recv_exactly(sock, 1) is None


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        try:
            chunk = sock.recv(size - len(data))
        except (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
            chunk = b""
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def api_versions_request(version: int) -> object:
    if version >= 3:
        cls = ApiVersionsV3 if version == 3 else ApiVersionsV4
        return cls(client_software_name="raw-test", client_software_version="1.0")
    return (ApiVersionsV0, ApiVersionsV1, ApiVersionsV2)[version]()


def assert_served(port: int, sock: socket.socket | None = None) -> None:
    """An ApiVersions request on `sock` (or a new connection) is answered."""
    own = sock is None
    sock = sock or connect(port)
    try:
        sock.sendall(request_frame(api_versions_request(4), correlation_id=99))
        correlation_id, body = read_response(sock, 18, 4)
        assert (correlation_id, body.error_code) == (99, ErrorCode.none)
    finally:
        if own:
            sock.close()
