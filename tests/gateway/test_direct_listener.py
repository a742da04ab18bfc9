"""A partition leader's Kafka listener (gateway.direct) without Ray: an `OffsetPartition`
on its own loop with a real log, and raw Kafka frames written with kio on blocking
sockets. Requests of one burst are answered in order; groups of other partitions get
NOT_COORDINATOR (a real client's commit to a deposed leader included, which then
asks FindCoordinator again); a bad frame closes its connection alone; a taken port is
skipped."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvloop
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from coordinator.errors import Errors
from coordinator.messages import OffsetFetchRequest
from coordinator.routing import partition_for
from gateway.direct.node_ids import listener_node_id
from gateway.security import is_loopback

from tests.gateway.direct_support import PartitionThread, free_port_range, group_of, wait_for
from tests.gateway.gateway_support import (
    assert_served,
    closed_without_answer,
    connect,
    read_response,
    request_frame,
    sized,
)
from tests.gateway.kafka_support import kio_request
from tests.gateway.test_security import self_signed  # noqa: F401 (a fixture)

PROTOCOL_TYPE = "consumer"


# Ray runs an async actor on uvloop where uvloop is installed (raygroups installs it), else,
# or with RAY_USE_UVLOOP=0, on asyncio's own loop: the listener serves on both.
LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@pytest.fixture(params=sorted(LOOPS))
def leader(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[PartitionThread]:
    running = PartitionThread(str(tmp_path), free_port_range(4), loop=LOOPS[request.param])
    yield running
    running.close()


def join(group: str, member_id: str = "") -> object:
    return kio_request(
        11, 5, group_id=group, session_timeout=6_000, rebalance_timeout=6_000, member_id=member_id,
        group_instance_id=None, protocol_type=PROTOCOL_TYPE,
        protocols=[{"name": "range", "metadata": b"\0\0\0\0\0\0\0\0"}],
    )


def test_a_group_joins_syncs_commits_and_fetches_through_the_listener(leader: PartitionThread) -> None:
    group = group_of(0, 2)
    with connect(leader.port) as sock:
        sock.sendall(request_frame(join(group), correlation_id=1))
        _, joined = read_response(sock, 11, 5)
        assert joined.error_code == ErrorCode.member_id_required  # KIP-394, as from a gateway
        member = joined.member_id
        sock.sendall(request_frame(join(group, member), correlation_id=1))
        _, joined = read_response(sock, 11, 5)
        assert joined.error_code == ErrorCode.none
        assert joined.leader == member and joined.generation_id == 1
        sync = kio_request(14, 3, group_id=group, generation_id=1, member_id=member, group_instance_id=None,
                           assignments=[{"member_id": member, "assignment": b"abc"}])
        commit = kio_request(
            8, 8, group_id=group, generation_id_or_member_epoch=1, member_id=member, group_instance_id=None,
            topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                  "committed_leader_epoch": -1, "committed_metadata": "m"}]}],
        )
        fetch = kio_request(9, 3, group_id=group, topics=[{"name": "t", "partition_indexes": [0]}])
        beat = kio_request(12, 3, group_id=group, generation_id=1, member_id=member, group_instance_id=None)
        # One burst: answered in request order.
        burst = ((2, sync), (3, commit), (4, beat))
        sock.sendall(b"".join(request_frame(r, correlation_id=c) for c, r in burst))
        assert read_response(sock, 14, 3)[0] == 2
        cid, committed = read_response(sock, 8, 8)
        assert (cid, committed.topics[0].partitions[0].error_code) == (3, ErrorCode.none)
        cid, beaten = read_response(sock, 12, 3)
        assert (cid, beaten.error_code) == (4, ErrorCode.none)
        # A fetch decided while the commit is pending sees the offset before it, as Kafka's.
        sock.sendall(request_frame(fetch, correlation_id=5))
        cid, fetched = read_response(sock, 9, 3)
        assert (cid, fetched.topics[0].partitions[0].committed_offset) == (5, 42)
    # The same partition, through Ray's path, sees the commit.
    assert leader.call(leader.actor.handle(OffsetFetchRequest(group, None))).offsets() == {("t", 0): 42}


def test_a_group_of_another_partition_is_not_coordinated_here(leader: PartitionThread) -> None:
    other = group_of(1, 2)
    with connect(leader.port) as sock:
        sock.sendall(request_frame(join(other), correlation_id=7))
        _, joined = read_response(sock, 11, 5)
        assert joined.error_code == ErrorCode.not_coordinator
        fetch = kio_request(9, 8, groups=[
            {"group_id": other, "topics": None}, {"group_id": group_of(0, 2), "topics": None}
        ], require_stable=False)
        sock.sendall(request_frame(fetch, correlation_id=8))
        _, fetched = read_response(sock, 9, 8)
        assert [g.error_code for g in fetched.groups] == [ErrorCode.not_coordinator, ErrorCode.none]


def test_find_coordinator_names_this_listener_for_its_groups(leader: PartitionThread) -> None:
    mine = group_of(0, 2)
    assert partition_for(mine, 2) == 0
    with connect(leader.port) as sock:
        sock.sendall(request_frame(kio_request(10, 4, key_type=0, coordinator_keys=[mine]), correlation_id=1))
        _, found = read_response(sock, 10, 4)
    (coordinator,) = found.coordinators
    assert coordinator.error_code == ErrorCode.none
    assert (coordinator.node_id, coordinator.host, coordinator.port) == (
        listener_node_id(0, 1), "127.0.0.1", leader.port
    )


def test_a_deposed_leader_answers_not_coordinator_and_names_itself_no_more(leader: PartitionThread) -> None:
    group = group_of(0, 2)
    commit = kio_request(
        8, 2, group_id=group, generation_id_or_member_epoch=-1, member_id="", retention_time=-1,
        topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 7,
                                              "committed_metadata": None}]}],
    )
    find = kio_request(10, 1, key=group, key_type=0)
    with connect(leader.port) as sock:
        sock.sendall(request_frame(commit, correlation_id=1))
        assert read_response(sock, 8, 2)[1].topics[0].partitions[0].error_code == ErrorCode.none
        leader.call(_depose(leader))  # a newer leader epoch exists: this one is a zombie
        sock.sendall(request_frame(commit, correlation_id=2) + request_frame(find, correlation_id=3))
        assert read_response(sock, 8, 2)[1].topics[0].partitions[0].error_code == ErrorCode.not_coordinator
        # Not itself any more (without Ray there is no routing to ask: not available).
        found = read_response(sock, 10, 1)[1]
        assert found.node_id != listener_node_id(0, 1) and found.port != leader.port


async def _depose(leader: PartitionThread) -> None:
    leader.actor.roles.on_deposed(leader.actor.epoch + 1)


OFFSET_COMMIT, FIND_COORDINATOR = 8, 10


def test_a_real_clients_commit_to_a_zombie_leader_is_refused_and_it_finds_its_coordinator_again(
    leader: PartitionThread,
) -> None:
    """aiokafka's consumer commits through the listener; once a newer leader epoch exists (this
    leader is a zombie), its next commit is answered NOT_COORDINATOR, never acknowledged, and
    the client asks FindCoordinator again, as a Kafka broker's clients do."""
    asyncio.run(_commit_across_deposition(leader, group_of(0, 2)))


