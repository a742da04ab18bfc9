"""The replication link: a leader's pushes reach a follower over one TCP
connection between their actors instead of one Ray call each (DESIGN 5b).

Why: a push is on the path of every replicated commit (the leader releases a
response once its followers hold the records), so its round trip is paid by
every commit. A Ray actor call costs about 2.3 ms round trip on this 2-core
host under the replication benchmark's load, of which the follower's own work
(append, fsync, decode, replay) is 0.7 ms; the rest is Ray's per-call work
in both processes' core workers (measured, docs/benchmarks.md). A message on
an open socket costs the two processes' wake-ups and a msgpack frame.

Ray stays the control plane: the follower's actor hands out its endpoint
through its Ray handle (`replication_endpoint`), and the requests and
answers are those of the actor methods `replicate` and `truncate`, with the
same fencing and rules (`actors.partition.roles`); the link is only their
transport.

Protocol, per connection (`LinkServer` in the follower's actor, `FollowerLink`
in the leader's sender task):
- Frames: a 4-byte big-endian length, then the payload. The first frame
  from the leader is the follower actor's TOKEN (32 random bytes made when
  the actor starts listening); then msgpack requests
  `["replicate", leader_epoch, leader, start_offset, batches, leader_hwm]` or
  `["truncate", leader_epoch, leader, [epoch, end_offset], seen_log_end,
  seen_last_epoch]`, each answered by `[error, leader_epoch, log_end,
  last_epoch, high_watermark]` (a `PushAnswer`), one at a time.
- The listener is on the node's IP with a port the OS chooses. The token is
  given only through the actor's Ray handle, so a socket that knows it has
  the trust a Ray handle has, and no more: any host may connect, and a
  connection with a wrong token, no token within `AUTH_TIMEOUT_S`, an
  oversized frame or a malformed request is closed with one warning line,
  alone. At most `MAX_PENDING` connections wait for their token at once; a
  new one beyond that closes the oldest waiting (a flood of silent sockets
  cannot lock a leader out: a leader sends its token as it connects). A
  connection quiet for longer
  than the idle timeout (a leader sends at least a heartbeat every quarter
  of replica_lag_time_max_ms) is closed: its leader is gone.
- The leader's side: it connects on first use; any failure or timeout closes
  the connection (a late answer must never be read as the next request's)
  and the push counts as not acknowledged, as a failed Ray call did; the
  next push connects again, asking the handle for the endpoint again (a
  restarted actor has a new one). Where the endpoint cannot be reached (a
  firewall between nodes that admits only Ray's ports) pushes go through
  the Ray methods, and the link is tried again after `LINK_RETRY_S`;
  `ServiceSettings.replication_link` False sends every push that way.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgpack

from actors.partition.follower import PushAnswer
from coordinator.errors import Errors

logger = logging.getLogger(__name__)

TOKEN_BYTES = 32
AUTH_TIMEOUT_S = 5.0
MAX_PENDING = 64
# Room beside the batches in a request frame (the other fields are a few dozen bytes).
FRAME_SLACK = 64 * 1024
ANSWER_MAX_BYTES = 1024
MAX_LEADER_ID = 1024
CONNECT_TIMEOUT_S = 2.0
LINK_RETRY_S = 30.0
_LENGTH = struct.Struct(">I")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

Request = tuple[str, tuple[Any, ...]]
Dispatch = Callable[[str, tuple[Any, ...]], Awaitable[PushAnswer]]


class LinkError(Exception):
    """A frame or request that breaks the protocol: its connection is closed."""


# ------------------------------------------------------------------ frames


def frame(payload: bytes) -> bytes:
    return _LENGTH.pack(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> bytes:
    """One frame's payload; `LinkError` if it announces more than `max_bytes`."""
    (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    if length > max_bytes:
        raise LinkError(f"a frame of {length} bytes (at most {max_bytes})")
    return await reader.readexactly(length)


def _int(value: Any, name: str, low: int = -1) -> int:
    if type(value) is not int or not low <= value <= _INT64_MAX:
        raise LinkError(f"{name} must be an integer >= {low}, not {value!r:.40}")
    return value


def _leader(value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_LEADER_ID:
        raise LinkError(f"leader must be a replica id, not {value!r:.40}")
    return value


def encode_request(kind: str, *args: Any) -> bytes:
    return frame(msgpack.packb([kind, *args], use_bin_type=True))


def parse_request(payload: bytes) -> Request:
    """A request frame's payload as (method name, checked arguments); `LinkError` if malformed."""
    try:
        request = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise LinkError(f"not a msgpack request: {exc}") from exc
    if not isinstance(request, list) or len(request) != 6:
        raise LinkError(f"a request is a list of 6, not {request!r:.60}")
    kind, epoch, leader, third, fourth, fifth = request
    epoch, leader = _int(epoch, "leader_epoch", 0), _leader(leader)
    if kind == "replicate":
        start = None if third is None else _int(third, "start_offset", 0)
        if not isinstance(fourth, bytes):
            raise LinkError("batches must be bytes")
        return kind, (epoch, leader, start, fourth, _int(fifth, "leader_hwm", 0))
    if kind == "truncate":
        if not isinstance(third, list) or len(third) != 2:
            raise LinkError(f"diverging must be [epoch, end_offset], not {third!r:.40}")
        diverging = (_int(third[0], "diverging epoch"), _int(third[1], "diverging end_offset", 0))
        seen = (_int(fourth, "seen_log_end", 0), _int(fifth, "seen_last_epoch"))
        return kind, (epoch, leader, diverging, *seen)
    raise LinkError(f"unknown request {kind!r:.40}")


def encode_answer(answer: PushAnswer) -> bytes:
    return frame(msgpack.packb([int(answer.error), *answer[1:]]))


def parse_answer(payload: bytes) -> PushAnswer:
    error, leader_epoch, log_end, last_epoch, hwm = msgpack.unpackb(payload)
    return PushAnswer(Errors(error), leader_epoch, log_end, last_epoch, hwm)


# ------------------------------------------------------------ the follower


class LinkServer:
    """The follower actor's listener: authenticates leaders and hands their
    requests to `dispatch` (the actor's `replicate` / `truncate`)."""

    def __init__(self, dispatch: Dispatch, max_frame_bytes: int, idle_timeout_s: float) -> None:
        self.token = secrets.token_bytes(TOKEN_BYTES)
        self._dispatch = dispatch
        self._max_frame = max_frame_bytes + FRAME_SLACK
        self._idle_timeout_s = idle_timeout_s
        self._server: asyncio.Server | None = None
        self._starting = asyncio.Lock()
        self._host = ""
        self._writers: set[asyncio.StreamWriter] = set()
        # Connections not authenticated yet, oldest first (a dict keeps insertion order).
        self._pending: dict[asyncio.StreamWriter, Any] = {}
        self.rejected = 0

    async def endpoint(self, host: str) -> tuple[str, int, bytes]:
        """(host, port, token), listening from the first call on."""
        async with self._starting:  # two leaders may ask at once (an election under way)
            if self._server is None:
                self._server = await asyncio.start_server(self._serve, host, 0)
                self._host = host
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return self._host, port, self.token

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        if len(self._pending) >= MAX_PENDING:
            oldest = next(iter(self._pending))
            self._reject(oldest, self._pending.pop(oldest), f"{MAX_PENDING} connections awaiting a token")
        self._writers.add(writer)
        self._pending[writer] = peer
        try:
            token = await asyncio.wait_for(read_frame(reader, TOKEN_BYTES), AUTH_TIMEOUT_S)
            if not hmac.compare_digest(token, self.token):
                raise LinkError("wrong token")
            del self._pending[writer]
            await self._requests(reader, writer)
        except (LinkError, TimeoutError, asyncio.IncompleteReadError, ConnectionError) as exc:
            if not writer.is_closing():  # else evicted, or gone: said already or nothing to say
                self._reject(writer, peer, repr(exc))
        except Exception:  # a failing follower (its disk): the leader sees the connection close
            logger.exception("replication link from %s: request failed", peer)
        finally:
            self._writers.discard(writer)
            self._pending.pop(writer, None)
            writer.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                payload = await asyncio.wait_for(read_frame(reader, self._max_frame), self._idle_timeout_s)
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    raise
                return  # closed between requests: the leader's choice
            kind, args = parse_request(payload)
            writer.write(encode_answer(await self._dispatch(kind, args)))
            await writer.drain()

    def _reject(self, writer: asyncio.StreamWriter, peer: Any, why: str) -> None:
        self.rejected += 1
        logger.warning("replication link from %s closed: %s", peer, why)
        writer.close()


# -------------------------------------------------------------- the leader


class FollowerLink:
    """The leader's connection to one follower actor (`handle`), made on first
    use; with `enabled` False every request is a Ray call instead."""

    def __init__(self, handle: Any, enabled: bool = True) -> None:
        self.handle = handle
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        # Requests go through Ray calls until then (disabled, or the endpoint was unreachable).
        self._ray_until = 0.0 if enabled else float("inf")

    @property
    def transport(self) -> str | None:
        """How requests go now: "tcp" (connected), "ray" (calls), None (not connected yet)."""
        if self._writer is not None:
            return "tcp"
        return "ray" if time.monotonic() < self._ray_until else None

    async def request(self, kind: str, *args: Any) -> PushAnswer:
        """Send one request and wait for its answer; raises on any failure (then `close`)."""
        if self._writer is None and time.monotonic() >= self._ray_until:
            await self._connect()
        if self._writer is None:
            return PushAnswer(*await getattr(self.handle, kind).remote(*args))
        assert self._reader is not None
        self._writer.write(encode_request(kind, *args))
        await self._writer.drain()
        return parse_answer(await read_frame(self._reader, ANSWER_MAX_BYTES))

    async def _connect(self) -> None:
        host, port, token = await self.handle.replication_endpoint.remote()
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            self._ray_until = time.monotonic() + LINK_RETRY_S
            logger.warning(
                "replication link to %s:%d failed (%r): pushing through Ray calls for %.0f s",
                host, port, exc, LINK_RETRY_S,
            )
            return
        writer.write(frame(token))
        self._reader, self._writer = reader, writer

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
