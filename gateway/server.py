"""The gateway's TCP server: connections, framing, order, limits.

Owns the sockets. Each connection is served one request at a time, as
Kafka's broker mutes a channel until its response is sent: read a
size-prefixed frame, parse it (`gateway.codec`), answer it, write the
response, then read the next. So responses go out in request order and a
connection holds at most one request in memory. Clients may pipeline; what
they send meanwhile waits in the socket buffers (TCP backpressure).

Rules (Kafka's broker defaults, configurable in `Limits`):
- A frame above `max_request_bytes` (socket.request.max.bytes, 100 MiB;
  `max_unauthenticated_bytes`, 512 KiB, before a SASL login), a negative
  size, a truncated frame, a body that does not parse, an unknown api key or
  version, a request the SASL state forbids: one log line, the connection
  closes, nothing is answered, every other connection is served on.
- A handler's None is a request Kafka does not answer (Produce, acks=0).
- A handler that raises closes its connection (logged with the traceback),
  as Kafka closes a connection whose request it cannot process.
- Memory stays bounded: at most `max_connections` connections (more are
  closed at once), and the frames held across all connections never exceed
  `memory_pool_bytes` (Kafka's queued.max.request.bytes): a connection
  waits for room before reading a frame's body.
- A connection idle for `idle_timeout_ms` (connections.max.idle.ms), or
  not reading its responses for that long, is closed.
- A refused login is closed `failed_authentication_delay_ms` after its
  answer (connection.failed.authentication.delay.ms).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from gateway.codec import (
    API_VERSIONS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    FrameError,
    Request,
    ResponseWriter,
    advertised_versions,
    api_versions_response,
    read_request,
)
from gateway.direct.routing import LeaderRouting
from gateway.security import SaslSession, SecurityConfig, check_listen_address

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9092
# Refusals past the connection limit are logged once, then once per this many.
REFUSALS_PER_LOG_LINE = 1000
# How long a closing connection may take to flush its last response to a slow reader.
CLOSE_FLUSH_S = 5.0


@dataclass(frozen=True, slots=True)
class Limits:
    max_request_bytes: int = 104_857_600
    max_unauthenticated_bytes: int = 524_288
    max_connections: int = 10_000
    memory_pool_bytes: int = 209_715_200
    idle_timeout_ms: int = 600_000
    failed_authentication_delay_ms: int = 100

    def __post_init__(self) -> None:
        if self.max_request_bytes > self.memory_pool_bytes:
            raise ValueError("memory_pool_bytes must hold at least one frame of max_request_bytes")
        if min(self.max_request_bytes, self.max_unauthenticated_bytes, self.max_connections,
               self.idle_timeout_ms) <= 0:
            raise ValueError("gateway limits must be positive")


class MemoryPool:
    """Bytes of request frames held at once, across every connection."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.in_use = 0
        self.waiting = 0
        self._room = asyncio.Condition()

    @asynccontextmanager
    async def reserve(self, size: int) -> AsyncIterator[None]:
        async with self._room:
            self.waiting += 1
            try:
                await self._room.wait_for(lambda: self.in_use + size <= self.capacity)
            finally:
                self.waiting -= 1
            self.in_use += size
        try:
            yield
        finally:
            async with self._room:
                self.in_use -= size
                self._room.notify_all()


class ConnectionClosed(Exception):
    """The peer went away, or stayed idle too long: closed without a log line of its own."""


