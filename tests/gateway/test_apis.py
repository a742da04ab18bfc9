"""gateway.apis without Ray: the advertised table, the error mapping, and each
group API's translation, by version, against a recording stand-in for
actors.Client. Every response is written and read back with kio, so each
one is a valid frame body of its version."""

from __future__ import annotations

from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map

from actors.client.retry import CoordinatorUnavailableError
from coordinator.errors import Errors
from coordinator.messages import (
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsResponse,
    FetchedOffset,
    JoinGroupMember,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListedGroup,
    ListGroupsResponse,
    MemberLeaveResult,
    OffsetCommitResponse,
    OffsetFetchResponse,
    PartitionResult,
)
from coordinator.routing import partition_for
from gateway import apis
from gateway.handlers.entities import ERROR_CODES

from tests.gateway.fake_client import GATEWAY, FakeClient, call
from tests.gateway.kafka_support import kio_request

# ------------------------------------------------------------ the table


def test_every_coordinator_error_maps_to_kafkas_code_by_name_and_number() -> None:
    for error in Errors:
        assert ERROR_CODES[error].name == error.name.lower()
        assert ERROR_CODES[error].value == error.value


def test_every_advertised_version_has_kio_schemas_and_a_handler() -> None:
    for key, (low, high) in apis.SUPPORTED.items():
        assert key in apis.HANDLERS
        assert set(range(low, high + 1)) <= set(schema_name_map[api_key_map[key]])
        for version in (low, high):
            load_request_schema(key, version)
            load_response_schema(key, version)


def test_the_table_lets_every_client_in() -> None:
    table = apis.SUPPORTED
    assert table[11][0] <= 0 and table[14][0] <= 0  # aiokafka joins with v0-2/5, syncs with v0/1/3
    assert table[0] == (3, 11)  # librdkafka fetches only from a broker with Produce >= 3
    assert table[1] == (4, 12) and table[3][1] == 12  # no topic ids in Fetch
    assert table[8] == (2, 10) and table[9] == (1, 10)  # librdkafka's consumer protocol needs 9
    assert table[68] == (0, 1)  # ConsumerGroupHeartbeat: librdkafka speaks only v1
    assert table[22] == (0, 5)  # InitProducerId: idempotent producers reach Produce's refusal
    assert {42, 47} <= table.keys()


