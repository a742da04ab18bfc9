"""Regression tests: duplicate JoinGroup protocols, generation -1 commits
(KAFKA-14201), commit size limits in UTF-8 bytes."""

from __future__ import annotations

import random

import pytest

from coordinator import Errors, GroupState, offsets
from coordinator.messages import (
    LeaveGroupRequest,
    ListGroupsRequest,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    SyncGroupRequest,
)

from tests.core.harness import Harness, protocols

DUPLICATES = protocols("range", "range")
INITIAL_DELAY_MS = 3_000
REBALANCE_AND_MORE = 40_000


def listed(h: Harness) -> set[str]:
    return {g.group_id for g in h.call(ListGroupsRequest()).groups}


def group_snapshot(h: Harness, group_id: str) -> tuple[object, ...]:
    """What a refused JoinGroup must leave as it was."""
    group = h.shard.groups[group_id]
    members = {m.member_id: (m.protocols, m.join_token, m.sync_token) for m in group.members.values()}
    timers = {key: h.shard.timers.get(key) for key in h.shard.timers.keys()}
    return (
        group.state,
        group.generation_id,
        group.protocol_name,
        group.leader_id,
        dict(group.supported_protocols),
        group.num_awaiting_join,
        members,
        set(group.pending_members),
        timers,
        len(h.log),
    )


# ------------------------------------------------ duplicate protocol names


@pytest.mark.parametrize(
    "extra",
    [{}, {"require_known_member_id": False}, {"group_instance_id": "i"}],
    ids=["kip394", "no-kip394", "static"],
)
def test_new_group_refuses_duplicate_protocols(extra: dict[str, object]) -> None:
    h = Harness()
    response = h.call(h.join_request("g", protocols=DUPLICATES, **extra))
    assert response.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    h.advance(INITIAL_DELAY_MS + REBALANCE_AND_MORE)  # raised here before the fix
    assert "g" not in h.shard.groups and "g" not in listed(h)
    assert h.log == [] and h.open == set()


def test_duplicate_joiner_does_not_disturb_a_forming_group() -> None:
    h = Harness()
    good = h.join("g")
    before = group_snapshot(h, "g")
    refused = h.call(h.join_request("g", protocols=DUPLICATES, require_known_member_id=False))
    assert refused.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert group_snapshot(h, "g") == before
    h.advance_until_answered([good])
    response = h.take(good)
    assert response.error is Errors.NONE and response.protocol_name == "range"
    assert h.shard.groups["g"].size == 1


@pytest.mark.parametrize("who", ["leader", "follower"])
def test_stable_member_rejoining_with_duplicates_is_refused(who: str) -> None:
    h = Harness()
    (leader, follower), generation = h.form_group("g", 2)
    member = leader if who == "leader" else follower
    before = group_snapshot(h, "g")
    response = h.call(h.join_request("g", member, protocols=DUPLICATES))
    assert response.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert group_snapshot(h, "g") == before
    group = h.shard.groups["g"]
    assert group.is_(GroupState.STABLE) and group.generation_id == generation
    assert ("join", "g") not in h.shard.timers
    assert h.heartbeat("g", leader, generation) is Errors.NONE
    assert h.heartbeat("g", follower, generation) is Errors.NONE
    # The group still rebalances normally afterwards.
    tokens = [h.join("g", leader), h.join("g", follower)]
    h.advance_until_answered(tokens)
    assert all(h.take(t).generation_id == generation + 1 for t in tokens)


def test_pending_member_rejoining_with_duplicates_stays_pending() -> None:
    h = Harness()
    first = h.call(h.join_request("g"))
    assert first.error is Errors.MEMBER_ID_REQUIRED
    response = h.call(h.join_request("g", first.member_id, protocols=DUPLICATES))
    assert response.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    group = h.shard.groups["g"]
    assert group.is_(GroupState.EMPTY) and first.member_id in group.pending_members
    token = h.send(h.join_request("g", first.member_id))
    h.advance_until_answered([token])
    assert h.take(token).error is Errors.NONE


@pytest.mark.parametrize("bad", [{"protocols": ()}, {"protocol_type": ""}], ids=["no-protocols", "no-type"])
def test_join_without_protocols_is_refused(bad: dict[str, object]) -> None:
    h = Harness()
    assert h.call(h.join_request("new", **bad)).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert "new" not in h.shard.groups
    (leader, _), generation = h.form_group("g", 2)
    assert h.call(h.join_request("g", leader, **bad)).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    group = h.shard.groups["g"]
    assert group.is_(GroupState.STABLE) and group.generation_id == generation


def _random_protocols(rng: random.Random) -> tuple[tuple[str, bytes], ...]:
    names = [rng.choice("abc") for _ in range(rng.randint(0, 3))]
    return tuple((name, bytes([rng.randrange(2)])) for name in names)


