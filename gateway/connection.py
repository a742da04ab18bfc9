"""The Kafka connection core, one for the gateway (gateway.server) and every leader's listener.

Owns what a Kafka broker's SocketServer and SaslServerAuthenticator own:
framing, limits, the handshake gate, the request context, the memory pool,
deadlines, order. A server (`ConnectionCore`) gives it a handler and what a
request's context names (the broker, the client, the direct routing); each
connection is an asyncio protocol (`KafkaConnection`), so it costs no task
and no timer while it is quiet, on the gateway's loop or a partition's.

Rules (Kafka's broker defaults where Kafka has one, all in `Limits`):
- Every complete frame of a read is parsed in one pass; each request's
  handler runs as its own task (a parked JoinGroup holds back no other
  request); the answers of one connection are written in request order,
  those ready together in one write. At most `MAX_IN_FLIGHT` requests per
  connection; past that it stops reading until answers go out.
- A frame above `max_request_bytes` (socket.request.max.bytes; before a
  SASL login `max_unauthenticated_bytes`), a negative size, a truncated or
  malformed frame, an unknown api key or version, a request the SASL state
  forbids, or a handler that raises or answers another api: one log line,
  that connection closes unanswered, every other one is served on.
- Memory (`gateway.pool`): a frame's size is reserved from the server's
  pool as soon as its size prefix arrives and held until its answer is
  written. A frame that does not fit waits and its connection stops reading;
  a release wakes the waiters that fit. Connections not logged in share at
  most half the pool (`Limits.unauthenticated_pool_bytes`), a login's small
  frames aside.
- Frame deadline: a frame whose first byte has arrived must be whole within
  `frame_deadline_ms` (default 5 s), else its connection is closed and its
  reservation returned. Without it a client trickling a byte a second, or
  promising a large frame and going silent, would hold its reservation for
  ever (a read refreshes the idle clock): a few hundred such strangers fill
  the pool and every client of that server waits. 5 s because the frames a
  coordinator receives are small (a 10,000-partition OffsetCommit is about
  0.5 MB: a tenth of a second at 50 Mbit/s), a client's own request timeout
  is 30 s (request.timeout.ms), so an honest client whose frame was cut off
  retries long before it gives up, and an attacker's reservation is back
  within seconds. The clock runs only while the connection is read: time
  spent waiting for pool room, for answers in flight or for the client to
  read its answers is the server's, so the deadline restarts when reading
  resumes. One timer per frame still arriving at the end of a read, none
  for a frame read whole.
- Idle: one sweeper task per server every `SWEEP_INTERVAL_S` (a third of
  the idle timeout at most) closes a connection with nothing in flight and
  no byte for `idle_timeout_ms` (connections.max.idle.ms), or whose answers
  stay unread that long.
- Connections past `max_connections` are closed at accept (logged once,
  then once per `REFUSALS_PER_LOG_LINE`); a refused login is closed
  `failed_authentication_delay_ms` after its answer.
- Log lines go to the server's logger (`ConnectionCore.log`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, cast

from gateway.authorize import AclGuard, principal_of
from gateway.codec import (
    API_VERSIONS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    FrameError,
    Request,
    ResponseWriter,
    VersionTable,
    advertised_versions,
    api_versions_response,
    read_request,
)
from gateway.context import RequestContext
from gateway.pool import MemoryPool
from gateway.security import SaslSession, SecurityConfig

DEFAULT_HOST = "127.0.0.1"
MAX_IN_FLIGHT = 64
SWEEP_INTERVAL_S = 10.0
# Refusals past the connection limit are logged once, then once per this many.
REFUSALS_PER_LOG_LINE = 1000
# How long closing a server waits for the handlers still running.
CLOSE_FLUSH_S = 5.0


@dataclass(frozen=True, slots=True)
class Limits:
    max_request_bytes: int = 104_857_600
    max_unauthenticated_bytes: int = 524_288
    max_connections: int = 10_000
    memory_pool_bytes: int = 209_715_200
    idle_timeout_ms: int = 600_000
    failed_authentication_delay_ms: int = 100
    frame_deadline_ms: int = 5_000

    def __post_init__(self) -> None:
        if self.max_request_bytes > self.memory_pool_bytes:
            raise ValueError("memory_pool_bytes must hold at least one frame of max_request_bytes")
        if min(self.max_request_bytes, self.max_unauthenticated_bytes, self.max_connections,
               self.idle_timeout_ms, self.frame_deadline_ms) <= 0:
            raise ValueError("gateway limits must be positive")

    @property
    def unauthenticated_pool_bytes(self) -> int:
        """What frames of connections not logged in may hold: half the pool, one frame at least."""
        return max(self.memory_pool_bytes // 2, self.frame_limit(authenticated=False))

    def frame_limit(self, authenticated: bool) -> int:
        if authenticated:
            return self.max_request_bytes
        return min(self.max_request_bytes, self.max_unauthenticated_bytes)


# The handler of one request (gateway.apis.handle, gateway.direct.local.handle).
Handler = Callable[[RequestContext, Any], Coroutine[Any, Any, Any]]
# What a request's context names: (ctx.gateway, ctx.client, ctx.direct).
Scope = Callable[[], tuple[Any, Any, Any]]


class ConnectionCore:
    """What one server's connections share: limits, SASL users, versions, pool, handler, logger."""

    def __init__(self, name: str, security: SecurityConfig, limits: Limits, supported: VersionTable,
                 handle: Handler, scope: Scope, log: logging.Logger, guard: AclGuard | None = None) -> None:
        self.name = name
        self.guard = guard  # the authorizer (gateway.authorize); None: off
        self.security = security
        self.limits = limits
        self.versions = advertised_versions(supported, security.extra_versions())
        self.pool = MemoryPool(limits.memory_pool_bytes, limits.unauthenticated_pool_bytes)
        self.writer = ResponseWriter()
        self.handle = handle
        self.scope = scope
        self.log = log
        self.connections: set[KafkaConnection] = set()
        # Requests answered, per api key: what reached this server.
        self.served: Counter[int] = Counter()
        self.refused = 0
        self._sweeper: asyncio.Task[None] | None = None

    def protocol(self) -> KafkaConnection:
        """A new connection: the protocol factory of `loop.create_server`."""
        return KafkaConnection(self)

    def start(self) -> None:
        """Start the idle sweeper (on the running loop)."""
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep(), name=f"{self.name} sweep")
        self._sweeper.add_done_callback(self._on_sweeper_end)

    def accepts(self) -> bool:
        if len(self.connections) < self.limits.max_connections:
            return True
        self.refused += 1
        if self.refused % REFUSALS_PER_LOG_LINE == 1:
            self.log.warning("%s at max_connections %d: refused %d connection(s) so far",
                             self.name, self.limits.max_connections, self.refused)
        return False

    async def close(self) -> None:
        """Close every connection; wait (bounded) for the handlers still running."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self.guard is not None:
            self.guard.close()
        running = [task for connection in self.connections for task in connection.running()]
        for connection in list(self.connections):
            connection.abort()
        if running:
            await asyncio.wait(running, timeout=CLOSE_FLUSH_S)

    def stats(self) -> dict[str, int]:
        """The state that bounds the server's memory."""
        return {
            "connections": len(self.connections),
            "refused": self.refused,
            "pool_bytes_in_use": self.pool.in_use,
            "pool_bytes_in_use_unauthenticated": self.pool.unauthenticated_in_use,
            "pool_bytes": self.pool.capacity,
            "pool_waiting": self.pool.waiting,
        }

    async def _sweep(self) -> None:
        idle_s = self.limits.idle_timeout_ms / 1000
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(SWEEP_INTERVAL_S, idle_s / 3))
            now = loop.time()
            for connection in list(self.connections):
                connection.sweep(now, idle_s)

    def _on_sweeper_end(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        # A sweep that raised is a bug; idle connections must still be closed: log and sweep on.
        self.log.error("%s: idle sweeper failed; restarted", self.name, exc_info=task.exception())
        self.start()


# A reservation of the pool: (bytes, taken before a SASL login).
Reservation = tuple[int, bool]


class KafkaConnection(asyncio.Protocol):
    """One client connection (module docstring)."""

    def __init__(self, core: ConnectionCore) -> None:
        self.core = core
        self.sasl = SaslSession(core.security.plain_users)
        self.peer = "unknown"
        self._peercert: Any = None  # the TLS client certificate (gateway.authorize.principal_of)
        self._host = "unknown"
        # The service client as this connection's principal may use it, kept while the login and
        # the core's client are the same: (the core's client, the SASL user, the wrapper).
        self._authorized: tuple[Any, str | None, Any] | None = None
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._reserved: Reservation | None = None  # for the frame being received
        self._waiting_for: Reservation | None = None  # asked of the pool, not granted yet
        self._in_flight: deque[_Slot] = deque()
        self._closing = False
        self._reading = True
        self._writing_paused_at: float | None = None
        self._loop = asyncio.get_running_loop()
        self.active_at = self._loop.time()
        self._frame_started: float | None = None  # when the frame being received began arriving
        self._read_from = self.active_at  # the last read, or resumed reading: when buffered bytes count from
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # An asyncio.Transport in all but class: uvloop's (the loop Ray runs actors on) is its own.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "unknown"
        self._host = self.peer.rsplit(":", 1)[0]
        self._peercert = transport.get_extra_info("peercert")
        if not self.core.accepts():
            self._closing = True
            self._transport.abort()
            return
        self.core.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self.core.connections.discard(self)
        self._cancel_deadline()
        if self._waiting_for is not None:
            self.core.pool.cancel(self._on_room)
        self._release(self._reserved)
        self._reserved = None
        # A request still being handled keeps its reservation until its handler ends (`_on_answered`).
        running = deque(slot for slot in self._in_flight if slot.task is not None and not slot.task.done())
        for slot in self._in_flight:
            if slot not in running:
                self._release(slot.reserved)
        self._in_flight = running

    def pause_writing(self) -> None:
        self._writing_paused_at = self._loop.time()
        self._pause_reading()

    def resume_writing(self) -> None:
        self._writing_paused_at = None
        self._maybe_resume_reading()

    def abort(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.abort()

    def running(self) -> list[asyncio.Task[Any]]:
        """The handlers of this connection still running."""
        return [slot.task for slot in self._in_flight if slot.task is not None and not slot.task.done()]

    def sweep(self, now: float, idle_s: float) -> None:
        if self._writing_paused_at is not None and now - self._writing_paused_at > idle_s:
            self.core.log.debug("Kafka connection from %s closed: responses unread for %.0f s",
                                self.peer, idle_s)
            self.abort()
        elif not self._in_flight and now - self.active_at > idle_s:
            self.core.log.debug("Kafka connection from %s closed: idle for %.0f s", self.peer, idle_s)
            self.abort()

    def data_received(self, data: bytes) -> None:
        self.active_at = self._read_from = self._loop.time()
        if not self._buffer:
            self._frame_started = self.active_at
        self._buffer += data
        self._take_frames_or_close()

    def eof_received(self) -> bool | None:
        if self._buffer:
            self.core.log.warning("closing Kafka connection from %s: truncated frame (%d bytes, "
                                  "then the end)", self.peer, len(self._buffer))
        return None  # close the transport

    def _take_frames_or_close(self) -> None:
        try:
            self._take_frames()
        except FrameError as exc:
            self.core.log.warning("closing Kafka connection from %s: %s", self.peer, exc)
            self.abort()

    def _take_frames(self) -> None:
        """Every complete frame in the buffer, in order, while this connection may take more."""
        buffer = self._buffer
        while not self._closing and len(buffer) >= 4 and len(self._in_flight) < MAX_IN_FLIGHT:
            reserved = self._reserved or self._reserve(int.from_bytes(buffer[:4], "big", signed=True))
            if reserved is None:
                return
            size = reserved[0]
            if len(buffer) < 4 + size:
                break
            frame = bytes(buffer[4 : 4 + size])
            del buffer[: 4 + size]
            self._cancel_deadline()
            self._frame_started = self._read_from if buffer else None
            self._answer(read_request(frame, self.core.versions))
        if len(self._in_flight) >= MAX_IN_FLIGHT:
            self._pause_reading()
        self._arm_deadline()

    def _reserve(self, size: int) -> Reservation | None:
        """Check the size the header promises and reserve it; None: waiting for room."""
        authenticated = self.sasl.authenticated
        limit = self.core.limits.frame_limit(authenticated)
        if size < 0 or size > limit:
            raise FrameError(f"frame size {size} outside 0-{limit}")
        if not self.core.pool.reserve(size, authenticated, self._on_room):
            self._waiting_for = (size, authenticated)
            self._pause_reading()
            return None
        self._reserved = (size, authenticated)
        return self._reserved

    def _answer(self, request: Request) -> None:
        key = request.api_key
        if not self.sasl.permits(key):
            raise FrameError(f"api key {key} not allowed in this connection's SASL state")
        self.core.served[key] += 1
        reserved, self._reserved = self._reserved, None
        if key == API_VERSIONS:
            response = api_versions_response(request, self.core.versions)
            self._in_flight.append(_Slot(request, reserved, response))
        elif key == SASL_HANDSHAKE:
            reply = self.sasl.on_handshake(request.body)
            self._in_flight.append(_Slot(request, reserved, reply.response, close=reply.close))
        elif key == SASL_AUTHENTICATE:
            reply = self.sasl.on_authenticate(request.body, request.api_version)
            if reply.close:
                self.core.log.warning("closing Kafka connection from %s: SASL/PLAIN authentication failed",
                                      self.peer)
            self._in_flight.append(_Slot(request, reserved, reply.response, close=reply.close))
        else:
            handled = self.core.handle(self._context(request), request.body)
            task: asyncio.Task[Any] = self._loop.create_task(handled)
            self._in_flight.append(_Slot(request, reserved, task=task))
            task.add_done_callback(self._on_answered)
            return
        self._flush()

    def _context(self, request: Request) -> RequestContext:
        gateway, client, direct = self.core.scope()
        host = self._host
        guard = self.core.guard
        if guard is not None:
            authorized = self._authorized
            if authorized is None or authorized[0] is not client or authorized[1] != self.sasl.principal:
                user = self.sasl.principal
                principal = principal_of(user, self._peercert, guard.mapper)
                authorized = self._authorized = (client, user, guard.client_for(client, principal, host))
            client = authorized[2]
        return RequestContext(
            client_id=request.client_id,
            client_host=host,
            api_version=request.api_version,
            correlation_id=request.correlation_id,
            principal=self.sasl.principal,
            gateway=gateway,
            client=client,
            direct=direct,
        )

    def _on_answered(self, task: asyncio.Task[Any]) -> None:
        if not self._closing:
            self._flush()
            return
        # The connection is gone: the answer is dropped, its reservation returned.
        if not task.cancelled() and task.exception() is not None:
            self.core.log.debug("Kafka connection from %s: request failed after the close", self.peer)
        for slot in self._in_flight:
            if slot.task is task:
                self._in_flight.remove(slot)
                self._release(slot.reserved)
                break

    def _flush(self) -> None:
        """Write the answered requests at the head of the queue, in request order: the
        responses ready together go out in one write (one send for a pipelined burst)."""
        transport = self._transport
        frames: list[bytes] = []
        written: list[Reservation | None] = []
        failed = close = False
        while self._in_flight and not self._closing and transport is not None and not close:
            slot = self._in_flight[0]
            if slot.task is not None:
                if not slot.task.done():
                    break
                if not self._take_result(slot):
                    failed = True
                    break
            self._in_flight.popleft()
            written.append(slot.reserved)
            if slot.response is not None:  # None: a request Kafka does not answer
                frames.append(self.core.writer.write(slot.request.correlation_id, slot.response))
            self.active_at = self._loop.time()
            close = slot.close
        if frames and transport is not None:
            transport.write(frames[0] if len(frames) == 1 else b"".join(frames))
        # Written (into the transport, whose buffer pause_writing bounds): the frames' bytes go back.
        for reserved in written:
            self._release(reserved)
        if failed:
            self.abort()
        elif close:
            self._close_after_refusal()
        else:
            self._maybe_resume_reading()

    def _take_result(self, slot: _Slot) -> bool:
        """Set the slot's response from its handler; False (logged) when it failed."""
        task = cast(asyncio.Task[Any], slot.task)
        if task.cancelled() or task.exception() is not None:
            self.core.log.error("closing Kafka connection from %s: request failed", self.peer,
                                exc_info=None if task.cancelled() else task.exception())
            return False
        response = task.result()
        request = slot.request
        if response is not None and (response.__api_key__, response.__version__) != (
            request.api_key, request.api_version
        ):
            self.core.log.error("closing Kafka connection from %s: api key %d v%d answered with %r",
                                self.peer, request.api_key, request.api_version, response)
            return False
        slot.response = response
        return True

    def _close_after_refusal(self) -> None:
        """Kafka's connection.failed.authentication.delay.ms: the refusal is read first."""
        self._closing = True
        self._pause_reading()
        transport = self._transport
        assert transport is not None
        self._loop.call_later(self.core.limits.failed_authentication_delay_ms / 1000, transport.close)

    def _arm_deadline(self) -> None:
        """A frame partly here while reading: it must be whole by its deadline."""
        if self._buffer and self._reading and not self._closing:
            if self._deadline is None:
                started = self._frame_started if self._frame_started is not None else self.active_at
                self._deadline = self._loop.call_at(
                    started + self.core.limits.frame_deadline_ms / 1000, self._on_deadline
                )
        else:
            self._cancel_deadline()

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _on_deadline(self) -> None:
        self._deadline = None
        self.core.log.info("closing Kafka connection from %s: frame not whole %d ms after its first "
                           "byte (%d bytes here)", self.peer, self.core.limits.frame_deadline_ms,
                           len(self._buffer))
        self.abort()

    def _release(self, reserved: Reservation | None) -> None:
        if reserved is not None:
            self.core.pool.release(*reserved)

    def _on_room(self) -> None:
        """The pool granted the reservation this connection waited for."""
        self._reserved, self._waiting_for = self._waiting_for, None
        self._maybe_resume_reading()

    def _pause_reading(self) -> None:
        # The client is not read meanwhile: its frame's deadline waits too.
        self._cancel_deadline()
        if self._reading and self._transport is not None and not self._transport.is_closing():
            self._reading = False
            self._transport.pause_reading()

    def _maybe_resume_reading(self) -> None:
        if self._reading or self._closing or self._waiting_for is not None:
            return
        if self._writing_paused_at is not None:
            return
        if len(self._in_flight) >= MAX_IN_FLIGHT or self._transport is None:
            return
        self._reading = True
        self._transport.resume_reading()
        self._read_from = self._loop.time()
        self._frame_started = self._read_from if self._buffer else None
        self._take_frames_or_close()  # what was buffered before the pause


class _Slot:
    """One request of a connection until its response is written, with the pool bytes its frame holds."""

    __slots__ = ("request", "reserved", "response", "task", "close")

    def __init__(self, request: Request, reserved: Reservation | None, response: Any = None,
                 task: asyncio.Task[Any] | None = None, close: bool = False) -> None:
        self.request = request
        self.reserved = reserved
        self.response = response
        self.task = task
        self.close = close
