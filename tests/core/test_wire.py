"""Messages cross Ray process boundaries as pickles: the compact wire form of
the per-partition messages must rebuild equal, frozen, correctly typed values."""

import dataclasses
import pickle

import pytest

from coordinator import Errors, messages
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


def test_uniform_results_are_shared_instances_and_the_sharing_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    response = OffsetCommitResponse(messages.partition_results(("t",) * 3, (0, 1, 2), Errors.NONE))
    copies = [pickle.loads(pickle.dumps(response, protocol=5)) for _ in range(2)]
    assert copies[0] == copies[1] == response
    assert all(a is b for a, b in zip(copies[0].partitions, copies[1].partitions))
    assert all(type(p) is PartitionResult and type(p.error) is Errors for p in copies[0].partitions)
    failed = messages.partition_results(("t",), (0,), Errors.NOT_COORDINATOR)
    assert failed == (PartitionResult("t", 0, Errors.NOT_COORDINATOR),)

    monkeypatch.setattr(messages, "SHARED_RESULTS_MAX", 2)
    messages.partition_results(("u",) * 5, tuple(range(5)), Errors.NONE)
    assert len(messages._SHARED_RESULTS) <= 5
    messages.partition_results(("v",), (0,), Errors.NONE)
    assert len(messages._SHARED_RESULTS) == 1, "a full table is cleared before it grows"