@pytest.mark.parametrize("seed", range(30))
def test_protocol_selection_never_raises(seed: int) -> None:
    """Any JoinGroup sequence the request checks let through gives each
    request exactly one answer and never breaks protocol selection."""
    rng = random.Random(seed)
    h = Harness(group_initial_rebalance_delay_ms=rng.choice([0, INITIAL_DELAY_MS]))
    known: dict[str, int] = {}  # member id -> generation it last heard of
    for _ in range(60):
        action = rng.random()
        join_kw = {"protocols": _random_protocols(rng), "require_known_member_id": rng.random() < 0.5}
        if action < 0.35 or not known:
            response = h.call(h.join_request("g", **join_kw)) if join_kw["require_known_member_id"] else None
            member_id = response.member_id if response is not None else ""
            if response is None or response.error is Errors.MEMBER_ID_REQUIRED:
                h.send(h.join_request("g", member_id, **join_kw))
        elif action < 0.6:
            h.send(h.join_request("g", rng.choice(sorted(known)), **join_kw))
        elif action < 0.75:
            member_id = rng.choice(sorted(known))
            h.send(SyncGroupRequest("g", known[member_id], member_id))
        elif action < 0.8:
            h.call(LeaveGroupRequest("g", (MemberIdentity(rng.choice(sorted(known))),)))
        else:
            h.advance(rng.choice([100, 1_000, 5_000, 20_000]))
        for answer in h.answers.values():
            if getattr(answer, "member_id", "") and getattr(answer, "generation_id", -1) >= 0:
                known[answer.member_id] = answer.generation_id
        h.answers.clear()
        group = h.shard.groups.get("g")
        if group is not None and group.members:
            assert group.candidate_protocols(), f"seed {seed}: no protocol every member supports"
    h.advance(600_000)
    h.advance(600_000)
    assert h.open == set(), f"seed {seed}: requests never answered"


def test_group_member_refuses_duplicate_assignors() -> None:
    from actors.member.api import MemberConfig
    from actors.member.group_member import GroupMember

    with pytest.raises(ValueError, match="assignors must be distinct.*range"):
        GroupMember("g", ["t"], assignors=("range", "roundrobin", "range"))
    fields = dict(
        group_id="g",
        topics=("t",),
        pattern=None,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        heartbeat_interval_ms=1_000,
        max_poll_interval_ms=10_000,
        metadata_max_age_ms=10_000,
        retry_backoff_ms=100,
        group_instance_id=None,
        client_id="c",
        client_host="",
    )
    with pytest.raises(ValueError, match="assignors must be distinct"):
        MemberConfig(assignors=("sticky", "sticky"), **fields)
    assert MemberConfig(assignors=("range", "sticky"), **fields).assignors == ("range", "sticky")


# ------------------------------------------------- generation -1 commits


TP = ("t", 0)


@pytest.mark.parametrize(
    "identity",
    [{"member_id": "m"}, {"group_instance_id": "i"}, {"member_id": "m", "group_instance_id": "i"}],
    ids=["member-id", "instance-id", "both"],
)
def test_generation_minus_one_commit_to_new_group_ignores_ids(identity: dict[str, str]) -> None:
    # KAFKA-14201 (GroupCoordinatorTest.testManualCommitOffsetShouldNotValidateMemberIdAndInstanceId).
    h = Harness()
    assert h.commit("g", {TP: 5}, generation=-1, **identity) == {TP: Errors.NONE}
    assert h.fetch("g", [TP]) == {TP: 5}
    assert h.shard.groups["g"].is_(GroupState.EMPTY)


def test_generation_minus_one_commit_to_empty_managed_group_ignores_ids() -> None:
    h = Harness()
    (leader, follower), generation = h.form_group("g", 2)
    h.leave("g", leader, follower)
    group = h.shard.groups["g"]
    assert group.is_(GroupState.EMPTY) and group.generation_id > generation
    assert h.commit("g", {TP: 7}, generation=-1, member_id=leader) == {TP: Errors.NONE}
    assert h.commit("g", {TP: 8}, generation=-1, group_instance_id="i") == {TP: Errors.NONE}
    assert h.fetch("g", [TP]) == {TP: 8}
    # A generation >= 0 is still checked against the (absent) members.
    assert h.commit("g", {TP: 9}, generation=group.generation_id, member_id=leader) == {
        TP: Errors.UNKNOWN_MEMBER_ID
    }