async def _commit_across_deposition(leader: PartitionThread, group: str) -> None:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{leader.port}", group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    partition = TopicPartition("t", 0)
    try:
        consumer.assign([partition])
        await consumer.commit({partition: 5})
        assert await consumer.committed(partition) == 5
        before = dict(leader.describe()["served"])  # type: ignore[index]
        assert before.get(OFFSET_COMMIT, 0) >= 1, "the commit did not come through this listener"
        leader.call(_depose(leader))
        commit = asyncio.create_task(consumer.commit({partition: 6}))

        def refused_and_looked_again() -> bool:
            served = leader.describe()["served"]  # type: ignore[index]
            return bool(served.get(OFFSET_COMMIT, 0) > before[OFFSET_COMMIT]
                        and served.get(FIND_COORDINATOR, 0) > before.get(FIND_COORDINATOR, 0))

        # Polled on a thread (`wait_for`, bounded) while the client runs on this loop.
        await asyncio.to_thread(
            wait_for, refused_and_looked_again, "the zombie refused the commit and the client re-found"
        )
        assert not commit.done() or commit.exception() is not None, "a zombie acknowledged a commit"
        commit.cancel()
    finally:
        await consumer.stop()


def test_a_malformed_frame_closes_its_connection_alone(leader: PartitionThread) -> None:
    with connect(leader.port) as good, connect(leader.port) as bad:
        assert_served(leader.port, good)
        bad.sendall(sized(b"\x00\x0b\x00\x05\x00\x00\x00\x01\xff\xff\xff"))  # JoinGroup v5, body cut short
        assert closed_without_answer(bad)
        assert_served(leader.port, good)
    with connect(leader.port) as huge:
        huge.sendall((200 * 1024 * 1024).to_bytes(4, "big"))  # above max_request_bytes
        assert closed_without_answer(huge)
    assert_served(leader.port)


