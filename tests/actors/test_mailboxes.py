"""The leader's mailboxes of parked answers (actors/partition/batches.py), pure, with
an injected clock and TTL: a mailbox dropped with answers outstanding is never a
silent loss (every collect names the floor below which the caller's mailboxes
are gone, at once when the one it waits on is), and an answer for a dropped
mailbox is discarded, never written into it nor into its successor."""

from __future__ import annotations

import asyncio

import pytest

from actors.core.settings import ServiceSettings
from actors.partition.batches import Mailbox, Mailboxes

from tests.actors.support import run

TTL_S = 10.0
CALLER = 7


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def reopened_after_the_ttl() -> tuple[Mailboxes, Mailbox, Mailbox]:
    """The caller's mailbox, dropped while it was paused, and the one its next batch opened."""
    clock = Clock()
    boxes = Mailboxes(clock, ttl_s=TTL_S)
    old = boxes.open(CALLER, parked=1)
    clock.now += TTL_S + 1
    return boxes, old, boxes.open(CALLER, parked=1)


def test_a_mailbox_with_answers_outstanding_goes_after_the_ttl_and_its_caller_learns_it() -> None:
    async def scenario() -> None:
        clock = Clock()
        boxes = Mailboxes(clock, ttl_s=TTL_S)
        box = boxes.open(CALLER, parked=2)
        box.put(0, 0, "first")
        assert await boxes.collect(CALLER, box.generation) == (box.generation, [(0, 0, "first")])
        clock.now += TTL_S + 1  # the caller is paused, one answer still outstanding
        floor, answers = await boxes.collect(CALLER, box.generation)
        assert floor > box.generation and answers == []
        assert len(boxes) == 0

    run(scenario())


def test_a_new_batch_before_the_collect_opens_a_new_generation_and_the_collect_returns_at_once() -> None:
    """The issue's case: the paused caller's next batch comes before its collect. The
    collect names the old generation it waits on: it is answered at once with the new
    mailbox's generation as the floor, and the new mailbox's answers are not lost."""
    async def scenario() -> None:
        boxes, old, new = reopened_after_the_ttl()
        assert new is not old and new.generation > old.generation
        # Returns at once although the new mailbox has no answer yet.
        assert await asyncio.wait_for(boxes.collect(CALLER, old.generation), 1) == (new.generation, [])
        new.put(1, 0, "second")
        assert await boxes.collect(CALLER, new.generation) == (new.generation, [(1, 0, "second")])
        assert len(boxes) == 0, "collected empty: it goes"

    run(scenario())


def test_an_answer_for_a_dropped_mailbox_is_discarded() -> None:
    async def scenario() -> None:
        boxes, old, new = reopened_after_the_ttl()
        old.put(0, 0, "late")  # the forwarder of the old batch
        assert old.answers == [] and new.answers == []
        waiting = asyncio.ensure_future(boxes.collect(CALLER, new.generation))
        await asyncio.sleep(0)
        assert not waiting.done(), "the late answer woke the new mailbox"
        new.put(1, 0, "mine")
        assert await waiting == (new.generation, [(1, 0, "mine")])

    run(scenario())


def test_a_caller_with_a_collect_waiting_is_not_silent() -> None:
    async def scenario() -> None:
        clock = Clock()
        boxes = Mailboxes(clock, ttl_s=TTL_S)
        box = boxes.open(CALLER, parked=1)
        waiting = asyncio.ensure_future(boxes.collect(CALLER, box.generation))
        await asyncio.sleep(0)
        clock.now += 3 * TTL_S
        boxes.open(CALLER + 1, parked=1)  # a sweep
        box.put(0, 0, "answer")
        assert await waiting == (box.generation, [(0, 0, "answer")])

    run(scenario())


def test_a_caller_without_a_mailbox_gets_a_floor_above_every_generation_issued() -> None:
    async def scenario() -> None:
        boxes = Mailboxes(Clock(), ttl_s=TTL_S)
        other = boxes.open(CALLER + 1, parked=1)
        floor, answers = await boxes.collect(CALLER, 0)
        assert floor > other.generation and answers == []

    run(scenario())


def test_the_ttl_setting_is_a_positive_number() -> None:
    assert ServiceSettings(data_dir="/data", mailbox_ttl_s=0.5).mailbox_ttl_s == 0.5
    for wrong in (0, -1.0, "60", True, None):
        with pytest.raises(ValueError, match="mailbox_ttl_s"):
            ServiceSettings(data_dir="/data", mailbox_ttl_s=wrong)  # type: ignore[arg-type]
