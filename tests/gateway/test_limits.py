"""The gateway's limits keep its memory bounded: a connection flood past
max_connections, frames held across connections within the memory pool,
idle connections closed. Bounds are checked on the server's own state
(`Gateway.stats`), never on time."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable

import pytest
from kio.schema.heartbeat.v4.request import HeartbeatRequest

from gateway.connection import REFUSALS_PER_LOG_LINE, Limits

from tests.gateway import stub_apis
from tests.gateway.gateway_support import (
    GatewayThread,
    assert_served,
    closed_without_answer,
    connect,
    read_response,
    request_frame,
)

FLOOD = 3000
MAX_CONNECTIONS = 500


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def heartbeat_frame(group: str, correlation_id: int) -> bytes:
    request = HeartbeatRequest(group_id=group, generation_id=1, member_id="m", group_instance_id=None)
    return request_frame(request, correlation_id)


def test_a_connection_flood_is_refused_past_the_limit_and_a_client_is_still_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gateway = GatewayThread(None, dispatch=stub_apis, limits=Limits(max_connections=MAX_CONNECTIONS))
    flood: list[socket.socket] = []
    try:
        with connect(gateway.port) as client, caplog.at_level(logging.WARNING, logger="gateway.server"):
            for _ in range(FLOOD):
                sock = socket.socket()
                sock.setblocking(False)
                sock.connect_ex(("127.0.0.1", gateway.port))
                flood.append(sock)

            def settled() -> bool:
                stats = gateway.stats()
                return stats["connections"] + stats["refused"] == FLOOD + 1

            wait_until(settled, "every flood connection accepted or refused")
            stats = gateway.stats()
            assert stats["connections"] == MAX_CONNECTIONS
            assert stats["refused"] == FLOOD + 1 - MAX_CONNECTIONS
            assert_served(gateway.port, client)
            for sock in flood:
                sock.close()
            wait_until(lambda: gateway.stats()["connections"] == 1, "the flood's connections closed")
            assert_served(gateway.port, client)
            assert_served(gateway.port)
        lines = [r for r in caplog.records if r.name == "gateway.server"]
        assert 1 <= len(lines) <= stats["refused"] // REFUSALS_PER_LOG_LINE + 1
    finally:
        for sock in flood:
            sock.close()
        gateway.close()


def test_frames_held_across_connections_stay_within_the_memory_pool() -> None:
    limits = Limits(max_request_bytes=60_000, memory_pool_bytes=64_000)
    gateway = GatewayThread(None, dispatch=stub_apis, limits=limits)
    try:
        big = heartbeat_frame("x" * 50_000, 1)
        with connect(gateway.port) as first, connect(gateway.port) as second, connect(gateway.port) as small:
            # `first` holds a 50 KB frame half sent: its bytes are reserved while it arrives.
            first.sendall(big[: len(big) // 2])
            wait_until(lambda: gateway.stats()["pool_bytes_in_use"] == len(big) - 4, "first's reservation")
            # A second big frame has no room: it waits, unread, instead of growing memory.
            second.sendall(big)
            wait_until(lambda: gateway.stats()["pool_waiting"] == 1, "second waiting for room")
            assert gateway.stats()["pool_bytes_in_use"] == len(big) - 4
            # A small request still fits beside the first and is answered.
            small.sendall(heartbeat_frame("small", 2))
            assert read_response(small, 12, 4)[0] == 2
            first.sendall(big[len(big) // 2 :])
            assert read_response(first, 12, 4)[0] == 1
            assert read_response(second, 12, 4)[0] == 1
        wait_until(lambda: gateway.stats()["pool_bytes_in_use"] == 0, "every reservation released")
    finally:
        gateway.close()


def test_the_memory_pool_must_hold_a_whole_frame() -> None:
    with pytest.raises(ValueError, match="memory_pool_bytes"):
        Limits(max_request_bytes=2_000, memory_pool_bytes=1_000)


@pytest.mark.parametrize("sent", [b"", heartbeat_frame("g", 1)[:10]], ids=["between", "inside-frame"])
def test_an_idle_connection_is_closed(sent: bytes) -> None:
    gateway = GatewayThread(None, dispatch=stub_apis, limits=Limits(idle_timeout_ms=200))
    try:
        with connect(gateway.port) as idle:
            idle.sendall(sent)
            assert closed_without_answer(idle)
        assert_served(gateway.port)
    finally:
        gateway.close()


async def _unpark() -> None:
    for future in stub_apis.parked:
        future.set_result(None)
    stub_apis.parked.clear()


def test_a_request_holds_its_frame_in_the_pool_until_its_answer_is_written() -> None:
    gateway = GatewayThread(None, dispatch=stub_apis)
    try:
        frame = heartbeat_frame("parked", 1)
        with connect(gateway.port) as sock:
            sock.sendall(frame)
            # Parsed and being handled: its bytes still count against the pool.
            wait_until(lambda: len(stub_apis.parked) == 1, "the request handled")
            assert gateway.stats()["pool_bytes_in_use"] == len(frame) - 4
            gateway.call(_unpark())
            assert read_response(sock, 12, 4)[0] == 1
            wait_until(lambda: gateway.stats()["pool_bytes_in_use"] == 0, "the reservation returned")
    finally:
        gateway.close()


@pytest.mark.parametrize("sent", ["header only", "a byte at a time"])
def test_a_frame_not_whole_by_its_deadline_closes_its_connection_and_returns_its_bytes(
    sent: str, caplog: pytest.LogCaptureFixture
) -> None:
    # An idle timeout far beyond the test: only the frame's deadline can close the connection.
    limits = Limits(frame_deadline_ms=300, idle_timeout_ms=600_000)
    gateway = GatewayThread(None, dispatch=stub_apis, limits=limits)
    frame = heartbeat_frame("g", 1)
    try:
        with connect(gateway.port) as slow, connect(gateway.port) as other, \
                caplog.at_level(logging.INFO, logger="gateway.server"):
            slow.sendall(frame[:4])
            wait_until(lambda: gateway.stats()["pool_bytes_in_use"] == len(frame) - 4, "the reservation")
            if sent == "a byte at a time":
                # Each byte is activity, which used to keep the connection (and its bytes) for ever.
                for byte in frame[4:-1]:
                    try:
                        slow.sendall(bytes([byte]))
                    except OSError:
                        break  # closed at the deadline while trickling
                    time.sleep(0.05)
            assert closed_without_answer(slow)
            assert_served(gateway.port, other)
            wait_until(lambda: gateway.stats()["pool_bytes_in_use"] == 0, "the reservation returned")
        lines = [r.getMessage() for r in caplog.records if r.name == "gateway.server"]
        assert any("frame not whole 300 ms after its first byte" in line for line in lines), lines
    finally:
        gateway.close()
