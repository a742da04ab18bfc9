"""A leader's own Kafka listener enforces the service's ACLs in its process (no Ray: the
registry the listener reads them from is stood in for), from the connection's SASL login."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from coordinator.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from gateway.direct.served import ServedListener

from tests.gateway.direct_support import PartitionThread, free_port_range, group_of
from tests.gateway.gateway_support import connect, read_response, request_frame
from tests.gateway.kafka_support import kio_request
from tests.gateway.test_authorize import FakeRegistry

ALLOWED, DENIED = group_of(0, 2, "team-a"), group_of(0, 2, "team-b")


@pytest.fixture
def secured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PartitionThread]:
    registry = FakeRegistry()
    registry.view = ("r:1", (AclBinding(ResourceType.GROUP, "team-a", PatternType.PREFIXED, "User:alice", "*",
                                        Operation.READ, Permission.ALLOW),))
    monkeypatch.setattr(ServedListener, "_registry", lambda self: registry)
    users = tmp_path / "users"
    users.write_text("alice:secret\n")
    running = PartitionThread(str(tmp_path / "log"), free_port_range(2), sasl_users_file=str(users))
    yield running
    running.close()


def heartbeat_error(sock: Any, group: str, correlation_id: int) -> ErrorCode:
    beat = kio_request(12, 4, group_id=group, generation_id=1, member_id="m", group_instance_id=None)
    sock.sendall(request_frame(beat, correlation_id))
    return read_response(sock, 12, 4)[1].error_code  # type: ignore[no-any-return]


def test_the_listener_answers_only_what_the_acls_allow(secured: PartitionThread) -> None:
    host, port = secured.kafka["host"], secured.port
    with connect(port, host) as sock:
        sock.sendall(request_frame(SaslHandshakeRequest(mechanism="PLAIN"), 1))
        sock.sendall(request_frame(SaslAuthenticateRequest(auth_bytes=b"\0alice\0secret"), 2))
        assert read_response(sock, 17, 1)[0] == 1
        assert read_response(sock, 36, 2)[1].error_code == ErrorCode.none
        assert heartbeat_error(sock, ALLOWED, 3) == ErrorCode.unknown_member_id, "reached the shard"
        assert heartbeat_error(sock, DENIED, 4) == ErrorCode.group_authorization_failed
        for correlation_id, (group, error) in enumerate(
            [(ALLOWED, ErrorCode.none), (DENIED, ErrorCode.group_authorization_failed)], start=5
        ):
            sock.sendall(request_frame(kio_request(10, 3, key=group, key_type=0), correlation_id))
            assert read_response(sock, 10, 3)[1].error_code == error, "FindCoordinator needs DESCRIBE"
        metadata = kio_request(3, 9, topics=[{"name": "secret"}], allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False,
                               include_cluster_authorized_operations=False)
        sock.sendall(request_frame(metadata, 7))
        (topic,) = read_response(sock, 3, 9)[1].topics
        assert (topic.name, topic.error_code) == ("secret", ErrorCode.topic_authorization_failed)
