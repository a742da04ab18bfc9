"""A partition leader's Kafka listener: sockets, framing, order and limits on the partition's loop.

The listener runs on the partition actor's event loop, beside its runtime,
whose one thread is the scarce resource (DESIGN 9); so connections are
asyncio protocols, not stream tasks:
- Every complete frame of a read burst is parsed and handed on in one pass
  of `data_received`; each request's handler runs as its own task (a
  parked JoinGroup holds back no other request), and the responses of one
  connection are written in request order (`_flush`), as a Kafka broker
  answers them, those ready together in one write (`codec.ResponseWriter`
  encodes an answer that repeats once). A connection holds at most
  `MAX_IN_FLIGHT` requests; past that it stops reading until answers go out
  (TCP backpressure).
- The same rules as the gateway (gateway.server, gateway.security): the
  same `Limits` (frame size, unauthenticated frame size, connection cap,
  memory pool for frames being received, idle timeout, delay before
  closing a refused login), SASL/PLAIN and TLS from the same files, and
  loopback only without either. A malformed frame, an unknown api key or
  version, a request the SASL state forbids, or a handler that raises,
  closes that connection alone, with one log line and no answer.
- Idle connections are swept by one task per listener every
  `SWEEP_INTERVAL_S` (a third of the idle timeout at most), not by a timer
  per request or connection: a connection with no traffic and nothing in
  flight for `idle_timeout_ms`, or whose responses stay unread that long,
  is closed.
- A flood of connections cannot stall the shard: each pass of the loop
  handles what one socket read brought, and connections past the cap are
  closed at accept.
- Port: the first free one of the node's range
  (`KafkaListenerSettings.ports`); `ListenerUnavailable` when none is.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections import Counter, deque
from collections.abc import Callable
from typing import Any, cast

import ray

from actors.client.client import Client, controller_handle
from coordinator.errors import Errors
from gateway.apis import RequestContext
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
from gateway.direct import local
from gateway.direct.routing import Coordinator, LeaderRouting, listener_node_id, ray_node
from gateway.security import SaslSession, SecurityConfig, load_plain_users
from gateway.server import DEFAULT_HOST, REFUSALS_PER_LOG_LINE, Limits

logger = logging.getLogger(__name__)

MAX_IN_FLIGHT = 64
SWEEP_INTERVAL_S = 10.0
CLOSE_FLUSH_S = 5.0


def plugin(host: Any) -> DirectListener:
    """The listener of partition actor `host` (`actors.partition.kafka_plug.ListenerHost`), not
    started: the `raygroups.partition_listeners` entry point.

    Security is read on this node, from the paths in the service's settings:
    without SASL or TLS the listener is on loopback (gateway.security), else
    on the node's IP, as the deployed gateways are."""
    config = host.settings.kafka_listener
    security = SecurityConfig(
        plain_users=load_plain_users(config.sasl_users_file),
        tls_cert=config.tls_cert,
        tls_key=config.tls_key,
        tls_client_ca=config.tls_client_ca,
    )
    bind_host = DEFAULT_HOST
    if security.sasl or security.tls:
        bind_host = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    return DirectListener(host, bind_host, security, Limits(**dict(config.limits)))


class ListenerUnavailable(Exception):
    """The listener cannot listen (no free port in its range)."""