def test_a_taken_port_is_skipped_and_no_free_port_leaves_ray_callers_served(tmp_path: Path) -> None:
    low, high = free_port_range(2)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", low))
        taken.listen()
        running = PartitionThread(str(tmp_path / "a"), (low, high))
        try:
            assert running.port == high
            assert_served(high)
            # Both ports of the range taken now: the next leader says why it has no listener.
            blocked = PartitionThread(str(tmp_path / "b"), (low, high))
            try:
                assert f"no free port in {low}-{high}" in blocked.kafka["error"]
                assert blocked.call(blocked.actor.probe())["kafka"] == blocked.kafka
                assert blocked.call(blocked.actor.kafka_listener()) is None
                fetched = blocked.call(blocked.actor.handle(OffsetFetchRequest(group_of(0, 2), None)))
                assert fetched.error is Errors.NONE
            finally:
                blocked.close()
        finally:
            running.close()


def test_with_sasl_the_listener_is_on_the_nodes_address_and_wants_a_login(tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text("bob:hunter2\n")
    secured = PartitionThread(str(tmp_path / "log"), free_port_range(2), sasl_users_file=str(users),
                              super_users=("User:bob",))  # the authorizer is on: bob may do anything
    try:
        host, port = secured.kafka["host"], secured.port
        assert secured.kafka["protocol"] == "SASL_PLAINTEXT" and not is_loopback(host)
        beat = kio_request(12, 4, group_id=group_of(0, 2), generation_id=1, member_id="m",
                           group_instance_id=None)
        with connect(port, host) as sock:
            sock.sendall(request_frame(beat, 1))  # before a login: closed, unanswered
            assert closed_without_answer(sock)
        with connect(port, host) as sock:
            sock.sendall(request_frame(SaslHandshakeRequest(mechanism="PLAIN"), 1))
            sock.sendall(request_frame(SaslAuthenticateRequest(auth_bytes=b"\0bob\0wrong"), 2))
            assert read_response(sock, 17, 1)[1].error_code == ErrorCode.none
            assert read_response(sock, 36, 2)[1].error_code == ErrorCode.sasl_authentication_failed
            assert closed_without_answer(sock)
        with connect(port, host) as sock:
            sock.sendall(request_frame(SaslHandshakeRequest(mechanism="PLAIN"), 1))
            sock.sendall(request_frame(SaslAuthenticateRequest(auth_bytes=b"\0bob\0hunter2"), 2))
            sock.sendall(request_frame(beat, 3))
            assert read_response(sock, 17, 1)[0] == 1
            assert read_response(sock, 36, 2)[1].error_code == ErrorCode.none
            assert read_response(sock, 12, 4)[1].error_code == ErrorCode.unknown_member_id
    finally:
        secured.close()


def test_connections_past_the_cap_are_closed_and_idle_ones_swept(tmp_path: Path) -> None:
    limits = (("max_connections", 2), ("idle_timeout_ms", 300))
    capped = PartitionThread(str(tmp_path), free_port_range(2), limits=limits)
    try:
        with connect(capped.port) as first, connect(capped.port) as second:
            assert_served(capped.port, first)
            assert_served(capped.port, second)
            with connect(capped.port) as third:
                assert closed_without_answer(third)
            # Nothing sent for longer than the idle timeout: swept, the listener serves on.
            assert closed_without_answer(first) and closed_without_answer(second)
        wait_for(lambda: capped.describe()["connections"] == 0, "the swept connections gone")
        assert_served(capped.port)
    finally:
        capped.close()


def test_raygroups_start_configures_the_listeners_from_the_gateways_options(tmp_path: Path) -> None:
    from actors.cli.main import build_command_line

    parser, cli = build_command_line()
    users = str(tmp_path / "users")
    args = parser.parse_args(["start", "--kafka-ports", "20000-20099", "--sasl-plain-users", users])
    (options,) = [option(args) for option in cli.start_options]
    listener = options["kafka_listener"]
    assert (listener.enabled, listener.ports, listener.sasl_users_file) == (True, (20000, 20099), users)
    (options,) = [option(parser.parse_args(["start", "--no-direct"])) for option in cli.start_options]
    assert options["kafka_listener"].enabled is False


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_with_tls_the_listener_serves_tls_only(
    tmp_path: Path, self_signed: tuple[str, str], loop: str  # noqa: F811
) -> None:
    cert, key = self_signed
    secured = PartitionThread(
        str(tmp_path / "log"), free_port_range(2), loop=LOOPS[loop], tls_cert=cert, tls_key=key
    )
    try:
        host, port = secured.kafka["host"], secured.port
        assert secured.kafka["protocol"] == "SSL" and not is_loopback(host)
        context = ssl.create_default_context(cafile=cert)
        context.check_hostname = False  # the certificate names 127.0.0.1, the listener is on the node's IP
        with context.wrap_socket(connect(port, host)) as tls:
            assert_served(port, tls)
        with connect(port, host) as plain:
            plain.sendall(request_frame(kio_request(18, 0), correlation_id=1))
            assert closed_without_answer(plain)
    finally:
        secured.close()