class Gateway:
    """One gateway: a listening socket in front of the service's `client`.

    `dispatch` holds the Kafka APIs: `SUPPORTED`, `handle`, `RequestContext`
    and `GatewayInfo` (default: `gateway.apis`). `brokers` are every
    gateway's (node_id, host, port) for Metadata; default: this one alone.
    `direct`: FindCoordinator names the listener of the group's partition
    leader (gateway.direct) instead of this gateway.
    """

    def __init__(
        self,
        client: Any,
        *,
        node_id: int = 0,
        security: SecurityConfig | None = None,
        limits: Limits | None = None,
        dispatch: Any = None,
        advertised_host: str | None = None,
        direct: bool = True,
    ):
        self.client = client
        self.node_id = node_id
        self.security = security or SecurityConfig()
        self.limits = limits or Limits()
        self.dispatch: ModuleType | Any = dispatch or _default_dispatch()
        self.versions = advertised_versions(self.dispatch.SUPPORTED, self.security.extra_versions())
        self.pool = MemoryPool(self.limits.memory_pool_bytes)
        self.writer = ResponseWriter()
        self.connections: set[Connection] = set()
        self.refused = 0
        self.info: Any = None
        self._advertised_host = advertised_host
        # FindCoordinator names the partition leaders' listeners (gateway.direct); False: this gateway.
        self.direct = LeaderRouting(lambda: client, register=True) if direct else None
        self._server: asyncio.Server | None = None
        self._registration: asyncio.Task[None] | None = None

    async def start(self, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> tuple[str, int]:
        """Listen on host:port (0: any free port); returns the advertised address."""
        check_listen_address(host, self.security)
        self._server = await asyncio.start_server(
            self._accept, host, port, ssl=self.security.ssl_context(), backlog=1024
        )
        bound_port = self._server.sockets[0].getsockname()[1]
        wildcard = host in ("", "0.0.0.0", "::")
        advertised = self._advertised_host or (socket.getfqdn() if wildcard else host)
        self.set_brokers([(self.node_id, advertised, bound_port)])
        if self.direct is not None:
            self._registration = asyncio.create_task(self.direct.keep_registered(lambda: self.info))
        log.info("Kafka gateway %s listening on %s:%d (%s)", self.node_id, host, bound_port,
                 self.security.protocol)
        return advertised, bound_port

    def set_brokers(self, brokers: list[tuple[int, str, int]]) -> None:
        """Every gateway's (node_id, host, port), this one's included, as Metadata lists them."""
        own = next(broker for broker in brokers if broker[0] == self.node_id)
        self.info = self.dispatch.GatewayInfo(
            node_id=self.node_id, host=own[1], port=own[2], brokers=tuple(sorted(brokers))
        )

    async def serve_forever(self) -> None:
        assert self._server is not None, "start() first"
        await self._server.serve_forever()

    async def close(self) -> None:
        if self._registration is not None:
            self._registration.cancel()
        if self.direct is not None and self.info is not None:
            await self.direct.close(self.info)
        if self._server is not None:
            self._server.close()
        serving = [c.task for c in self.connections if c.task is not None]
        for connection in list(self.connections):
            connection.abort()
        if self._server is not None:
            await self._server.wait_closed()
        # Python 3.11's wait_closed does not wait for the connections' tasks: each ends on its
        # aborted transport, and a task still pending when the loop stops is destroyed mid-close.
        if serving:
            await asyncio.wait(serving, timeout=CLOSE_FLUSH_S)

    def stats(self) -> dict[str, int]:
        """The server-side state that bounds its memory."""
        return {
            "connections": len(self.connections),
            "refused": self.refused,
            "pool_bytes_in_use": self.pool.in_use,
            "pool_bytes": self.pool.capacity,
            "pool_waiting": self.pool.waiting,
        }

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.connections) >= self.limits.max_connections:
            self.refused += 1
            if self.refused % REFUSALS_PER_LOG_LINE == 1:
                log.warning("gateway at max_connections %d: refused %d connection(s) so far, latest from %s",
                            self.limits.max_connections, self.refused, _peer(writer))
            writer.transport.abort()
            return
        connection = Connection(self, reader, writer)
        self.connections.add(connection)
        try:
            await connection.run()
        finally:
            self.connections.discard(connection)


