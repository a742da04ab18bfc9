"""The settling trim of a replica's free heap (actors/core/heap.py): run once per burst of
events, later on the loop (at once without one), and never in a large process."""

from __future__ import annotations

import asyncio

import pytest

from actors.core import heap


@pytest.fixture
def trims(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(heap, "_TRIM", lambda pad: calls.append(pad) or 1)
    monkeypatch.setattr(heap, "SETTLE_S", 0.01)
    return calls


def test_a_small_process_is_trimmed_a_large_one_is_not(
    trims: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert heap.resident_bytes() is not None
    monkeypatch.setattr(heap, "TRIM_RSS_MAX_BYTES", 2**62)
    assert heap.release_free_heap() is True
    monkeypatch.setattr(heap, "TRIM_RSS_MAX_BYTES", 0)
    assert heap.release_free_heap() is False
    assert trims == [0]


def test_a_burst_of_settles_trims_once_later_on_the_loop(
    trims: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(heap, "TRIM_RSS_MAX_BYTES", 2**62)
    settler = heap.HeapSettler()

    async def burst() -> list[int]:
        for _ in range(3):
            settler.settle()
        assert trims == [], "not on the caller's turn"
        while settler._pending is not None:
            await asyncio.sleep(0.005)
        return list(trims)

    assert asyncio.run(burst()) == [0]
    settler.settle()  # no loop running: at once
    assert trims == [0, 0]

