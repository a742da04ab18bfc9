"""The gateway's transport on raw sockets: ApiVersions at every version,
responses in request order, and every bad input closing only its own
connection with one log line and no answer (Kafka's SocketServer)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v1.request import HeartbeatRequest as HeartbeatV1
from kio.schema.heartbeat.v4.request import HeartbeatRequest as HeartbeatV4

from gateway.connection import Limits

from tests.gateway import stub_apis
from tests.gateway.gateway_support import (
    GatewayThread,
    api_versions_request,
    assert_served,
    closed_without_answer,
    connect,
    read_response,
    request_frame,
    sized,
)

MAX_REQUEST_BYTES = 4096


@pytest.fixture
def gateway() -> Iterator[GatewayThread]:
    running = GatewayThread(None, dispatch=stub_apis, limits=Limits(max_request_bytes=MAX_REQUEST_BYTES))
    yield running
    running.close()


def heartbeat(group: str = "g") -> HeartbeatV4:
    return HeartbeatV4(group_id=group, generation_id=1, member_id="m", group_instance_id=None)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_answers_every_version_from_the_table(gateway: GatewayThread, version: int) -> None:
    with connect(gateway.port) as sock:
        sock.sendall(request_frame(api_versions_request(version), correlation_id=7))
        correlation_id, body = read_response(sock, 18, version)
    assert correlation_id == 7
    assert body.error_code == ErrorCode.none
    advertised = {entry.api_key: (entry.min_version, entry.max_version) for entry in body.api_keys}
    assert advertised == {**stub_apis.SUPPORTED, 18: (0, 4)}


def test_api_versions_above_ours_gets_the_v0_error_with_only_its_own_range(gateway: GatewayThread) -> None:
    # A v7 request whose body we cannot know: Kafka answers as v0 and keeps the connection (KIP-511).
    frame = sized(header(18, 7, correlation_id=5) + b"\x00\x01x\x00junk")
    with connect(gateway.port) as sock:
        sock.sendall(frame)
        correlation_id, body = read_response(sock, 18, 0)
        assert correlation_id == 5
        assert body.error_code == ErrorCode.unsupported_version
        assert [(e.api_key, e.min_version, e.max_version) for e in body.api_keys] == [(18, 0, 4)]
        assert_served(gateway.port, sock)


def test_api_versions_v3_with_an_invalid_software_name_is_invalid_request(gateway: GatewayThread) -> None:
    request = ApiVersionsV3(client_software_name="-bad name", client_software_version="1.0")
    with connect(gateway.port) as sock:
        sock.sendall(request_frame(request, correlation_id=1))
        _, body = read_response(sock, 18, 3)
    assert body.error_code == ErrorCode.invalid_request
    assert body.api_keys == ()


def test_pipelined_requests_are_answered_in_request_order(gateway: GatewayThread) -> None:
    # The first is slow to handle: the later ones still come back after it.
    frames = [request_frame(heartbeat("slow"), 1), request_frame(heartbeat("a"), 2),
              request_frame(api_versions_request(3), 3), request_frame(heartbeat("b"), 4)]
    with connect(gateway.port) as sock:
        sock.sendall(b"".join(frames))
        order = [read_response(sock, 12, 4)[0], read_response(sock, 12, 4)[0],
                 read_response(sock, 18, 3)[0], read_response(sock, 12, 4)[0]]
    assert order == [1, 2, 3, 4]


def test_a_request_the_handler_does_not_answer_gets_no_response(gateway: GatewayThread) -> None:
    with connect(gateway.port) as sock:
        sock.sendall(request_frame(heartbeat("silent"), 1) + request_frame(heartbeat("a"), 2))
        assert read_response(sock, 12, 4)[0] == 2


def test_the_handler_gets_the_request_and_its_context(gateway: GatewayThread) -> None:
    stub_apis.seen.clear()
    with connect(gateway.port) as sock:
        sock.sendall(request_frame(HeartbeatV1(group_id="ctx", generation_id=3, member_id="m"), 41, "cid"))
        read_response(sock, 12, 1)
    ctx, request = stub_apis.seen[-1]
    assert request == HeartbeatV1(group_id="ctx", generation_id=3, member_id="m")
    assert (ctx.client_id, ctx.client_host) == ("cid", "127.0.0.1")
    assert (ctx.api_version, ctx.correlation_id) == (1, 41)
    assert ctx.principal is None
    assert ctx.gateway.brokers == ((0, "127.0.0.1", gateway.port),)


def header(api_key: int, version: int, correlation_id: int = 1) -> bytes:
    return api_key.to_bytes(2, "big", signed=True) + version.to_bytes(2, "big", signed=True) + (
        correlation_id.to_bytes(4, "big")
    )


def heartbeat_v4_with_unknown_header_tag() -> bytes:
    # Header v2: client_id "c", then one tagged field (tag 9, 1 byte) kio does not know.
    body = request_frame(heartbeat(), 1, client_id="c")[4 + 8 + 2 + 1 + 1:]
    return sized(header(12, 4) + b"\x00\x01c" + b"\x01\x09\x01\x00" + body)


BAD_INPUTS = {
    "frame above max_request_bytes": ((MAX_REQUEST_BYTES + 1).to_bytes(4, "big"), "frame size"),
    "negative size": ((-5).to_bytes(4, "big", signed=True), "frame size"),
    "garbage bytes (an HTTP request)": (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "frame size"),
    "frame shorter than a header": (sized(b"\x00\x12\x00"), "truncated request header"),
    "unknown api key": (sized(header(999, 0) + b"\x00\x00"), "unknown api key 999"),
    "negative api key": (sized(header(-1, 0) + b"\x00\x00"), "unknown api key -1"),
    "version kio knows but not advertised": (sized(header(3, 13) + b"\x00\x01c\x00\x01\x00\x00"),
                                             "version 13 outside 0-12"),
    "version no schema has": (sized(header(12, 40) + b"\x00\x00"), "version 40 outside 0-4"),
    "body that does not parse": (sized(header(12, 4) + b"\x00\x01c\x00" + b"\xff" * 6), "malformed"),
    "unknown tagged field": (heartbeat_v4_with_unknown_header_tag(), "unknown tagged field"),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_closes_only_its_connection_with_one_log_line(
    gateway: GatewayThread, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    payload, reason = BAD_INPUTS[name]
    with connect(gateway.port) as other, caplog.at_level(logging.WARNING, logger="gateway.server"):
        assert_served(gateway.port, other)
        with connect(gateway.port) as bad:
            bad.sendall(payload)
            assert closed_without_answer(bad)
        assert_served(gateway.port, other)
    lines = [record.getMessage() for record in caplog.records if record.name == "gateway.server"]
    assert len(lines) == 1 and reason in lines[0], lines


def test_a_truncated_frame_closes_the_connection(
    gateway: GatewayThread, caplog: pytest.LogCaptureFixture
) -> None:
    with connect(gateway.port) as other, caplog.at_level(logging.WARNING, logger="gateway.server"):
        with connect(gateway.port) as bad:
            bad.sendall(request_frame(heartbeat(), 1)[:-3])
            bad.shutdown(socket.SHUT_WR)
            assert closed_without_answer(bad)
        assert_served(gateway.port, other)
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.server"]
    assert len(lines) == 1 and "truncated frame" in lines[0], lines


def test_a_handler_that_raises_closes_its_connection_only(
    gateway: GatewayThread, caplog: pytest.LogCaptureFixture
) -> None:
    with connect(gateway.port) as other, caplog.at_level(logging.WARNING, logger="gateway.server"):
        with connect(gateway.port) as bad:
            bad.sendall(request_frame(heartbeat("raise"), 1))
            assert closed_without_answer(bad)
        assert_served(gateway.port, other)
    [record] = [r for r in caplog.records if r.name == "gateway.server"]
    assert record.exc_info is not None and "handler failure on purpose" in str(record.exc_info[1])