class FramePool:
    """Bytes of request frames being received, across every connection of the listener
    (Kafka's queued.max.request.bytes): a connection whose next frame does not fit
    stops reading until another releases room."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.in_use = 0
        self._waiting: deque[Callable[[], None]] = deque()

    def reserve(self, size: int, on_room: Callable[[], None]) -> bool:
        if self.in_use + size <= self.capacity:
            self.in_use += size
            return True
        self._waiting.append(on_room)
        return False

    def release(self, size: int) -> None:
        self.in_use -= size
        # Each waiter tries again; one whose frame still does not fit waits anew.
        waiting, self._waiting = self._waiting, deque()
        for on_room in waiting:
            on_room()


class DirectListener:
    """The Kafka listener of one partition actor (`host`, an `actors.partition.kafka_plug.ListenerHost`)."""

    def __init__(self, host: Any, bind_host: str, security: SecurityConfig, limits: Limits) -> None:
        self.host = host
        self.bind_host = bind_host
        self.security = security
        self.limits = limits
        self.versions = advertised_versions(local.SUPPORTED, security.extra_versions())
        self.pool = FramePool(limits.memory_pool_bytes)
        self.writer = ResponseWriter()
        self.connections: set[DirectConnection] = set()
        # Requests answered, per api key (`describe`): what reached this leader directly.
        self.served: Counter[int] = Counter()
        self.refused = 0
        self.port = -1
        self.client = local.LocalClient(host)
        self.routing = LeaderRouting(self._make_client, register=False)
        self.ray_node = ray_node()
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        low, high = self.host.settings.kafka_listener.ports
        loop = asyncio.get_running_loop()
        tls = self.security.ssl_context()
        for port in range(low, high + 1):
            try:
                self._server = await loop.create_server(
                    lambda: DirectConnection(self), self.bind_host, port, ssl=tls, backlog=1024
                )
            except OSError as exc:
                if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                    continue
                raise
            self.port = port
            break
        else:
            raise ListenerUnavailable(f"no free port in {low}-{high} on {self.bind_host}")
        self._sweeper = loop.create_task(self._sweep(), name="kafka-listener-sweep")
        logger.info("partition %d: Kafka listener on %s:%d (%s)", self.host.partition, self.bind_host,
                    self.port, self.security.protocol)

    @property
    def node_id(self) -> int:
        return listener_node_id(self.host.partition, self.host.epoch)

    def describe(self) -> dict[str, Any]:
        return {
            "host": self.bind_host, "port": self.port, "node_id": self.node_id, "ray_node": self.ray_node,
            "protocol": self.security.protocol, "connections": len(self.connections),
            "served": dict(self.served),
        }

    def info(self) -> local.ListenerInfo:
        return local.ListenerInfo(self.node_id, self.bind_host, self.port)

    async def coordinator(self, group_id: str, fallback: Coordinator | None) -> Coordinator:
        """FindCoordinator's answer for `group_id` (gateway.direct.local); a leader
        without a reachable listener is COORDINATOR_NOT_AVAILABLE (no `fallback` here)."""
        if self.client.partition_for(group_id) == self.host.partition and self.host.leads():
            return Coordinator(Errors.NONE, self.node_id, self.bind_host, self.port)
        return await self.routing.coordinator(group_id, None)

    async def brokers(self, me: Any) -> list[tuple[int, str, int]]:
        """Metadata's brokers: the service's, this listener among them."""
        return await self.routing.brokers(me)

    async def listed_partitions(self, me: Any) -> list[int]:
        """ListGroups on a listener lists its own partition's groups, as a Kafka broker."""
        return [self.host.partition]

    async def registry_client(self) -> Client | None:
        """The service's `Client` (the topic registry through Ray); None without one."""
        try:
            client: Client = await self.routing.client()
        except Exception:
            return None
        return client

    def _make_client(self) -> Client:
        if not ray.is_initialized():  # a partition driven without Ray (tests): get_actor would start one
            raise RuntimeError("no Ray: no controller")
        return Client(controller_handle(self.host.settings.namespace))

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._server is not None:
            self._server.close()
        for connection in list(self.connections):
            connection.abort()

    def accepts(self) -> bool:
        if len(self.connections) < self.limits.max_connections:
            return True
        self.refused += 1
        if self.refused % REFUSALS_PER_LOG_LINE == 1:
            logger.warning("Kafka listener of partition %d at max_connections %d: refused %d so far",
                           self.host.partition, self.limits.max_connections, self.refused)
        return False

    async def _sweep(self) -> None:
        idle_s = self.limits.idle_timeout_ms / 1000
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(SWEEP_INTERVAL_S, idle_s / 3))
            now = loop.time()
            for connection in list(self.connections):
                connection.sweep(now, idle_s)


