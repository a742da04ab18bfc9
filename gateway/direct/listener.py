"""A partition leader's Kafka listener: a socket on the partition's event loop.

The listener runs on the partition actor's event loop, beside its runtime,
whose one thread is the scarce resource (DESIGN 9). Its connections are the
gateway's (`gateway.connection`, one core for both): asyncio protocols that
parse every complete frame of a read in one pass, answer in request order,
and apply the same `Limits` (frame size, SASL gate, memory pool held until
the answer is written, frame deadline, idle sweep, connection cap), with
SASL/PLAIN and TLS from the same files, loopback only without either. What
the listener adds: its port, the APIs it serves (`local`), FindCoordinator's
and Metadata's answers through the controller's routing, and `describe`.
- A flood of connections cannot stall the shard: each pass of the loop
  handles what one socket read brought, connections past the cap are
  closed at accept, and a slow client is closed at its frame's deadline.
- Port: the first free one of the node's range
  (`KafkaListenerSettings.ports`); `ListenerUnavailable` when none is.
- Memory (docs/capacity.md): this module is what every leader imports; the
  gateway's code that serves connections (`gateway.direct.served`: kio,
  the handlers, the Ray client) is loaded on a thread when the first client
  connects, for a plaintext listener (`gateway.plain`), and at start for a
  secured one. Connections accepted meanwhile wait, not reading, and are
  handed to it as they are; if it cannot load, they are closed, the port
  too, and `describe` says why. The socket is bound here, by address, so that no
  name is resolved (uvloop resolves on a pool of four threads that then stay).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from typing import Any

import ray

from gateway.direct.node_ids import listener_node_id, ray_node
from gateway.plain import is_plaintext

logger = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"  # gateway.connection.DEFAULT_HOST, where a listener without SASL or TLS binds
BACKLOG = 1024


def plugin(host: Any) -> DirectListener:
    """The listener of partition actor `host` (`actors.partition.kafka_plug.ListenerHost`), not
    started: the `raygroups.partition_listeners` entry point.

    Security is read on this node, from the paths in the service's settings:
    without SASL or TLS the listener is on loopback (gateway.security), else
    on the node's IP, as the deployed gateways are."""
    config = host.settings.kafka_listener
    plaintext = is_plaintext(config.sasl_users_file, config.tls_cert)
    bind_host = LOOPBACK if plaintext else ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    return DirectListener(host, bind_host, lazy=plaintext)


class ListenerUnavailable(Exception):
    """The listener cannot listen (no free port in its range)."""


class _Waiting(asyncio.Protocol):
    """A connection accepted before the served code is loaded: it reads nothing meanwhile."""

    def __init__(self, listener: DirectListener) -> None:
        self.listener = listener
        self.transport: asyncio.BaseTransport | None = None
        self.received = bytearray()
        self.ended = self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        listener = self.listener
        if listener.failed:
            transport.close()
            return
        if listener.served is not None:
            # Loaded between this connection's accept and this call (the loop schedules
            # connection_made after making the protocol): the waiting ones were handed over.
            self._give(listener.served.protocol())
            return
        transport.pause_reading()  # type: ignore[attr-defined]
        listener.waiting.append(self)
        listener.load_soon()

    def data_received(self, data: bytes) -> None:
        self.received += data

    def eof_received(self) -> bool:
        self.ended = True
        return True  # kept open: the served protocol answers what came before the end

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True

    def hand_over(self, protocol: asyncio.Protocol) -> None:
        """Give the connection to the served `protocol`, with what it received meanwhile."""
        assert self.transport is not None
        self.transport.resume_reading()  # type: ignore[attr-defined]  # before: the served protocol may pause
        self._give(protocol)

    def _give(self, protocol: asyncio.Protocol) -> None:
        transport = self.transport
        assert transport is not None
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        if self.received:
            protocol.data_received(bytes(self.received))
        if self.ended and not protocol.eof_received():
            transport.close()


