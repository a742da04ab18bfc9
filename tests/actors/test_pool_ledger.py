"""A pool member's record (actors/pool/ledger.py) outlives its process: what a restarted
member reads back is what the dead one wrote (activated or not, errors, commits), the
commits written at most once an interval and all of them when the member flushes."""

from __future__ import annotations

import pytest

from actors.pool import ledger as ledger_module
from actors.pool.ledger import KV, Ledger, memory_kv


def test_a_restarted_standby_stays_out_until_activated_and_an_activated_one_joins() -> None:
    kv = memory_kv()
    first = Ledger("g-1", kv).load()
    first.start_incarnation(active=False)  # a standby
    again = Ledger("g-1", kv).load()
    again.start_incarnation(active=False)  # Ray restarts it with its first arguments
    assert not again.active and again.incarnation == 2
    again.activate()
    third = Ledger("g-1", kv).load()
    third.start_incarnation(active=False)
    assert third.active and third.incarnation == 3
    assert not Ledger("g-2", kv).load().active  # another member's record is its own


def test_errors_and_commits_survive_a_restart_and_are_dropped_with_the_member() -> None:
    kv = memory_kv()
    member = Ledger("g-1", kv).load()
    member.start_incarnation(active=True)
    for i in range(25):
        member.add_error({"at": float(i), "error": f"e{i}"})
    commits = [("t", i % 3, i, i + 1) for i in range(1_300)]  # three chunks of 512
    for commit in commits:
        member.add_commit(commit)
    member.flush()  # the member left the group, or stopped
    back = Ledger("g-1", kv).load()
    assert back.commits == commits
    assert back.error_count == 25 and [e["error"] for e in back.errors] == [f"e{i}" for i in range(5, 25)]
    ledger_module.drop("g-1", kv)
    gone = Ledger("g-1", kv).load()
    assert gone.commits == [] and gone.error_count == 0 and not gone.active


def test_the_oldest_chunks_go_past_the_cap_and_the_rest_reloads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_module, "MAX_COMMITS_KEPT", 1_000)
    kv = memory_kv()
    member = Ledger("g-1", kv).load()
    commits = [("t", 0, i, i + 1) for i in range(2_000)]
    for commit in commits:
        member.add_commit(commit)
    member.flush()
    assert 1_000 <= len(member.commits) <= 1_000 + ledger_module.CHUNK
    assert member.commits == commits[-len(member.commits):]
    back = Ledger("g-1", kv).load()
    assert back.commits == member.commits and back.first_chunk == member.first_chunk > 0
    back.add_commit(("t", 0, 2_000, 2_001))  # goes on where the dead process stopped (written: its first)
    assert Ledger("g-1", kv).load().commits == [*member.commits, ("t", 0, 2_000, 2_001)]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def counting(kv: KV) -> tuple[KV, list[str]]:
    puts: list[str] = []

    def put(key: str, value: bytes) -> None:
        puts.append(key)
        kv.put(key, value)

    return KV(put, kv.get, kv.keys, kv.drop), puts


def test_commits_are_written_at_most_once_an_interval_and_a_dead_process_loses_only_its_last() -> None:
    kv, puts = counting(memory_kv())
    clock = Clock()
    member = Ledger("g-1", kv, flush_interval_s=0.1, clock=clock).load()
    commits = [("t", 0, i, i + 1) for i in range(600)]  # across a chunk's end
    member.add_commit(commits[0])
    assert len(puts) == 1, "the first at once: nothing written for an interval"
    for commit in commits[1:300]:
        member.add_commit(commit)
        member.flush_due()
    assert len(puts) == 1 and Ledger("g-1", kv).load().commits == commits[:1]
    clock.now = 0.1
    member.flush_due()
    assert len(puts) == 2 and Ledger("g-1", kv).load().commits == commits[:300]
    for commit in commits[300:]:
        member.add_commit(commit)
    assert Ledger("g-1", kv).load().commits == commits[:300], "a process dead now loses the interval's"
    clock.now = 0.25
    member.add_commit(("t", 0, 600, 601))  # an interval later: this one writes them all
    assert puts[2:] == [member._chunk_key(0), member._chunk_key(1)], "the two chunks they changed"
    assert Ledger("g-1", kv).load().commits == [*commits, ("t", 0, 600, 601)]
    member.flush()
    assert len(puts) == 4, "nothing left to write: no put"