class DirectConnection(asyncio.Protocol):
    """One client connection (module docstring)."""

    def __init__(self, listener: DirectListener) -> None:
        self.listener = listener
        self.sasl = SaslSession(listener.security.plain_users)
        self.peer = "unknown"
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._reserved = 0  # pool bytes held for the frame being received
        self._waiting_room = False
        self._in_flight: deque[_Slot] = deque()
        self._closing = False
        self._reading = True
        self._writing_paused_at: float | None = None
        self._loop = asyncio.get_running_loop()
        self.active_at = self._loop.time()

    # ------------------------------------------------------------ transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # An asyncio.Transport in all but class: uvloop's (the loop Ray runs the actor on,
        # actors/core/loops.py) is its own.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "unknown"
        if not self.listener.accepts():
            self._closing = True
            transport.abort()
            return
        self.listener.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self.listener.connections.discard(self)
        self._release()
        for slot in self._in_flight:
            if slot.task is not None:
                slot.task.remove_done_callback(self._on_answered)

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

    def sweep(self, now: float, idle_s: float) -> None:
        if self._writing_paused_at is not None and now - self._writing_paused_at > idle_s:
            logger.debug("Kafka connection from %s closed: responses unread for %.0f s", self.peer, idle_s)
            self.abort()
        elif not self._in_flight and now - self.active_at > idle_s:
            logger.debug("Kafka connection from %s closed: idle for %.0f s", self.peer, idle_s)
            self.abort()

    # ------------------------------------------------------------- requests

    def data_received(self, data: bytes) -> None:
        self.active_at = self._loop.time()
        self._buffer += data
        try:
            self._take_frames()
        except FrameError as exc:
            logger.warning("closing Kafka connection from %s: %s", self.peer, exc)
            self.abort()

    def eof_received(self) -> bool | None:
        if self._buffer:
            logger.warning("closing Kafka connection from %s: truncated frame (%d bytes, then the end)",
                           self.peer, len(self._buffer))
        return None  # close the transport

    def _take_frames(self) -> None:
        """Every complete frame in the buffer, in order, while this connection may take more."""
        buffer = self._buffer
        while not self._closing and len(buffer) >= 4 and len(self._in_flight) < MAX_IN_FLIGHT:
            size = int.from_bytes(buffer[:4], "big", signed=True)
            limit = self._frame_limit()
            if size < 0 or size > limit:
                raise FrameError(f"frame size {size} outside 0-{limit}")
            if not self._reserved:
                if not self.listener.pool.reserve(size, self._on_room):
                    self._waiting_room = True
                    self._pause_reading()
                    return
                self._reserved = size
            if len(buffer) < 4 + size:
                return
            frame = bytes(buffer[4 : 4 + size])
            del buffer[: 4 + size]
            self._release()
            self._answer(read_request(frame, self.listener.versions))
        if len(self._in_flight) >= MAX_IN_FLIGHT:
            self._pause_reading()

    def _frame_limit(self) -> int:
        limits = self.listener.limits
        if self.sasl.authenticated:
            return limits.max_request_bytes
        return min(limits.max_request_bytes, limits.max_unauthenticated_bytes)

    def _answer(self, request: Request) -> None:
        key = request.api_key
        if not self.sasl.permits(key):
            raise FrameError(f"api key {key} not allowed in this connection's SASL state")
        self.listener.served[key] += 1
        if key == API_VERSIONS:
            self._in_flight.append(_Slot(request, api_versions_response(request, self.listener.versions)))
        elif key == SASL_HANDSHAKE:
            reply = self.sasl.on_handshake(request.body)
            self._in_flight.append(_Slot(request, reply.response, close=reply.close))
        elif key == SASL_AUTHENTICATE:
            reply = self.sasl.on_authenticate(request.body, request.api_version)
            if reply.close:
                logger.warning("closing Kafka connection from %s: SASL/PLAIN authentication failed",
                               self.peer)
            self._in_flight.append(_Slot(request, reply.response, close=reply.close))
        else:
            task = self._loop.create_task(local.handle(self._context(request), request.body))
            self._in_flight.append(_Slot(request, task=task))
            task.add_done_callback(self._on_answered)
            return
        self._flush()

    def _context(self, request: Request) -> RequestContext:
        return RequestContext(
            client_id=request.client_id,
            client_host=self.peer.rsplit(":", 1)[0],
            api_version=request.api_version,
            correlation_id=request.correlation_id,
            principal=self.sasl.principal,
            gateway=self.listener.info(),  # type: ignore[arg-type]
            client=self.listener.client,  # type: ignore[arg-type]
            direct=self.listener,
        )

    def _on_answered(self, _: asyncio.Task[Any]) -> None:
        self._flush()

    def _flush(self) -> None:
        """Write the answered requests at the head of the queue, in request order: the
        responses ready together go out in one write (one send for a pipelined burst)."""
        transport = self._transport
        frames: list[bytes] = []
        failed = close = False
        while self._in_flight and not self._closing and transport is not None and not close:
            slot = self._in_flight[0]
            if slot.task is not None:
                if not slot.task.done():
                    break
                if slot.task.cancelled() or slot.task.exception() is not None:
                    logger.error("closing Kafka connection from %s: request failed", self.peer,
                                 exc_info=None if slot.task.cancelled() else slot.task.exception())
                    failed = True
                    break
                slot.response = slot.task.result()
            self._in_flight.popleft()
            if slot.response is not None:  # None: a request Kafka does not answer
                frames.append(self.listener.writer.write(slot.request.correlation_id, slot.response))
            self.active_at = self._loop.time()
            close = slot.close
        if frames and transport is not None:
            transport.write(frames[0] if len(frames) == 1 else b"".join(frames))
        if failed:
            self.abort()
        elif close:
            self._close_after_refusal()
        else:
            self._maybe_resume_reading()

    def _close_after_refusal(self) -> None:
        """Kafka's connection.failed.authentication.delay.ms: the refusal is read first."""
        self._closing = True
        self._pause_reading()
        transport = self._transport
        assert transport is not None
        self._loop.call_later(self.listener.limits.failed_authentication_delay_ms / 1000, transport.close)

    # --------------------------------------------------------- backpressure

    def _pause_reading(self) -> None:
        if self._reading and self._transport is not None and not self._transport.is_closing():
            self._reading = False
            self._transport.pause_reading()

    def _maybe_resume_reading(self) -> None:
        if self._reading or self._closing or self._waiting_room or self._writing_paused_at is not None:
            return
        if len(self._in_flight) >= MAX_IN_FLIGHT or self._transport is None:
            return
        self._reading = True
        self._transport.resume_reading()
        try:
            self._take_frames()  # what was buffered before the pause
        except FrameError as exc:
            logger.warning("closing Kafka connection from %s: %s", self.peer, exc)
            self.abort()

    def _on_room(self) -> None:
        self._waiting_room = False
        self._maybe_resume_reading()

    def _release(self) -> None:
        if self._reserved:
            reserved, self._reserved = self._reserved, 0
            self.listener.pool.release(reserved)


class _Slot:
    """One request of a connection until its response is written."""

    __slots__ = ("request", "response", "task", "close")

    def __init__(self, request: Request, response: Any = None, task: asyncio.Task[Any] | None = None,
                 close: bool = False) -> None:
        self.request = request
        self.response = response
        self.task = task
        self.close = close