def test_a_version_outside_the_table_is_refused() -> None:
    # Metadata v13: kio parses it, the gateway does not advertise it.
    request = kio_request(
        3, 13, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    with pytest.raises(ValueError, match="not served"):
        call(FakeClient(lambda r: None), request)


# ------------------------------------------------------------ membership


def join(version: int, **fields: Any) -> Any:
    values = {
        "group_id": "g",
        "session_timeout": 10_000,
        "rebalance_timeout": 60_000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00\x01sub"}, {"name": "rr", "metadata": b"x"}],
        "reason": None,
        **fields,
    }
    return kio_request(11, version, **values)


@pytest.mark.parametrize("version", [0, 1, 4, 5, 7, 9])
def test_join_group_translates_each_version(version: int) -> None:
    client = FakeClient(lambda r: JoinGroupResponse(Errors.MEMBER_ID_REQUIRED, "m-1"))
    response = call(client, join(version))
    ((sent, _),) = client.sent
    assert sent.session_timeout_ms == 10_000
    assert sent.rebalance_timeout_ms == (
        10_000 if version == 0 else 60_000
    )  # v0: Kafka takes the session timeout
    assert sent.protocols == (("range", b"\x00\x01sub"), ("rr", b"x"))  # bytes unchanged
    assert sent.require_known_member_id is (version >= 4)
    assert sent.support_skip_assignment is (version >= 9)
    assert (sent.client_id, sent.client_host) == ("cid", "10.0.0.9")
    assert response.error_code == ErrorCode.member_id_required
    assert response.member_id == "m-1"
    assert response.protocol_name in ("", None)  # "" below v7, where the field is not nullable


def test_join_group_passes_members_and_metadata_back_unchanged() -> None:
    joined = JoinGroupResponse(
        Errors.NONE,
        "m-1",
        4,
        "consumer",
        "range",
        "m-1",
        False,
        (JoinGroupMember("m-1", None, b"\x00\x03a"), JoinGroupMember("m-2", "static", b"\x00\x01b")),
    )
    response = call(FakeClient(lambda r: joined), join(5, member_id="m-1", group_instance_id="static"))
    assert (response.generation_id, response.protocol_name, response.leader) == (4, "range", "m-1")
    assert [(m.member_id, m.group_instance_id, m.metadata) for m in response.members] == [
        ("m-1", None, b"\x00\x03a"),
        ("m-2", "static", b"\x00\x01b"),
    ]


def test_leave_group_v0_answers_the_members_error_and_v3_each_member() -> None:
    left = LeaveGroupResponse(Errors.NONE, (MemberLeaveResult("m", None, Errors.UNKNOWN_MEMBER_ID),))
    client = FakeClient(lambda r: left)
    assert (
        call(client, kio_request(13, 0, group_id="g", member_id="m")).error_code
        == ErrorCode.unknown_member_id
    )
    assert client.sent[0][0].members[0].member_id == "m"
    v3 = call(
        client, kio_request(13, 3, group_id="g", members=[{"member_id": "m", "group_instance_id": None}])
    )
    assert v3.error_code == ErrorCode.none
    assert [(m.member_id, m.error_code) for m in v3.members] == [("m", ErrorCode.unknown_member_id)]


def test_a_coordinator_out_of_reach_is_coordinator_not_available_in_the_response() -> None:
    client = FakeClient(lambda r: CoordinatorUnavailableError("no leader"))
    beat = call(
        client, kio_request(12, 4, group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    )
    assert beat.error_code == ErrorCode.coordinator_not_available
    commit = call(client, commit_request(8, [("t", 0, 5), ("t", 1, 6)]))
    assert {p.error_code for t in commit.topics for p in t.partitions} == {
        ErrorCode.coordinator_not_available
    }


# ------------------------------------------------------------ offsets


def commit_request(version: int, rows: list[tuple[str, int, int]], **fields: Any) -> Any:
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, offset in rows:
        topics.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_leader_epoch": 2,
                "committed_metadata": None,
            }
        )
    values = {
        "group_id": "g",
        "generation_id_or_member_epoch": 3,
        "member_id": "m",
        "retention_time": -1,
        "group_instance_id": None,
        **fields,
    }
    return kio_request(8, version, topics=[{"name": t, "partitions": p} for t, p in topics.items()], **values)


def test_offset_commit_v2_carries_retention_and_v9_leader_epochs() -> None:
    def committed(request: Any) -> OffsetCommitResponse:
        return OffsetCommitResponse(
            tuple(PartitionResult(p.topic, p.partition, Errors.NONE) for p in request.partitions)
        )

    client = FakeClient(committed)
    v2 = call(client, commit_request(2, [("a", 0, 5), ("b", 1, 6), ("a", 2, 7)], retention_time=86_400_000))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in v2.topics] == [
        ("a", [0, 2]),
        ("b", [1]),
    ]
    sent = client.sent[0][0]
    assert (sent.generation_id, sent.member_id, sent.retention_time_ms) == (3, "m", 86_400_000)
    assert [(p.topic, p.partition, p.offset, p.metadata, p.leader_epoch) for p in sent.partitions] == [
        ("a", 0, 5, "", -1),
        ("a", 2, 7, "", -1),
        ("b", 1, 6, "", -1),  # v2 has no leader epoch
    ]
    call(client, commit_request(9, [("a", 0, 5)], group_instance_id="static"))
    sent = client.sent[1][0]
    assert (sent.retention_time_ms, sent.partitions[0].leader_epoch, sent.group_instance_id) == (
        -1,
        2,
        "static",
    )


def fetched(request: Any) -> OffsetFetchResponse:
    if request.group_id == "loading":
        return OffsetFetchResponse(Errors.COORDINATOR_LOAD_IN_PROGRESS)
    wanted = request.partitions if request.partitions is not None else (("t", 0), ("u", 1))
    return OffsetFetchResponse(Errors.NONE, tuple(FetchedOffset(t, p, 10 + p, 4, "md") for t, p in wanted))


