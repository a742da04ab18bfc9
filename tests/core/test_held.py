"""Held responses (coordinator/held.py): reads that wait for their records' commit and then
for a confirmed push are released once both happened, however many share a barrier and a
fence (bench.scale's split met two that did: the heap compared them and the leader's push
task failed)."""

from __future__ import annotations

from coordinator.held import HeldResponses


def test_reads_of_one_barrier_and_one_fence_wait_for_both_then_go_together() -> None:
    held = HeldResponses()
    for token in ("a", "b", "c"):
        held.hold_read(5, 3, token, token.upper(), 0, committed=0)
    assert held.on_committed(5, confirmed=2) == [], "committed, not yet confirmed past their fence"
    assert held.on_confirmed(3) == []
    assert sorted(h.token for h in held.on_confirmed(4)) == ["a", "b", "c"]
    assert held.on_confirmed(None) == [] and held.oldest_ms is None


def test_a_committed_read_waiting_on_the_same_fence_as_a_moved_one_goes_with_it() -> None:
    held = HeldResponses()
    held.hold_read(5, 3, "waits", 1, 0, committed=0)
    held.hold_read(2, 3, "committed", 2, 0, committed=4)  # straight to the fence heap
    assert held.on_committed(5, confirmed=0) == []
    assert {h.token for h in held.on_confirmed(4)} == {"waits", "committed"}
