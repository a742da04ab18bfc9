"""The gateway's TCP server: a listening socket in front of the service's client.

Its connections are served by the Kafka connection core it shares with every
partition leader's listener (`gateway.connection`: framing, limits, the
SASL/ApiVersions gate, the memory pool, the frame deadline, request order);
what it adds is the socket, Metadata's brokers (`set_brokers`), its
registration with the controller for the direct path (`gateway.direct`) and
the dispatch to the Kafka APIs (`gateway.apis`). Its log lines, the
connection core's included, go to this module's logger.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from types import ModuleType
from typing import Any

from actors.client.topics import registry_for
from gateway.authorize import guard_for
from gateway.connection import DEFAULT_HOST, ConnectionCore, Limits
from gateway.direct.routing import LeaderRouting
from gateway.security import SecurityConfig, check_listen_address

log = logging.getLogger(__name__)

DEFAULT_PORT = 9092


class Gateway:
    """One gateway: a listening socket in front of the service's `client`.

    `dispatch` holds the Kafka APIs: `SUPPORTED`, `handle` and `GatewayInfo`
    (default: `gateway.apis`); requests reach `handle` with a
    `gateway.context.RequestContext`. `brokers` are every
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
        self.info: Any = None
        self._advertised_host = advertised_host
        # FindCoordinator names the partition leaders' listeners (gateway.direct); False: this gateway.
        self.direct = LeaderRouting(lambda: client, register=True) if direct else None
        self.core = ConnectionCore(
            f"gateway {node_id}", self.security, self.limits, self.dispatch.SUPPORTED, self.dispatch.handle,
            lambda: (self.info, self.client, self.direct), log,
            guard_for(self.security, lambda: registry_for(client.controller)),
        )
        self._server: asyncio.Server | None = None
        self._registration: asyncio.Task[None] | None = None

    def acls_changed(self) -> None:
        """The topic registry's push after an ACL change: read them now (`AclWatch.nudge`;
        on the gateway's loop). Without an authorizer, nothing to read."""
        if self.core.guard is not None:
            self.core.guard.watch.nudge()

    async def start(self, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> tuple[str, int]:
        """Listen on host:port (0: any free port); returns the advertised address."""
        check_listen_address(host, self.security)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self.core.protocol, host, port, ssl=self.security.ssl_context(), backlog=1024
        )
        self.core.start()
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
        await self.core.close()
        if self._server is not None:
            await self._server.wait_closed()

    def stats(self) -> dict[str, int]:
        """The server-side state that bounds its memory."""
        return self.core.stats()


def _default_dispatch() -> ModuleType:
    from gateway import apis

    return apis