def test_offset_fetch_v1_puts_a_group_error_on_each_partition() -> None:
    response = call(
        FakeClient(fetched),
        kio_request(9, 1, group_id="loading", topics=[{"name": "t", "partition_indexes": [0, 1]}]),
    )
    assert [(p.partition_index, p.committed_offset, p.error_code) for p in response.topics[0].partitions] == [
        (0, -1, ErrorCode.coordinator_load_in_progress),
        (1, -1, ErrorCode.coordinator_load_in_progress),
    ]


def test_offset_fetch_v3_null_topics_asks_for_every_partition() -> None:
    client = FakeClient(fetched)
    response = call(client, kio_request(9, 3, group_id="g", topics=None))
    assert client.sent[0][0].partitions is None
    assert [(t.name, [p.committed_offset for p in t.partitions]) for t in response.topics] == [
        ("t", [10]),
        ("u", [11]),
    ]
    assert response.error_code == ErrorCode.none


def test_offset_fetch_v8_answers_several_groups_each_from_its_coordinator() -> None:
    client = FakeClient(fetched)
    groups = [
        {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [3]}]},
        {"group_id": "loading", "topics": None},
        {"group_id": "h", "topics": None},
    ]
    response = call(client, kio_request(9, 8, groups=groups, require_stable=True))
    assert [r.group_id for r in client.sent for r in [r[0]]] == ["g", "loading", "h"]
    assert all(r.require_stable for r, _ in client.sent)
    answered = {g.group_id: g for g in response.groups}
    assert answered["g"].topics[0].partitions[0].committed_offset == 13
    assert answered["g"].topics[0].partitions[0].committed_leader_epoch == 4
    assert answered["loading"].error_code == ErrorCode.coordinator_load_in_progress
    assert [t.name for t in answered["h"].topics] == ["t", "u"]


# ------------------------------------------------------------ admin and discovery


def test_list_groups_asks_every_offsets_partition_with_the_filters_and_answers_types() -> None:
    def listed(request: Any) -> ListGroupsResponse:
        kind = "consumer" if len(client.sent) == 2 else "classic"
        return ListGroupsResponse(
            Errors.NONE, (ListedGroup(f"g{len(client.sent)}", "consumer", "Stable", kind),)
        )

    client = FakeClient(listed, num_partitions=3)
    response = call(client, kio_request(16, 5, states_filter=["stable"], types_filter=["Consumer"]))
    assert sorted(p for _, p in client.sent) == [0, 1, 2]
    # The core filters (coordinator/admin.py), as Kafka's coordinator.
    assert {(r.states_filter, r.types_filter) for r, _ in client.sent} == {(("stable",), ("Consumer",))}
    assert sorted((g.group_id, g.group_state, g.group_type) for g in response.groups) == [
        ("g1", "Stable", "classic"),
        ("g2", "Stable", "consumer"),
        ("g3", "Stable", "classic"),
    ]
    call(client, kio_request(16, 3))
    assert {(r.states_filter, r.types_filter) for r, _ in client.sent[3:]} == {((), ())}


def test_describe_and_delete_groups_answer_in_the_order_asked() -> None:
    def answer(request: Any) -> Any:
        if hasattr(request, "group_ids") and type(request).__name__ == "DescribeGroupsRequest":
            return DescribeGroupsResponse(
                tuple(DescribedGroup(Errors.NONE, g, "Empty", "consumer") for g in request.group_ids)
            )
        return DeleteGroupsResponse(
            tuple((g, Errors.NON_EMPTY_GROUP if g == "b" else Errors.NONE) for g in request.group_ids)
        )

    client = FakeClient(answer, num_partitions=8)
    names = ["c", "a", "b", "d"]
    described = call(client, kio_request(15, 5, groups=names, include_authorized_operations=False))
    assert [g.group_id for g in described.groups] == names
    assert len(client.sent) == len({partition_for(n, 8) for n in names})
    assert {g.authorized_operations for g in described.groups} == {-(2**31)}  # not asked
    asked = call(client, kio_request(15, 5, groups=["a"], include_authorized_operations=True))
    # No authorizer: every group operation Kafka supports (READ, DELETE, DESCRIBE, DESCRIBE/ALTER_CONFIGS).
    assert asked.groups[0].authorized_operations == 3400
    deleted = call(client, kio_request(42, 2, groups_names=names))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        ("c", ErrorCode.none),
        ("a", ErrorCode.none),
        ("b", ErrorCode.non_empty_group),
        ("d", ErrorCode.none),
    ]