class DirectListener:
    """The Kafka listener of one partition actor (`host`, an `actors.partition.kafka_plug.ListenerHost`)."""

    def __init__(self, host: Any, bind_host: str, lazy: bool) -> None:
        self.host = host
        self.bind_host = bind_host
        self.lazy = lazy
        self.port = -1
        self.ray_node = ray_node()
        self.served: Any = None  # the gateway.direct.served.ServedListener, once loaded
        self.waiting: list[_Waiting] = []
        self._error: str | None = None
        self._loading: asyncio.Task[None] | None = None
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        tls = None
        if not self.lazy:
            self.served = await self._loaded()
            tls = self.served.security.ssl_context()
        low, high = self.host.settings.kafka_listener.ports
        loop = asyncio.get_running_loop()
        for port in range(low, high + 1):
            sock = None
            try:
                sock = _bound(self.bind_host, port)
                self._server = await loop.create_server(self._protocol, sock=sock, ssl=tls, backlog=BACKLOG)
            except OSError as exc:
                if sock is not None:
                    sock.close()
                if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                    continue
                raise
            self.port = port
            break
        else:
            raise ListenerUnavailable(f"no free port in {low}-{high} on {self.bind_host}")
        if self.served is not None:
            self.served.port = port
            self.served.start()
        logger.info("partition %d: Kafka listener on %s:%d (%s)", self.host.partition, self.bind_host,
                    self.port, "PLAINTEXT" if self.served is None else self.served.security.protocol)

    def _protocol(self) -> asyncio.Protocol:
        if self.served is not None:
            protocol: asyncio.Protocol = self.served.protocol()
            return protocol
        return _Waiting(self)

    async def _loaded(self) -> Any:
        """The served half, imported on a thread (the partition's loop serves meanwhile)."""
        module = await asyncio.to_thread(_import_served)
        security = module.security_of(self.host)
        return module.ServedListener(self.host, self.bind_host, self.port, security, logger)

    def load_soon(self) -> None:
        if self._loading is None:
            self._loading = asyncio.get_running_loop().create_task(self._load(), name="kafka-listener-load")

    async def _load(self) -> None:
        """Load the served half for the first connection, then hand it every connection waiting."""
        try:
            served = await self._loaded()
            served.start()
        except Exception as exc:
            self._error = f"Kafka listener not loaded: {exc!r}"
            logger.exception("partition %d: %s; serving Ray callers only", self.host.partition, self._error)
            if self._server is not None:
                self._server.close()
            for waiting in self.waiting:
                if waiting.transport is not None:
                    waiting.transport.close()
            self.waiting = []
            return
        self.served = served
        accepted, self.waiting = self.waiting, []
        for connection in accepted:
            if not connection.lost:
                connection.hand_over(served.protocol())

    @property
    def failed(self) -> bool:
        """The served code could not be loaded: no connection is taken any more."""
        return self._error is not None

    def acls_changed(self) -> None:
        """The topic registry's push after an ACL change: read them now (`AclWatch.nudge`)."""
        if self.served is not None:
            self.served.acls_changed()

    @property
    def node_id(self) -> int:
        return listener_node_id(self.host.partition, self.host.epoch)

    def describe(self) -> dict[str, Any]:
        """Where it listens; the connection core's figures once loaded (before: the connections waiting)."""
        if self._error is not None:
            return {"error": self._error}
        protocol = "PLAINTEXT" if self.served is None else self.served.security.protocol
        if self.served is None:
            figures: dict[str, Any] = {"connections": len(self.waiting), "served": {}}
        else:
            figures = self.served.stats()
        return {"host": self.bind_host, "port": self.port, "node_id": self.node_id, "ray_node": self.ray_node,
                "protocol": protocol, **figures}

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._loading is not None and not self._loading.done():
            self._loading.cancel()
        for waiting in self.waiting:
            if waiting.transport is not None:
                waiting.transport.close()
        if self.served is not None:
            await self.served.close()


def _import_served() -> Any:
    import gateway.direct.served

    return gateway.direct.served


def _bound(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host` (an IP address):`port`, not yet listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock
