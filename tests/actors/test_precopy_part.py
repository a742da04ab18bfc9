"""A pre-copy's actor methods (actors/partition/handoff.py) without Ray: a whole session at a
source leader, its state file never showing a switch before the switch record; a target's
fence and admit; and every method refusing bad arguments with a ValueError, nothing changed
(any Ray process can call an actor)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coordinator import Errors
from coordinator.handoff import ROUTING_KEY, group_records
from coordinator.records import Record, ServiceStateValue
from coordinator.routing import Routing
from log.codec import encode_payload
from log.replica_state import read_replica_state

from tests.actors.replication_support import Cluster
from tests.actors.support import Answers, commit, run
from tests.core.harness import Harness
from tests.core.test_handoff import groups_on

PLANNED = Routing(2, previous=1, version=1)  # a 1 -> 2 grow: partition 0 is the source
SWITCHED = PLANNED.with_switched(0)
MERGE = Routing(1, previous=2, version=1)  # a 2 -> 1 shrink: partition 0 takes 1's groups
EMPTY = encode_payload([])
# A switch record smuggled into an admit would hand the target's own groups away.
SMUGGLED = encode_payload([Record(ROUTING_KEY, ServiceStateValue(MERGE.with_switched(0).encode()))])


def test_a_session_copies_while_serving_and_records_the_switch_only_once_written(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            leader = await cluster.start()
            move, stay = groups_on(1, 2, 1)[0], groups_on(0, 2, 1)[0]
            answers = Answers()
            for group in (move, stay):
                await answers.wait(answers.send(leader, commit(group, 5)))
            assert await leader.set_routing(PLANNED.encode()) == 1
            assert (await leader.precopy_begin(SWITCHED.encode(), 1))["groups"] == 1
            assert (await leader.precopy_round(1))["groups"] == 1
            page = await leader.precopy_export(1, 0)
            assert page["error"] == "NONE" and set(page["exported"]) == {1} and page["next_page"] == -1
            assert (await leader.precopy_confirm(1, 0))["groups"] == 1
            served = await answers.wait(answers.send(leader, commit(move, 6)))
            assert served.errors()[("t", 0)] is Errors.NONE, "served while copied"
            refused = await leader.precopy_switch(SWITCHED.encode(), 1)
            assert refused["error"] == "REBALANCE_IN_PROGRESS", "written since its copy, not frozen"
            assert (await leader.precopy_round(1, True))["groups"] == 1, "the freeze: the delta"
            frozen = await answers.wait(answers.send(leader, commit(move, 7)))
            assert frozen.errors()[("t", 0)] is Errors.NOT_COORDINATOR
            assert (await leader.precopy_export(1, 0))["groups"] == 1
            await leader.precopy_confirm(1, 0)
            recorded = read_replica_state(cluster.directory("a"))
            assert recorded is not None and recorded.routing == PLANNED.encode().decode("ascii")
            switched = await leader.precopy_switch(SWITCHED.encode(), 1)
            assert switched == {"error": "NONE", "detail": "", "groups": 1}
            recorded = read_replica_state(cluster.directory("a"))
            assert recorded is not None and recorded.routing == SWITCHED.encode().decode("ascii")
            again = await leader.precopy_begin(SWITCHED.encode(), 2)
            assert again["detail"] == "switched", "a resumed driver learns it switched"
            answers.all_once()
        finally:
            await cluster.close()

    run(scenario())


def moved_here() -> tuple[str, bytes]:
    """A group of partition 1 (of 2) and its records, as a source exports them."""
    h = Harness()
    group = groups_on(1, 2, 1)[0]
    h.commit(group, {("t", 0): 3})
    return group, encode_payload(group_records(h.shard, group))


def test_a_target_admits_only_the_fenced_session_as_a_copy(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            leader = await cluster.start()
            group, payload = moved_here()
            await leader.set_routing(MERGE.encode())
            stale = await leader.precopy_admit(MERGE.encode(), 1, 1, payload, [])
            assert stale["error"] == "FENCED_LEADER_EPOCH", "no fence yet"
            assert (await leader.handoff_fence(MERGE.encode(), 1, 1))["error"] == "NONE"
            admitted = await leader.precopy_admit(MERGE.encode(), 1, 1, payload, [])
            assert admitted["error"] == "NONE" and admitted["groups"] == 1
            shard = leader.runtime.shard
            assert shard.copies == {group}, "not owned before its source switches"
            refused = await leader.handoff_fence(MERGE.encode(), 1, 1)
            assert refused["error"] == "FENCED_LEADER_EPOCH" and refused["session"] == 1
            gone = await leader.precopy_admit(MERGE.encode(), 1, 1, EMPTY, [group])
            assert gone["error"] == "NONE" and group not in shard.groups
        finally:
            await cluster.close()

    run(scenario())


BAD_CALLS: list[tuple[str, tuple[Any, ...]]] = [
    ("precopy_begin", (b"not a routing", 1)),
    ("precopy_begin", (SWITCHED.encode(), 0)),
    ("precopy_begin", (SWITCHED.encode(), True)),
    ("precopy_round", ("1",)),
    ("precopy_round", (1, "yes")),
    ("precopy_export", (1, -1)),
    ("precopy_export", (1, 1.5)),
    ("precopy_confirm", (None, 0)),
    ("precopy_switch", (SWITCHED.encode(), -3)),
    ("handoff_fence", (MERGE.encode(), -1, 1)),
    ("handoff_fence", (MERGE.encode(), 1, 0)),
    ("precopy_admit", (MERGE.encode(), 1, 1, b"\xc1 not records", [])),
    ("precopy_admit", (MERGE.encode(), 1, 1, "text", [])),
    ("precopy_admit", (MERGE.encode(), 1, 1, EMPTY, "g")),
    ("precopy_admit", (MERGE.encode(), 1, 1, EMPTY, [""])),
    ("precopy_admit", (MERGE.encode(), 1, 1, EMPTY, [7])),
    ("precopy_admit", (MERGE.encode(), 1, 1, SMUGGLED, [])),
    ("handoff_admit", (1, SMUGGLED)),
]


def test_bad_arguments_are_refused_with_a_value_error_and_change_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            leader = await cluster.start()
            end = leader.runtime.written_end
            for method, args in BAD_CALLS:
                with pytest.raises(ValueError):
                    await getattr(leader, method)(*args)
            assert leader.runtime.written_end == end and leader.runtime.shard.copying is None
        finally:
            await cluster.close()

    run(scenario())
