"""A pool member's record outside its process: activated or not, errors, commits.

Why: Ray restarts a dead `PoolMember` (max_restarts) with the arguments it was
first created with, in a new process. What the member learned since (that the
pool activated it, the function's errors, the ranges it committed) would be
gone, so a restarted standby activated since would stay out of the group the
pool counts it in (or, told to join on every restart, a restarted spare would
join a group that does not count it), and `errors()` and `commits()` would lose
what the dead process recorded. The member writes each of these here as it
happens and reads them back when it is reconstructed.

Where: Ray's GCS key-value store (namespace `raygroups`, as the controller's
metadata, actors/controller/ray_store.py), which outlives the member's process
and node. Keys under `raygroups/pool/<member name>/`: `meta` (active, error
count, the last errors, process incarnations), rewritten on each change (rare),
and the commits in chunks of `CHUNK` (`c/<index>`; past `MAX_COMMITS_KEPT`
the oldest chunk goes), a load of len/CHUNK keys. The pool drops a member's
keys once it has its final status.

Commits are written at most once per `FLUSH_INTERVAL_S` (the chunks they
changed, each rewritten whole): a member committing a small range hundreds of
times a second would otherwise put a chunk into the GCS, every member's one
store, on each commit. The member's thread calls `flush_due()` after each round
of its partitions that committed, and `flush()` after a round with nothing to
do, when it leaves the group, when it stops and before it answers `commits()`
(what it showed is recorded); the meta, what `activate()` and `add_error()`
write, goes at once (rare, and a restart's decision to join depends on it). A
commit recorded here is one the coordinator acknowledged; a process that dies
while busy loses the commits of its last interval from the record (not from
the group: the coordinator has them).
"""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CHUNK = 512
FLUSH_INTERVAL_S = 0.1  # commits written at most this often (plus a round of the member's thread)
MAX_ERRORS_KEPT = 20
MAX_COMMITS_KEPT = 100_000  # at least this many of the newest commits are kept
KV_NAMESPACE = "raygroups"
Commit = tuple[str, int, int, int]  # (topic, partition, start, end)


@dataclass
class KV:
    """The store's four calls (Ray's internal KV by default; a dict in tests)."""

    put: Callable[[str, bytes], Any]
    get: Callable[[str], bytes | None]
    keys: Callable[[str], list[str]]
    drop: Callable[[str], Any]


def ray_kv() -> KV:
    from ray.experimental.internal_kv import (
        _internal_kv_del,
        _internal_kv_get,
        _internal_kv_list,
        _internal_kv_put,
    )

    def keys(prefix: str) -> list[str]:
        return [k.decode() for k in _internal_kv_list(prefix, namespace=KV_NAMESPACE)]

    return KV(
        put=lambda k, v: _internal_kv_put(k, v, overwrite=True, namespace=KV_NAMESPACE),
        get=lambda k: _internal_kv_get(k, namespace=KV_NAMESPACE),
        keys=keys,
        drop=lambda prefix: _internal_kv_del(prefix, del_by_prefix=True, namespace=KV_NAMESPACE),
    )


def prefix_of(member_name: str) -> str:
    return f"raygroups/pool/{member_name}/"


@dataclass
class Ledger:
    """One member's record; `load()` returns it as the last process left it."""

    member_name: str
    kv: KV
    active: bool = False
    incarnation: int = 0  # processes of this member so far (1: never restarted)
    error_count: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)  # the newest, from chunk `first_chunk` on
    first_chunk: int = 0
    flush_interval_s: float = FLUSH_INTERVAL_S
    clock: Callable[[], float] = time.monotonic
    _unwritten: set[int] = field(default_factory=set, init=False)  # chunks changed since written
    _written_at: float = field(default=float("-inf"), init=False)
    # The member's thread records and flushes, `stop()` flushes from another (its thread may
    # be past the stop's timeout).
    _commits_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def prefix(self) -> str:
        return prefix_of(self.member_name)

    def load(self) -> Ledger:
        raw = self.kv.get(self.prefix + "meta")
        if raw is not None:
            meta = pickle.loads(raw)
            self.active, self.incarnation = meta["active"], meta["incarnation"]
            self.error_count, self.errors = meta["error_count"], meta["errors"]
        chunks = sorted(int(k.rsplit("/", 1)[1]) for k in self.kv.keys(self.prefix + "c/"))
        self.first_chunk = chunks[0] if chunks else 0
        self.commits = []
        for index in chunks:
            raw = self.kv.get(self._chunk_key(index))
            self.commits += pickle.loads(raw) if raw is not None else []
        return self

    def start_incarnation(self, active: bool) -> None:
        """A process of this member starts: `active` as recorded if it was ever activated."""
        self.incarnation += 1
        self.active = self.active or active
        self._save_meta()

    def activate(self) -> None:
        if not self.active:
            self.active = True
            self._save_meta()

    def add_error(self, error: dict[str, Any]) -> None:
        self.error_count += 1
        self.errors.append(error)
        del self.errors[:-MAX_ERRORS_KEPT]
        self._save_meta()

    def add_commit(self, commit: Commit) -> None:
        """Record `commit`; written now if the last write is an interval old, else by a
        later `flush_due()` or `flush()`."""
        with self._commits_lock:
            self.commits.append(commit)
            self._unwritten.add(self.first_chunk + (len(self.commits) - 1) // CHUNK)
            if len(self.commits) > MAX_COMMITS_KEPT + CHUNK:  # the oldest chunk goes
                self.kv.drop(self._chunk_key(self.first_chunk))
                self._unwritten.discard(self.first_chunk)
                del self.commits[:CHUNK]
                self.first_chunk += 1
        self.flush_due()

    def flush_due(self) -> None:
        """Write the commits not written yet if the last write is an interval old."""
        if self._unwritten and self.clock() - self._written_at >= self.flush_interval_s:
            self.flush()

    def flush(self) -> None:
        """Write every commit not written yet: each chunk they changed, whole."""
        with self._commits_lock:
            for index in sorted(self._unwritten):
                local = (index - self.first_chunk) * CHUNK
                self.kv.put(self._chunk_key(index), pickle.dumps(self.commits[local:local + CHUNK]))
            self._unwritten.clear()
            self._written_at = self.clock()

    def _chunk_key(self, index: int) -> str:
        return f"{self.prefix}c/{index:09d}"  # fixed width: a drop by prefix takes this one alone

    def _save_meta(self) -> None:
        meta = {"active": self.active, "incarnation": self.incarnation,
                "error_count": self.error_count, "errors": self.errors}
        self.kv.put(self.prefix + "meta", pickle.dumps(meta))


def drop(member_name: str, kv: KV | None = None) -> None:
    """Forget a member's record (the pool holds its final status)."""
    (kv or ray_kv()).drop(prefix_of(member_name))


def memory_kv() -> KV:
    """A KV in a dict: a member without Ray (tests), or whose record may die with it."""
    store: dict[str, bytes] = {}
    return KV(
        put=store.__setitem__,
        get=store.get,
        keys=lambda prefix: [k for k in store if k.startswith(prefix)],
        drop=lambda prefix: [store.pop(k) for k in [k for k in store if k.startswith(prefix)]],
    )
