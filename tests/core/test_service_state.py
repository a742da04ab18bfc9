"""Service state in offsets partition 0 (coordinator/service_state.py): its requests on a
real Shard, its records through the log's codec, a snapshot and a reload."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from coordinator.errors import Errors
from coordinator.records import Record, ServiceStateKey, ServiceStateValue
from coordinator.service_state import (
    ServiceEntry,
    ServiceStateReadRequest,
    ServiceStateWriteRequest,
)
from coordinator.shard import Shard
from log import PartitionLog, load_into
from log.codec import PayloadError, decode_records, encode_payload
from log.snapshot import write_snapshot

from tests.log.helpers import EPOCH, NOW_MS, commit


def send(shard: Shard, request: object) -> tuple[object, list[Record]]:
    result = shard.handle(request, NOW_MS)  # type: ignore[arg-type]
    (_, response), = result.responses
    return response, result.records


def write(shard: Shard, writer: str, *entries: ServiceEntry, claim: bool = False) -> Errors:
    response, _ = send(shard, ServiceStateWriteRequest(writer, claim, entries))
    return response.error  # type: ignore[attr-defined, no-any-return]


def read(shard: Shard, *kinds: str) -> dict[tuple[str, str], bytes]:
    response, records = send(shard, ServiceStateReadRequest(kinds))
    assert response.error is Errors.NONE and not records  # type: ignore[attr-defined]
    return {(e.kind, e.name): e.data for e in response.entries}  # type: ignore[attr-defined]


def test_entries_are_written_read_and_deleted_by_their_writer() -> None:
    shard = Shard(partition=0)
    assert write(shard, "a", claim=True) is Errors.NONE
    topic, sample = ServiceEntry("topic", "t", b"1"), ServiceEntry("end", "t/0/5", b"9")
    assert write(shard, "a", topic, sample) is Errors.NONE
    assert read(shard, "topic") == {("topic", "t"): b"1"}
    deletes = ServiceEntry("topic", "t", None), ServiceEntry("topic", "gone", None)
    assert write(shard, "a", *deletes) is Errors.NONE
    assert read(shard, "topic", "end") == {("end", "t/0/5"): b"9"}


def test_a_newer_writer_fences_the_older_one_which_changes_nothing() -> None:
    shard = Shard(partition=0)
    write(shard, "old", claim=True)
    write(shard, "old", ServiceEntry("topic", "t", b"1"))
    assert write(shard, "new", claim=True) is Errors.NONE
    stale = ServiceStateWriteRequest("old", False, (ServiceEntry("topic", "t", b"2"),))
    response, records = send(shard, stale)
    assert response.error is Errors.PRODUCER_FENCED and not records  # type: ignore[attr-defined]
    assert read(shard, "topic") == {("topic", "t"): b"1"}
    assert write(shard, "new", ServiceEntry("topic", "t", b"3")) is Errors.NONE
    _, claim_again = send(shard, ServiceStateWriteRequest("new", True, ()))
    assert claim_again == [], "claiming what one holds writes nothing"


@pytest.mark.parametrize(
    ("partition", "writer", "entries", "error"),
    [
        (1, "a", (), Errors.NOT_COORDINATOR),
        (0, "", (), Errors.INVALID_REQUEST),
        (0, "a", (ServiceEntry("writer", "", b"b"),), Errors.INVALID_REQUEST),
    ],
)
def test_misrouted_or_malformed_writes_are_refused(
    partition: int, writer: str, entries: tuple[ServiceEntry, ...], error: Errors
) -> None:
    shard = Shard(partition=partition)
    response, records = send(shard, ServiceStateWriteRequest(writer, True, entries))
    assert response.error is error and not records  # type: ignore[attr-defined]


def test_reads_of_another_partition_are_not_coordinator() -> None:
    response, _ = send(Shard(partition=3), ServiceStateReadRequest(("topic",)))
    assert response.error is Errors.NOT_COORDINATOR  # type: ignore[attr-defined]


def test_a_wrongly_typed_entry_is_refused_at_construction() -> None:
    with pytest.raises(TypeError):
        ServiceEntry("topic", "t", "not bytes")  # type: ignore[arg-type]


def test_records_round_trip_through_the_codec_beside_group_records() -> None:
    records = [
        Record(ServiceStateKey("topic", "t"), ServiceStateValue(b"\x00\x01")),
        commit("g", "t", 0, 1),
        Record(ServiceStateKey("end-sample", "t/0/1"), None),
        Record(ServiceStateKey("topic", "u"), ServiceStateValue(b"")),
    ]
    assert decode_records(encode_payload(records)) == records
    assert ServiceStateKey("g", "x") != ("g", "x"), "a typed key equals only its own type"


def test_malformed_service_state_runs_are_payload_errors() -> None:
    body = msgpack.unpackb(encode_payload([Record(ServiceStateKey("topic", "t"), ServiceStateValue(b"x"))]))
    body[1][5] = ["not bytes"]
    with pytest.raises(PayloadError):
        decode_records(msgpack.packb(body))


def test_a_snapshot_and_a_reload_give_the_same_state_fencing_included(tmp_path: Path) -> None:
    live = Shard(partition=0)
    with PartitionLog.open(tmp_path, EPOCH) as log:
        for writer, claim, entries in [
            ("a", True, (ServiceEntry("topic", "t", b"1"),)),
            ("a", False, (ServiceEntry("topic", "t", b"2"), ServiceEntry("topic", "u", b"3"))),
            ("b", True, (ServiceEntry("topic", "u", None),)),
        ]:
            _, records = send(live, ServiceStateWriteRequest(writer, claim, entries))
            log.append(records, EPOCH, NOW_MS)
        log.sync()
        assert write_snapshot(log, NOW_MS) is not None
        log.append([commit("g", "t", 0, 7)], EPOCH, NOW_MS)
        log.sync()
        loaded = Shard(partition=0)
        load_into(loaded, log)
    assert loaded.service_state == live.service_state
    assert read(loaded, "topic") == {("topic", "t"): b"2"}
    assert write(loaded, "a", ServiceEntry("topic", "t", b"9")) is Errors.PRODUCER_FENCED
