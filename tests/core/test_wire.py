"""Messages cross Ray process boundaries as pickles: the compact wire form of
the per-partition messages (actors/core/wire.py) must be in effect wherever
messages are pickled, and rebuild equal, frozen, correctly typed values.

This module does not import actors.core.wire itself: the compact form must be in
effect because tests/conftest.py imports it, as actors/__init__.py does for
every process of the Ray layer."""

import dataclasses
import pickle
import subprocess
import sys

import pytest

from coordinator import Errors, InvalidRequestError, messages, validate_request
from coordinator.messages import (
    FetchedOffset,
    JoinGroupRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionResult,
)

MESSAGES = [
    OffsetCommitRequest(
        "g", tuple(OffsetCommitPartition("t", p, p * 10, "m", 3) for p in range(5)), 2, "m1", "i"
    ),
    OffsetCommitRequest("", ()),
    OffsetCommitResponse(tuple(PartitionResult("t", p, Errors(e)) for p, e in enumerate((0, 25, 12)))),
    OffsetFetchResponse(Errors.NONE, (FetchedOffset("t", 0, 5, -1, "x"), FetchedOffset("u", 1, -1, -1, ""))),
    OffsetFetchResponse(
        Errors.NONE, (FetchedOffset("t", 0, 5, 2, "x"), FetchedOffset("t", 1, -1, -1, "", Errors(3)))
    ),
    OffsetDeleteResponse(
        Errors.NONE, (PartitionResult("t", 0, Errors(0)), PartitionResult("t", 1, Errors(86)))
    ),
    OffsetFetchRequest("g", None),
    OffsetDeleteResponse(Errors.GROUP_ID_NOT_FOUND),
    JoinGroupRequest("g", 10_000, 30_000, "consumer", (("range", b"\x00"),)),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_pickle_round_trip(message: object) -> None:
    copy = pickle.loads(pickle.dumps(message, protocol=5))
    assert copy == message and type(copy) is type(message)
    for f in dataclasses.fields(copy):  # type: ignore[arg-type]
        value = getattr(copy, f.name)
        for item in value if isinstance(value, tuple) else ():
            if hasattr(item, "error"):
                assert type(item.error) is Errors
    first = dataclasses.fields(copy)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(copy, first, None)


def test_the_compact_form_is_in_effect_in_the_tests() -> None:
    request = MESSAGES[0]
    data = pickle.dumps(request, protocol=5)
    assert b"actors.core.wire" in data and b"_rebuild_columns" in data


def test_any_module_of_the_ray_layer_registers_the_compact_form() -> None:
    # A fresh interpreter that imports one small module of actors/ and pickles
    # a commit and its answer: both in the compact form, none in the plain one.
    code = (
        "import pickle, actors.core.settings\n"
        "from coordinator.messages import *\n"
        "from coordinator import Errors\n"
        "r = OffsetCommitRequest('g', (OffsetCommitPartition('t', 0, 1),))\n"
        "a = OffsetCommitResponse(partition_results(('t',), (0,), Errors.NONE))\n"
        "print(all(b'_rebuild_columns' in pickle.dumps(m, 5) for m in (r, a)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_a_rebuilt_request_is_unchecked_so_the_partition_validates_it() -> None:
    # The wire form skips the construction checks by design: what a sender
    # forged arrives as forged, and only validate_request stops it.
    forged = tuple.__new__(OffsetCommitPartition, ("t", 0, "5", "", -1))
    request = OffsetCommitRequest("g", (OffsetCommitPartition("t", 1, 1),))
    object.__setattr__(request, "partitions", (forged,))
    copy = pickle.loads(pickle.dumps(request, protocol=5))
    assert copy.partitions[0].offset == "5"
    with pytest.raises(
        InvalidRequestError, match=r"OffsetCommitRequest\.partitions\[0\]\.offset must be int"
    ):
        validate_request(copy)


def test_uniform_results_are_shared_instances(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(messages, "_SHARED_RESULTS", {})
    response = OffsetCommitResponse(messages.partition_results(("t",) * 3, (0, 1, 2), Errors.NONE))
    copies = [pickle.loads(pickle.dumps(response, protocol=5)) for _ in range(2)]
    assert copies[0] == copies[1] == response
    assert all(a is b for a, b in zip(copies[0].partitions, copies[1].partitions))
    assert all(type(p) is PartitionResult and type(p.error) is Errors for p in copies[0].partitions)
    failed = messages.partition_results(("t",), (0,), Errors.NOT_COORDINATOR)
    assert failed == (PartitionResult("t", 0, Errors.NOT_COORDINATOR),)


def test_the_shared_results_table_holds_at_most_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    bound = messages.SHARED_RESULTS_MAX
    assert bound == 65_536
    table: dict[object, PartitionResult] = {}
    monkeypatch.setattr(messages, "_SHARED_RESULTS", table)
    messages.partition_results(("t",) * (bound - 1), range(bound - 1), Errors.NONE)
    messages.partition_results(("u",), (0,), Errors.NONE)
    assert len(table) == bound, "filled to the bound exactly, nothing dropped"
    again = messages.partition_results(("t",) * (bound - 1), range(bound - 1), Errors.NONE)
    assert len(table) == bound and again[5] is table[("t", 5, Errors.NONE)], "known results added nothing"

    messages.partition_results(("v", "v"), (0, 1), Errors.NONE)
    assert sorted(table) == [("v", 0, Errors.NONE), ("v", 1, Errors.NONE)], "cleared before it would overfill"
    messages.partition_results(("w",) * (bound - 2), range(bound - 2), Errors.NONE)
    assert len(table) == bound
    messages.partition_results(("x",) * (bound + 3), range(bound + 3), Errors.NONE)
    assert len(table) == bound + 3, "an answer larger than the bound is shared alone"