def test_describe_groups_v6_passes_its_version_and_answers_not_found_with_its_message() -> None:
    """KIP-1043: from v6 a group DescribeGroups cannot describe is GROUP_ID_NOT_FOUND (the core decides)."""

    def answer(request: Any) -> DescribeGroupsResponse:
        assert request.version == 6
        return DescribeGroupsResponse(tuple(
            DescribedGroup(Errors.GROUP_ID_NOT_FOUND, g, "Dead", error_message=f"Group {g} not found.")
            for g in request.group_ids
        ))

    request = kio_request(15, 6, groups=["gone"], include_authorized_operations=False)
    described = call(FakeClient(answer), request)
    (group,) = described.groups
    assert (group.group_id, group.error_code, group.error_message) == (
        "gone", ErrorCode.group_id_not_found, "Group gone not found."
    )


def test_find_coordinator_names_this_gateway_single_and_batched() -> None:
    client = FakeClient(lambda r: None)
    v1 = call(client, kio_request(10, 1, key="g", key_type=0))
    assert (v1.error_code, v1.node_id, v1.host, v1.port) == (ErrorCode.none, 3, "gw.example", 19092)
    v0 = call(client, kio_request(10, 0, key="g"))
    assert (v0.node_id, v0.port) == (3, 19092)
    assert client.partition_for("lost") != client.partition_for("g")
    client.leaders[client.partition_for("lost")] = None
    v4 = call(client, kio_request(10, 4, key_type=0, coordinator_keys=["g", "lost"]))
    assert [(c.key, c.error_code, c.node_id) for c in v4.coordinators] == [
        ("g", ErrorCode.none, 3),
        ("lost", ErrorCode.coordinator_not_available, -1),
    ]
    transactions = call(client, kio_request(10, 4, key_type=1, coordinator_keys=["tx"]))
    assert transactions.coordinators[0].error_code == ErrorCode.invalid_request


def test_produce_is_refused_per_partition_and_acks_0_is_not_answered() -> None:
    client = FakeClient(lambda r: None)
    data = [{"name": "t", "partition_data": [{"index": 0, "records": b""}, {"index": 1, "records": None}]}]
    response = call(client, kio_request(0, 11, transactional_id=None, acks=-1, timeout=1000, topic_data=data))
    parts = response.responses[0].partition_responses
    assert [(p.index, p.error_code) for p in parts] == [
        (0, ErrorCode.policy_violation),
        (1, ErrorCode.policy_violation),
    ]
    assert "no topic data" in parts[0].error_message
    assert (
        call(client, kio_request(0, 3, transactional_id=None, acks=0, timeout=1000, topic_data=data)) is None
    )
    assert client.sent == []


def test_init_producer_id_hands_out_new_ids_under_the_gateways_node_id() -> None:
    client = FakeClient(lambda r: None)
    answers = [
        call(client, kio_request(22, 0, transactional_id=None, transaction_timeout=60_000)),
        # v3+: a producer bumping its epoch names its id and epoch; Kafka hands out a new id anyway.
        call(
            client,
            kio_request(
                22, 5, transactional_id=None, transaction_timeout=60_000, producer_id=7, producer_epoch=3
            ),
        ),
    ]
    assert [(a.error_code, a.producer_epoch) for a in answers] == [(ErrorCode.none, 0)] * 2
    ids = [a.producer_id for a in answers]
    assert ids[0] != ids[1] and {i >> 32 for i in ids} == {GATEWAY.node_id}
    assert client.sent == []


def test_init_producer_id_for_a_transactional_id_is_refused() -> None:
    request = kio_request(22, 4, transactional_id="tx", transaction_timeout=60_000)
    answer = call(FakeClient(lambda r: None), request)
    assert answer.error_code == ErrorCode.invalid_request
    assert (answer.producer_id, answer.producer_epoch) == (-1, -1)
