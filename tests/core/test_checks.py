"""validate_request, the check where a request enters a partition actor: every
well-formed request passes, anything else is refused with InvalidRequestError
naming the bad field, whether it was built without its checks, forged field
by field, or rebuilt from the wire. The fast column checks and the walk that
words the error give one verdict."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import fields
from typing import Any

import pytest

from coordinator import InvalidRequestError, validate_request
from coordinator.checks import INT64_MAX, INT64_MIN, ROW_CHECK_MAX, check_fields, message_rule
from coordinator.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

WIDE = 3 * ROW_CHECK_MAX  # partitions enough for the column checks


def commit(count: int = 1, **changes: Any) -> OffsetCommitRequest:
    parts = tuple(OffsetCommitPartition("topic", p, 100 + p, "meta", 7) for p in range(count))
    return forged(OffsetCommitRequest("g", parts, 3, "member-1", "instance-1", 60_000), **changes)


def forged(request: Any, **changes: Any) -> Any:
    """A copy of `request` with `changes`, made as a hostile sender would:
    without __init__ and its checks."""
    copy = object.__new__(type(request))
    for f in fields(request):
        object.__setattr__(copy, f.name, changes.get(f.name, getattr(request, f.name)))
    return copy


def item(*values: object) -> OffsetCommitPartition:
    """An OffsetCommitPartition built without its checks."""
    return tuple.__new__(OffsetCommitPartition, values)  # type: ignore[no-any-return]


def with_item(count: int, at: int, bad: OffsetCommitPartition) -> OffsetCommitRequest:
    good = commit(count)
    return forged(good, partitions=good.partitions[:at] + (bad,) + good.partitions[at + 1 :])


JOIN = JoinGroupRequest(
    "g",
    10_000,
    30_000,
    "consumer",
    (("range", b"\x00\x01"), ("sticky", b"")),
    "m",
    "i",
    "c",
    "h",
    False,
    False,
    "r",
)
LEAVE = LeaveGroupRequest("g", (MemberIdentity("m1", "i1", "done"), MemberIdentity()))


class StrSubclass(str):
    pass


class SubCommit(OffsetCommitRequest):
    pass


class Unprintable:
    def __repr__(self) -> str:
        raise AssertionError("a check ran the sender's code")


class Unhashable(type):
    def __hash__(cls) -> int:
        raise AssertionError("a check ran the sender's code")

    def __eq__(cls, other: object) -> bool:
        raise AssertionError("a check ran the sender's code")


class Hostile(metaclass=Unhashable):
    pass


VALID = [
    JOIN,
    JoinGroupRequest("g", 10, 10, "consumer", ()),
    SyncGroupRequest("g", 1, "m", "i", "consumer", "range", (("m", b"a"), ("n", b""))),
    SyncGroupRequest("g", 1, "m"),
    HeartbeatRequest("g", 1, "m", "i"),
    HeartbeatRequest("g", -1, ""),
    LEAVE,
    commit(1),
    commit(WIDE),
    commit(0),
    OffsetCommitRequest("g", (OffsetCommitPartition("t", INT64_MAX, INT64_MIN, "métadonnées ✓", -1),)),
    OffsetFetchRequest("g", (("t", 0), ("t", 1)), False),
    OffsetFetchRequest("g"),
    OffsetFetchRequest("g", tuple(("t", p) for p in range(WIDE))),
    DescribeGroupsRequest(("a", "b")),
    ListGroupsRequest(("Stable", "Empty")),
    ListGroupsRequest(),
    DeleteGroupsRequest(("a",)),
    OffsetDeleteRequest("g", (("t", 0),)),
]


@pytest.mark.parametrize("request_", VALID, ids=lambda r: type(r).__name__)
def test_every_well_formed_request_passes(request_: object) -> None:
    validate_request(request_)
    validate_request(forged(request_))  # built field by field: the same values pass the same


BAD: list[tuple[str, Callable[[], object], str]] = [
    ("str", lambda: "OffsetCommitRequest", r"not a group protocol request: str$"),
    ("None", lambda: None, r"not a group protocol request: NoneType"),
    ("dict", lambda: {"group_id": "g", "partitions": ()}, r"not a group protocol request: dict"),
    ("subclass", lambda: SubCommit("g", ()), r"not a group protocol request: SubCommit"),
    ("hostile class", lambda: Hostile(), r"not a group protocol request: Hostile"),
    ("item alone", lambda: OffsetCommitPartition("t", 0, 1), r"OffsetCommitPartition"),
    (
        "str offset",
        lambda: with_item(1, 0, item("t", 0, "5", "", -1)),
        r"partitions\[0\]\.offset must be int",
    ),
    (
        "str partition",
        lambda: with_item(1, 0, item("t", "0", 5, "", -1)),
        r"partitions\[0\]\.partition must be int",
    ),
    (
        "bytes metadata",
        lambda: with_item(WIDE, 9, item("t", 9, 5, b"\xff\xfe", -1)),
        r"partitions\[9\]\.metadata must be str, got bytes",
    ),
    (
        "lone surrogate",
        lambda: with_item(WIDE, 3, item("t", 3, 5, "ok\ud800", -1)),
        r"partitions\[3\]\.metadata must be valid UTF-8",
    ),
    (
        "surrogate group",
        lambda: commit(1, group_id="g\udfff"),
        r"OffsetCommitRequest\.group_id must be valid UTF-8",
    ),
    (
        "huge int",
        lambda: commit(1, generation_id=2**100_000),
        r"generation_id must be within int64, got <int of 100001 bits>",
    ),
    ("beyond int64", lambda: with_item(1, 0, item("t", 0, 2**63, "", -1)), r"offset must be within int64"),
    ("below int64", lambda: with_item(WIDE, 5, item("t", 5, 1, "", -(2**63) - 1)), r"\[5\]\.leader_epoch"),
    ("bool generation", lambda: commit(1, generation_id=True), r"generation_id must be int, got bool"),
    (
        "bool partition",
        lambda: with_item(WIDE, 0, item("t", False, 1, "", -1)),
        r"\[0\]\.partition must be int",
    ),
    (
        "str subclass",
        lambda: commit(1, member_id=StrSubclass("m")),
        r"member_id must be str, got StrSubclass",
    ),
    (
        "short item",
        lambda: with_item(WIDE, 2, item("t", 2)),
        r"partitions\[2\] must be a OffsetCommitPartition of 5",
    ),
    (
        "long item",
        lambda: with_item(1, 0, item("t", 0, 1, "", -1, "x")),
        r"OffsetCommitPartition of 5 fields, got 6",
    ),
    (
        "plain tuple item",
        lambda: commit(1, partitions=(("t", 0, 1, "", -1),)),
        r"must be OffsetCommitPartition",
    ),
    (
        "list partitions",
        lambda: commit(1, partitions=list(commit(2).partitions)),
        r"partitions must be tuple\[",
    ),
    ("None partitions", lambda: commit(1, partitions=None), r"partitions must be tuple"),
    (
        "float retention",
        lambda: commit(1, retention_time_ms=1.0),
        r"retention_time_ms must be int, got float",
    ),
    (
        "int instance id",
        lambda: commit(1, group_instance_id=7),
        r"group_instance_id must be str \| None, got int",
    ),
    ("unprintable", lambda: commit(1, member_id=Unprintable()), r"member_id must be str, got Unprintable"),
    (
        "hostile type",
        lambda: with_item(WIDE, 4, item("t", 4, 1, Hostile(), -1)),
        r"partitions\[4\]\.metadata must be str, got Hostile",
    ),
    (
        "hostile field",
        lambda: commit(1, group_instance_id=Hostile()),
        r"group_instance_id must be str \| None",
    ),
    ("unset field", lambda: object.__new__(HeartbeatRequest), r"HeartbeatRequest\.group_id is not set"),
    (
        "member id int",
        lambda: forged(LEAVE, members=(LEAVE.members[0], forged(MemberIdentity(), member_id=5))),
        r"LeaveGroupRequest\.members\[1\]\.member_id must be str, got int",
    ),
    (
        "member reason bytes",
        lambda: forged(LEAVE, members=tuple(forged(MemberIdentity(), reason=b"x") for _ in range(WIDE))),
        r"members\[0\]\.reason must be str",
    ),
    (
        "member not identity",
        lambda: forged(LEAVE, members=(("m", None, ""),)),
        r"members must be MemberIdentity",
    ),
    (
        "member unset",
        lambda: forged(LEAVE, members=(object.__new__(MemberIdentity),)),
        r"member_id is not set",
    ),
    (
        "protocols list",
        lambda: forged(JOIN, protocols=[("range", b"")]),
        r"protocols must be tuple\[tuple\[str, bytes",
    ),
    (
        "protocol of 3",
        lambda: forged(JOIN, protocols=(("range", b"", b""),)),
        r"protocols must be tuple\[str, bytes\]",
    ),
    (
        "protocol name bytes",
        lambda: forged(JOIN, protocols=((b"range", b""),)),
        r"protocols must be str \(item \[0\]\[0\]\)",
    ),
    ("protocol metadata str", lambda: forged(JOIN, protocols=(("range", "x"),)), r"protocols must be bytes"),
    (
        "protocol bytearray",
        lambda: forged(JOIN, protocols=tuple((f"p{i}", bytearray(b"x")) for i in range(WIDE))),
        r"protocols must be bytes \(item \[0\]\[1\]\), got bytearray",
    ),
    (
        "join require bool",
        lambda: forged(JOIN, require_known_member_id=1),
        r"require_known_member_id must be bool",
    ),
    ("a class", lambda: OffsetCommitRequest, r"not a group protocol request: type"),
    (
        "fetch list",
        lambda: forged(OffsetFetchRequest("g"), partitions=[("t", 0)]),
        r"partitions must be tuple\[tuple\[str, int\], \.\.\.\] \| None, got list",
    ),
    (
        "fetch partition str",
        lambda: forged(OffsetFetchRequest("g"), partitions=(("t", "0"),)),
        r"OffsetFetchRequest\.partitions must be int \(item \[0\]\[1\]\)",
    ),
    (
        "describe ids str",
        lambda: forged(DescribeGroupsRequest(()), group_ids="ab"),
        r"group_ids must be tuple",
    ),
    (
        "states None item",
        lambda: forged(ListGroupsRequest(), states_filter=(None,)),
        r"states_filter must be str",
    ),
]


@pytest.mark.parametrize(("case", "make", "message"), BAD, ids=[case for case, _, _ in BAD])
def test_a_malformed_request_is_refused_with_the_field_named(
    case: str, make: Callable[[], object], message: str
) -> None:
    with pytest.raises(InvalidRequestError, match=message) as refused:
        validate_request(make())
    assert "\n" not in str(refused.value)


def test_construction_applies_the_same_rules() -> None:
    with pytest.raises(TypeError, match=r"protocols must be bytes \(item \[0\]\[1\]\), got bytearray"):
        JoinGroupRequest("g", 10, 10, "consumer", (("range", bytearray(b"x")),))
    with pytest.raises(TypeError, match="group_id must be str, got StrSubclass"):
        HeartbeatRequest(StrSubclass("g"), 1, "m")
    with pytest.raises(TypeError, match=r"partitions must be OffsetCommitPartition \(item \[0\]\)"):
        OffsetCommitRequest("g", (("t", 0, 1, "", -1),))  # type: ignore[arg-type]
    # An item made by _make skips __new__'s checks; the request still catches it.
    with pytest.raises(ValueError, match=r"partitions\[1\]\.offset must be within int64"):
        OffsetCommitRequest(
            "g", (OffsetCommitPartition("t", 0, 1), OffsetCommitPartition._make(("t", 1, 2**64, "", -1)))
        )
    with pytest.raises(ValueError, match="metadata must be valid UTF-8"):
        check_fields(item("t", 0, 1, "\udc80", -1))


# ---------------------------------------------------------------- one verdict

POOL: list[object] = [
    "s", "é✓", "\ud800", StrSubclass("s"), b"b", bytearray(b"b"), 0, -1, INT64_MAX, INT64_MIN, 2**63,
    -(2**63) - 1, True, False, 1.5, None, (), ("a",), (("a", b""),), (("a", 1),), ["a"], Unprintable(),
]  # fmt: skip


def _mutations(request: Any, rng: random.Random) -> Any:
    """`request` with one field, or one value inside a nested field, replaced from POOL."""
    f = rng.choice(fields(request))
    value = getattr(request, f.name)
    if type(value) is tuple and value and rng.random() < 0.7:
        items = list(value)
        at = rng.randrange(len(items))
        target = items[at]
        if type(target) is OffsetCommitPartition or type(target) is tuple:
            inner = list(target)
            inner[rng.randrange(len(inner))] = rng.choice(POOL)
            items[at] = tuple.__new__(type(target), inner)
        elif type(target) is MemberIdentity:
            items[at] = _mutations(target, rng)
        else:
            items[at] = rng.choice(POOL)
        return forged(request, **{f.name: tuple(items)})
    return forged(request, **{f.name: rng.choice(POOL)})


@pytest.mark.parametrize("seed", range(4))
def test_the_fast_checks_and_the_worded_walk_agree(seed: int) -> None:
    rng = random.Random(seed)
    bases = [
        *VALID,
        commit(ROW_CHECK_MAX + 1),
        LeaveGroupRequest("g", tuple(MemberIdentity(f"m{i}") for i in range(WIDE))),
    ]
    refused = 0
    for _ in range(3_000):
        request = _mutations(rng.choice(bases), rng)
        rule = message_rule(type(request))
        fast_ok = rule.fields_ok(request)
        problem = rule.fields_problem(request, rule.name)
        assert fast_ok == (problem is None), (
            f"seed {seed}: fast says {fast_ok}, walk says {problem} for {request!r:.300}"
        )
        refused += not fast_ok
    assert refused > 1_000, "the mutations mostly break requests"