def test_generation_minus_one_commit_to_active_group_is_still_checked() -> None:
    h = Harness()
    (leader, _), _generation = h.form_group("g", 2)
    assert h.commit("g", {TP: 1}, generation=-1) == {TP: Errors.UNKNOWN_MEMBER_ID}
    assert h.commit("g", {TP: 1}, generation=-1, member_id="ghost") == {TP: Errors.UNKNOWN_MEMBER_ID}
    assert h.commit("g", {TP: 1}, generation=-1, member_id=leader) == {TP: Errors.ILLEGAL_GENERATION}
    assert h.commit("g", {TP: 1}, generation=-1, group_instance_id="i") == {TP: Errors.UNKNOWN_MEMBER_ID}
    assert h.fetch("g", [TP]) == {TP: -1}


@pytest.mark.parametrize(
    ("config", "parts", "error"),
    [
        (
            {"offset_metadata_max_bytes": 4},
            (OffsetCommitPartition("t", 0, 1, "12345"),),
            "OFFSET_METADATA_TOO_LARGE",
        ),
        ({"offsets_max_commit_bytes": 10}, (OffsetCommitPartition("t", 0, 1),), "INVALID_COMMIT_OFFSET_SIZE"),
        ({}, (), None),
    ],
    ids=["metadata-too-large", "commit-too-large", "no-partitions"],
)
def test_commit_storing_nothing_leaves_no_group(
    config: dict[str, int], parts: tuple[OffsetCommitPartition, ...], error: str | None
) -> None:
    for member_id in ("", "m"):
        h = Harness(**config)
        response = h.call(OffsetCommitRequest("g", parts, member_id=member_id))
        assert [e.name for e in response.errors().values()] == ([error] if error else [])
        assert "g" not in h.shard.groups and "g" not in listed(h)
        assert h.log == []


# ------------------------------------------------- sizes in UTF-8 bytes


EMOJI = "\N{GRINNING FACE}"  # 4 bytes in UTF-8


@pytest.mark.parametrize("width", [1, offsets.COLUMNS_FROM_PARTITIONS])
def test_metadata_limit_counts_utf8_bytes(width: int) -> None:
    h = Harness()
    limit = h.shard.config.offset_metadata_max_bytes
    fits, too_long = EMOJI * (limit // 4), EMOJI * (limit // 4) + "a"
    parts = [OffsetCommitPartition("t", p, 1, fits) for p in range(width - 1)]
    parts.append(OffsetCommitPartition("t", width - 1, 1, too_long))
    response = h.call(OffsetCommitRequest("s", tuple(parts)))
    expected = {("t", p): Errors.NONE for p in range(width - 1)}
    expected[("t", width - 1)] = Errors.OFFSET_METADATA_TOO_LARGE
    assert response.errors() == expected


def test_issue_commit_of_900_emoji_metadata_is_too_large() -> None:
    # 900 partitions of 900 emoji: 3.2 MB once encoded, far over Kafka's message.max.bytes.
    h = Harness()
    metadata = EMOJI * 900
    parts = tuple(OffsetCommitPartition("topic", p, 1, metadata) for p in range(900))
    response = h.call(OffsetCommitRequest("s", parts))
    assert set(response.errors().values()) == {Errors.INVALID_COMMIT_OFFSET_SIZE}
    assert h.log == [] and "s" not in h.shard.groups


def _commit_bytes(group_id: str, parts: tuple[OffsetCommitPartition, ...]) -> int:
    per_record = offsets.RECORD_OVERHEAD_BYTES + len(group_id.encode())
    return sum(per_record + len(p.topic.encode()) + len(p.metadata.encode()) for p in parts)


@pytest.mark.parametrize(
    "width", [1, offsets.COLUMNS_FROM_PARTITIONS - 1, offsets.COLUMNS_FROM_PARTITIONS, 50]
)
@pytest.mark.parametrize("text", ["ascii", "emoji"])
def test_commit_size_limit_counts_utf8_bytes_at_the_boundary(width: int, text: str) -> None:
    def name(base: str) -> str:
        return base if text == "ascii" else base + EMOJI + "\N{LATIN SMALL LETTER E WITH ACUTE}"

    group_id = name("group")
    parts = tuple(OffsetCommitPartition(name("topic"), p, p, name("meta") * (p % 3)) for p in range(width))
    size = _commit_bytes(group_id, parts)
    refused = Harness(offsets_max_commit_bytes=size - 1)
    response = refused.call(OffsetCommitRequest(group_id, parts))
    assert set(response.errors().values()) == {Errors.INVALID_COMMIT_OFFSET_SIZE}
    assert refused.log == []
    accepted = Harness(offsets_max_commit_bytes=size)
    response = accepted.call(OffsetCommitRequest(group_id, parts))
    assert set(response.errors().values()) == {Errors.NONE} and len(accepted.log) == width


def test_utf8_len() -> None:
    assert offsets.utf8_len("") == 0
    assert offsets.utf8_len("abc") == 3
    assert offsets.utf8_len("\N{LATIN SMALL LETTER E WITH ACUTE}") == 2
    assert offsets.utf8_len(EMOJI * 3 + "a") == 13
