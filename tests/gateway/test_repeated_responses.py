"""Answers that repeat are built and encoded once (gateway.handlers.entities.RepeatedResponses,
gateway.codec.ResponseWriter): a consumer's commits and heartbeats get the same kio entity
while their results are the same, a different result gets its own, and every frame written
from a kept body reads back (kio) as the fresh encoding does, with its own correlation id."""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from coordinator.errors import Errors
from coordinator.messages import HeartbeatResponse, OffsetCommitResponse, PartitionResult
from gateway.codec import ResponseWriter
from gateway.handlers.entities import RepeatedResponses, build

from tests.gateway.fake_client import FakeClient, call
from tests.gateway.gateway_support import parse_response
from tests.gateway.kafka_support import kio_request
from tests.gateway.test_apis import commit_request
from tests.gateway.test_consumer_apis import STRANGER, T1, T2, TopicsClient, all_committed, commit_v10


def read_frame(frame: bytes, api_key: int, version: int) -> tuple[int, Any]:
    """(correlation id, response) of a size-prefixed response frame."""
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    return parse_response(frame[4:], api_key, version)


def heartbeat_v4() -> Any:
    """A Heartbeat v4 response: a flexible header (tagged fields), unlike OffsetCommit v3's."""
    return build(load_response_schema(12, 4), {"throttle_time": 0, "error_code": ErrorCode.none})


def committing(errors: dict[int, Errors]) -> FakeClient:
    def answer(request: Any) -> OffsetCommitResponse:
        return OffsetCommitResponse(
            tuple(PartitionResult(p.topic, p.partition, errors.get(p.partition, Errors.NONE))
                  for p in request.partitions)
        )

    return FakeClient(answer)


def test_a_commit_answered_the_same_way_gets_the_same_entity_and_another_its_own() -> None:
    errors: dict[int, Errors] = {}
    client = committing(errors)
    rows = [("t", 0, 5), ("t", 1, 6)]
    first = call(client, commit_request(3, rows))
    again = call(client, commit_request(3, [("t", 0, 7), ("t", 1, 8)]))  # other offsets, same answer
    assert again is first
    errors[1] = Errors.ILLEGAL_GENERATION
    refused = call(client, commit_request(3, rows))
    assert refused is not first
    codes = [p.error_code for p in refused.topics[0].partitions]
    assert codes == [ErrorCode.none, ErrorCode.illegal_generation]
    assert [p.error_code for p in first.topics[0].partitions] == [ErrorCode.none, ErrorCode.none]
    other_version = call(client, commit_request(8, rows))
    assert type(other_version) is not type(refused)


def test_a_v10_commit_answer_is_kept_per_results_and_topic_ids() -> None:
    """The Java 4.3 client's commits name topics by id: the answer carries the ids too."""
    client = TopicsClient(all_committed)
    first = call(client, commit_v10([(T1, [0, 1])]))
    assert call(client, commit_v10([(T1, [0, 1])])) is first
    other_topic = call(client, commit_v10([(T2, [0])]))
    assert other_topic is not first
    answered = (first.topics[0], other_topic.topics[0])
    assert [(t.topic_id, len(t.partitions)) for t in answered] == [(T1, 2), (T2, 1)]
    # An unknown id is answered as such, every time: never a kept answer of known ones.
    with_unknown = call(client, commit_v10([(T1, [0, 1]), (STRANGER, [0])]))
    assert with_unknown is not first
    assert [t.topic_id for t in with_unknown.topics] == [T1, STRANGER]


def test_a_heartbeat_answer_is_kept_per_error_and_version() -> None:
    error = [Errors.NONE]
    client = FakeClient(lambda request: HeartbeatResponse(error[0]))

    def beat(version: int) -> Any:
        return call(client, kio_request(12, version, group_id="g", generation_id=1, member_id="m",
                                        group_instance_id=None))

    assert beat(4) is beat(4)
    error[0] = Errors.REBALANCE_IN_PROGRESS
    assert beat(4).error_code == ErrorCode.rebalance_in_progress
    assert beat(0).error_code == ErrorCode.rebalance_in_progress


def test_a_response_written_again_reads_back_with_its_own_correlation_id() -> None:
    heartbeat = heartbeat_v4()  # flexible header
    commit = call(committing({}), commit_request(3, [("t", 0, 5), ("u", 2, 6)]))  # v0 header
    writer, fresh = ResponseWriter(), ResponseWriter()
    for response, api_key, version in ((heartbeat, 12, 4), (commit, 8, 3)):
        frames = [writer.write(correlation_id, response) for correlation_id in (1, 2, 3)]
        for correlation_id, frame in zip((1, 2, 3), frames):
            assert frame == fresh.write(correlation_id, dataclasses.replace(response))  # a copy
            assert read_frame(frame, api_key, version) == (correlation_id, response)


def test_kept_answers_and_bodies_are_bounded() -> None:
    answers = RepeatedResponses(capacity=2)
    request = kio_request(12, 4, group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    kept = answers.respond(request, "a", lambda: {"error_code": Errors.NONE})
    answers.respond(request, "b", lambda: {"error_code": Errors.NONE})
    assert answers.respond(request, "a", lambda: {"error_code": Errors.NONE}) is kept
    answers.respond(request, "c", lambda: {"error_code": Errors.NONE})  # full: forgets a and b
    rebuilt = answers.respond(request, "a", lambda: {"error_code": Errors.NONE})
    assert rebuilt is not kept and rebuilt == kept

    writer = ResponseWriter(capacity=1, max_body_bytes=8)
    small = heartbeat_v4()
    writer.write(1, small)
    assert len(writer._bodies) == 1
    writer.write(1, heartbeat_v4())  # full
    assert len(writer._bodies) == 1
    big = call(committing({}), commit_request(3, [("topic", p, 5) for p in range(4)]))
    assert read_frame(writer.write(9, big), 8, 3) == (9, big)  # too big to keep, still written
    assert all(kept is not big for kept, _ in writer._bodies.values())