class Connection:
    """One client connection, served one request at a time (see the module docstring)."""

    def __init__(self, gateway: Gateway, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.gateway = gateway
        self.peer = _peer(writer)
        self.sasl = SaslSession(gateway.security.plain_users)
        self._reader = reader
        self._writer = writer
        self._idle_s = gateway.limits.idle_timeout_ms / 1000
        self.task = asyncio.current_task()

    async def run(self) -> None:
        try:
            while await self._serve_one():
                pass
        except FrameError as exc:
            log.warning("closing Kafka connection from %s: %s", self.peer, exc)
        except ConnectionClosed as exc:
            log.debug("Kafka connection from %s closed: %s", self.peer, exc)
        except Exception:
            log.exception("closing Kafka connection from %s: request failed", self.peer)
        finally:
            await self._close()

    def abort(self) -> None:
        self._writer.transport.abort()

    async def _close(self) -> None:
        """Close after the last response is flushed (a refused login must reach the client)."""
        self._writer.close()
        with suppress(OSError, TimeoutError):
            async with asyncio.timeout(CLOSE_FLUSH_S):
                await self._writer.wait_closed()
        self.abort()

    async def _serve_one(self) -> bool:
        """Serve one request; False when the connection should close."""
        head = await self._read(4, at_boundary=True)
        if head is None:
            return False
        size = int.from_bytes(head, "big", signed=True)
        limit = self._frame_limit()
        if size < 0 or size > limit:
            raise FrameError(f"frame size {size} outside 0-{limit}")
        async with self.gateway.pool.reserve(size):
            frame = await self._read(size, at_boundary=False)
            assert frame is not None
            request = read_request(frame, self.gateway.versions)
            del frame
            response, close = await self._answer(request)
            if response is not None:
                await self._write(self.gateway.writer.write(request.correlation_id, response))
        if close:
            # Kafka's connection.failed.authentication.delay.ms: the client reads the refusal
            # before it sees the connection close, and a password guesser is slowed down.
            await asyncio.sleep(self.gateway.limits.failed_authentication_delay_ms / 1000)
        return not close

    def _frame_limit(self) -> int:
        limits = self.gateway.limits
        if self.sasl.authenticated:
            return limits.max_request_bytes
        return min(limits.max_request_bytes, limits.max_unauthenticated_bytes)

    async def _answer(self, request: Request) -> tuple[Any, bool]:
        """The response to `request` and whether the connection closes after it."""
        key = request.api_key
        if not self.sasl.permits(key):
            raise FrameError(f"api key {key} not allowed in this connection's SASL state")
        if key == API_VERSIONS:
            return api_versions_response(request, self.gateway.versions), False
        if key == SASL_HANDSHAKE:
            reply = self.sasl.on_handshake(request.body)
            return reply.response, reply.close
        if key == SASL_AUTHENTICATE:
            reply = self.sasl.on_authenticate(request.body, request.api_version)
            if reply.close:
                log.warning("closing Kafka connection from %s: SASL/PLAIN authentication failed", self.peer)
            return reply.response, reply.close
        response = await self.gateway.dispatch.handle(self._context(request), request.body)
        # None: a request Kafka does not answer (Produce with acks=0).
        answered = None if response is None else (response.__api_key__, response.__version__)
        if answered not in (None, (key, request.api_version)):
            raise TypeError(f"handler answered api key {key} v{request.api_version} with {response!r}")
        return response, False

    def _context(self, request: Request) -> Any:
        return self.gateway.dispatch.RequestContext(
            client_id=request.client_id,
            client_host=self.peer.rsplit(":", 1)[0],
            api_version=request.api_version,
            correlation_id=request.correlation_id,
            principal=self.sasl.principal,
            gateway=self.gateway.info,
            client=self.gateway.client,
            direct=self.gateway.direct,
        )

    async def _read(self, size: int, at_boundary: bool) -> bytes | None:
        """`size` bytes; None at a clean end of stream between frames."""
        try:
            async with asyncio.timeout(self._idle_s):
                return await self._reader.readexactly(size)
        except asyncio.IncompleteReadError as exc:
            if at_boundary and not exc.partial:
                return None
            raise FrameError(f"truncated frame: {len(exc.partial)} of {size} bytes, then the end") from None
        except TimeoutError:
            raise ConnectionClosed(f"idle for {self._idle_s:.0f} s") from None
        except OSError as exc:
            raise ConnectionClosed(str(exc)) from None

    async def _write(self, frame: bytes) -> None:
        self._writer.write(frame)
        try:
            async with asyncio.timeout(self._idle_s):
                await self._writer.drain()
        except TimeoutError:
            raise ConnectionClosed(f"responses unread for {self._idle_s:.0f} s") from None
        except OSError as exc:
            raise ConnectionClosed(str(exc)) from None


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if peer else "unknown"


def _default_dispatch() -> ModuleType:
    from gateway import apis

    return apis

