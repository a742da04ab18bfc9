"""The topic registry: topic partition counts, start and end offsets, for assignors, lag and resets.

Kafka's group leader reads partition counts from the cluster metadata; here
`TopicRegistry`, a small named detached actor in the service's namespace,
holds them, plus per topic partition the end offset and the log start
offset that producers or adapters report (raygroups holds no topic data).
It persists them in `<data_dir>/topics.json`, written atomically
(temporary file, fsync, rename, directory fsync), keeps every end offset it
is told in a bounded history (`actors/client/end_history.py`, its own append-only
file) for lag over time and time-based resets, and reloads both when Ray
restarts it.

Rules, as Kafka's admin API:
- `create_topic` answers TOPIC_ALREADY_EXISTS for a known name and
  INVALID_PARTITIONS for fewer than one partition; `create_partitions` only
  grows a topic (INVALID_PARTITIONS otherwise), UNKNOWN_TOPIC_OR_PARTITION for
  an unknown one. Names follow Kafka's rule: 1-249 of `[a-zA-Z0-9._-]`, not
  "." or "..".
- `describe` returns only the topics that exist; a consumer treats a missing
  topic as one without partitions, as Kafka's leader does.
- End and start offsets are set for existing partitions only, all or
  nothing, and refused with INVALID_REQUEST (naming the partition and why)
  for a non-int or negative offset, an end offset below the recorded one or
  a sample time before the last (see end_history), or a start offset above
  the partition's end. A partition never set has end offset 0 (an empty
  partition) and start offset 0: Kafka's earliest offset is the log start
  offset, and without a report the whole log is taken to be there.
- `set_end_offsets` records a sample at the registry's wall clock, or at the
  `at_ms` a reporter gives (a producer's time); a wall clock that stepped
  back records at the last sample's time, so history stays in order.
- Every topic has a topic id (Kafka's Uuid): random, unique, never the zero
  or the metadata topic's id, given at creation and kept in topics.json with
  the topic; a registry written before ids existed gives each topic one once,
  at its first load, and keeps it: the name-based id the core assumed for
  a topic without one (`coordinator.consumer.subscriptions.topic_id_for`), so
  consumer groups written before keep their assignments. `topic_ids()` maps names to ids (the
  gateway's Metadata by id, KIP-848 assignments by id).
- Partition leaders read the topics with `topics_if_changed(token)`
  (actors/partition/topics_watch.py): the token names this incarnation of the
  registry and its change count, so an unchanged registry answers None and a
  restarted one the whole view. After a change the registry nudges every
  leader (`topics_changed`, from a thread, through the controller's routing)
  to read at once; a nudge that fails is only late: leaders also read every
  `topics_refresh_interval_s`.
- Clients find the registry through their controller handle, in whatever
  namespace that controller lives (`registry_for`), and retry a call with
  backoff for up to 30 s while Ray restarts the registry, as group requests
  ride over a failover (actors/client/retry.py); then CoordinatorUnavailableError.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import ray

from actors.client.end_history import EndOffsetHistory, HistoryLimits, Sample
from actors.client.retry import Backoff, Retry, call_with_retry, call_with_retry_async
from actors.core.settings import (
    CONTROLLER_NAME,
    DEFAULT_NAMESPACE,
    TOPIC_REGISTRY_NAME,
    ServiceSettings,
    SystemClock,
)
from actors.core.singleton import detached_singleton
from coordinator.consumer.subscriptions import topic_id_for
from coordinator.errors import Errors
from coordinator.topic_partition import TopicPartition
from log.fsutil import atomic_write_json

logger = logging.getLogger(__name__)
NUDGE_TIMEOUT_S = 10.0
TOPICS_FILE = "topics.json"
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
BACKOFF = Backoff()
CALL_TIMEOUT_S = 30.0


class TopicError(RuntimeError):
    """A topic request the registry refused; `error` is Kafka's code."""

    def __init__(self, error: Errors, topic: str, detail: str = "") -> None:
        super().__init__(f"{error.name} for topic {topic!r}" + (f": {detail}" if detail else ""))
        self.error = error
        self.topic = topic
        self.detail = detail


def check_topic_name(name: str) -> None:
    if not isinstance(name, str) or not TOPIC_NAME.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"invalid topic name {name!r}: 1-249 characters of [a-zA-Z0-9._-], not . or ..")


# Kafka's Uuid.ZERO_UUID and Uuid.METADATA_TOPIC_ID: never a topic's id.
RESERVED_TOPIC_IDS = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})


def new_topic_id(taken: Iterable[uuid.UUID] = ()) -> uuid.UUID:
    """A random topic id, neither reserved nor in `taken` (Kafka's Uuid.randomUuid)."""
    used = set(taken)
    while True:
        topic_id = uuid.uuid4()
        if topic_id not in RESERVED_TOPIC_IDS and topic_id not in used:
            return topic_id


TopicsView = tuple[str, dict[str, int], dict[str, uuid.UUID]]  # token, partition counts, ids


class TopicRegistry:
    """The actor. A sync actor with one thread: requests apply one at a time."""

    def __init__(
        self, settings: ServiceSettings, clock: Any = None, limits: HistoryLimits | None = None
    ) -> None:
        os.makedirs(settings.data_dir, exist_ok=True)
        self.namespace = settings.namespace
        # One nudging thread at a time; changes meanwhile make it nudge once more.
        self._nudge_lock = threading.Lock()
        self._nudging = self._nudge_again = False
        self.clock = clock or SystemClock()
        self.path = os.path.join(settings.data_dir, TOPICS_FILE)
        self.partitions: dict[str, int] = {}
        self.end: dict[str, dict[int, int]] = {}
        self.start: dict[str, dict[int, int]] = {}
        self.ids: dict[str, uuid.UUID] = {}
        # Names this incarnation and counts its changes: see topics_if_changed.
        self._incarnation = uuid.uuid4().hex
        self._changes = 0
        missing_ids = False
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            for name, topic in data["topics"].items():
                self.partitions[name] = topic["partitions"]
                if "id" in topic:
                    self.ids[name] = uuid.UUID(topic["id"])
                else:
                    missing_ids = True
                self.end[name] = {int(p): o for p, o in topic["end_offsets"].items()}
                self.start[name] = {int(p): o for p, o in topic.get("start_offsets", {}).items()}
        self.history = EndOffsetHistory(settings.data_dir, limits)
        self.history.load(self.clock.now_ms())
        # The history is appended before topics.json is replaced: after a crash
        # between the two, its newer sample wins (end offsets only grow).
        for (topic, partition), kept in self.history.samples.items():
            if topic in self.end and kept:
                self.end[topic][partition] = max(self.end[topic].get(partition, 0), kept[-1][1])
        if missing_ids:  # a registry from before topic ids: each topic gets one, once
            for name in sorted(self.partitions):
                if name not in self.ids:
                    self.ids[name] = topic_id_for(name)
            self._persist()

    def _persist(self) -> None:
        topics = {
            name: {
                "partitions": count,
                "id": str(self.ids[name]),
                "end_offsets": {str(p): o for p, o in self.end[name].items()},
                "start_offsets": {str(p): o for p, o in self.start[name].items()},
            }
            for name, count in self.partitions.items()
        }
        atomic_write_json(self.path, {"version": 1, "topics": topics})

    def create_topic(self, name: str, partitions: int) -> Errors:
        if name in self.partitions:
            return Errors.TOPIC_ALREADY_EXISTS
        if partitions < 1:
            return Errors.INVALID_PARTITIONS
        self.partitions[name], self.end[name], self.start[name] = partitions, {}, {}
        self.ids[name] = new_topic_id(self.ids.values())
        self._persist()
        self._changed()
        return Errors.NONE

    def create_partitions(self, name: str, total: int) -> Errors:
        """Kafka's CreatePartitions: grow `name` to `total` partitions."""
        if name not in self.partitions:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        if total <= self.partitions[name]:
            return Errors.INVALID_PARTITIONS
        self.partitions[name] = total
        self._persist()
        self._changed()
        return Errors.NONE

    def _changed(self) -> None:
        self._changes += 1
        with self._nudge_lock:
            if self._nudging:
                self._nudge_again = True
                return
            self._nudging = True
        threading.Thread(target=self._nudge, daemon=True).start()

    def _nudge(self) -> None:
        while True:
            nudge_leaders(self.namespace)
            with self._nudge_lock:
                if not self._nudge_again:
                    self._nudging = False
                    return
                self._nudge_again = False

    def describe(self, names: list[str] | None) -> dict[str, int]:
        if names is None:
            return dict(self.partitions)
        return {n: self.partitions[n] for n in names if n in self.partitions}

    def topic_ids(self, names: list[str] | None) -> dict[str, uuid.UUID]:
        """Topic id per existing topic (of `names`, or every topic)."""
        if names is None:
            return dict(self.ids)
        return {n: self.ids[n] for n in names if n in self.ids}

    def topics_if_changed(self, token: str | None) -> TopicsView | None:
        """None when `token` is the current one; else (token, counts, ids) of every topic."""
        current = f"{self._incarnation}:{self._changes}"
        if token == current:
            return None
        return current, dict(self.partitions), dict(self.ids)

    def set_end_offsets(self, offsets: dict[tuple[str, int], int], at_ms: int | None = None) -> Refusal:
        """Record end offsets (all or nothing) as one sample each, at `at_ms` or now."""
        refused = self._refuse_offsets(offsets)
        if refused is None and at_ms is not None and not (_is_int(at_ms) and at_ms >= 0):
            refused = Errors.INVALID_REQUEST, "", f"at_ms must be an int >= 0 or None, got {at_ms!r}"
        if refused is not None:
            return refused
        samples = [(t, p, self._sample_time(t, p, at_ms), o) for (t, p), o in offsets.items()]
        for topic, partition, at, offset in samples:
            why = self.history.check(topic, partition, at, offset)
            if why:
                return Errors.INVALID_REQUEST, f"{topic}-{partition}", why
        self.history.record(samples, self.clock.now_ms())
        for topic, partition, _, offset in samples:
            self.end[topic][partition] = offset
        self._persist()
        return OK

    def _sample_time(self, topic: str, partition: int, at_ms: int | None) -> int:
        if at_ms is not None:
            return at_ms
        last = self.history.latest(topic, partition)
        return max(self.clock.now_ms(), last[0] if last else 0)

    def set_start_offsets(self, offsets: dict[tuple[str, int], int]) -> Refusal:
        """Record log start offsets (all or nothing): what --to-earliest resets to."""
        refused = self._refuse_offsets(offsets)
        if refused is not None:
            return refused
        for (topic, partition), offset in offsets.items():
            end = self.end[topic].get(partition, 0)
            if offset > end:
                why = f"start offset {offset} is above the end offset {end}"
                return Errors.INVALID_REQUEST, f"{topic}-{partition}", why
        for (topic, partition), offset in offsets.items():
            self.start[topic][partition] = offset
        self._persist()
        return OK

    def _refuse_offsets(self, offsets: Any) -> Refusal | None:
        """Why `offsets` is no {(topic, partition): offset >= 0} of existing partitions."""
        if not isinstance(offsets, dict):
            return Errors.INVALID_REQUEST, "", "offsets must be a dict {(topic, partition): offset}"
        for key, offset in offsets.items():
            if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str) and _is_int(key[1])):
                return Errors.INVALID_REQUEST, str(key), "keys must be (topic, partition)"
            topic, partition = key
            if not 0 <= partition < self.partitions.get(topic, 0):
                return Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}", ""
            if not _is_int(offset) or offset < 0:
                why = f"offset must be an int >= 0, got {offset!r}"
                return Errors.INVALID_REQUEST, f"{topic}-{partition}", why
        return None

    def end_offsets(self, topics: list[str] | None) -> dict[tuple[str, int], int]:
        return {tp: self.end[tp[0]].get(tp[1], 0) for tp in self._partitions_of(topics)}

    def start_offsets(self, topics: list[str] | None) -> dict[tuple[str, int], int]:
        return {tp: self.start[tp[0]].get(tp[1], 0) for tp in self._partitions_of(topics)}

    def _partitions_of(self, topics: list[str] | None) -> list[tuple[str, int]]:
        names = self.partitions if topics is None else [t for t in topics if t in self.partitions]
        return [(t, p) for t in names for p in range(self.partitions[t])]

    def end_offset_history(self, topics: list[str] | None, since_ms: int | None) -> list[Sample]:
        """Rows (topic, partition, at_ms, end_offset) sorted by topic, partition,
        at_ms; see EndOffsetHistory.rows for `since_ms`."""
        return self.history.rows(topics, since_ms)


Refusal = tuple[Errors, str, str]  # error, where ("topic-partition"), why
OK: Refusal = (Errors.NONE, "", "")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def nudge_leaders(namespace: str) -> None:
    """Tell every partition leader of the service that the topics changed (best effort)."""
    if not ray.is_initialized():  # the registry class used without Ray (tests)
        return
    try:
        controller = ray.get_actor(CONTROLLER_NAME, namespace=namespace)
        routing: Any = ray.get(controller.routing.remote(), timeout=NUDGE_TIMEOUT_S)
        _, leaders, _ = routing
        for leader in leaders:
            if leader is not None:
                leader.topics_changed.remote()
    except Exception as exc:  # the leaders' own reads catch up
        logger.info("topic change not pushed to the partition leaders: %r", exc)


# ------------------------------------------------------------ service side


def ensure_topic_registry(settings: ServiceSettings) -> Any:
    """Create the registry of the service in `settings.namespace`, or get the running one."""
    handle = detached_singleton(TopicRegistry, TOPIC_REGISTRY_NAME, settings)
    ray.get(handle.describe.remote([]))  # created and loaded before the service answers
    return handle


def stop_topic_registry(namespace: str = DEFAULT_NAMESPACE) -> None:
    """Remove the registry actor (topics.json stays); a no-op when it is not running."""
    try:
        handle = ray.get_actor(TOPIC_REGISTRY_NAME, namespace=namespace)
    except ValueError:
        return
    ray.kill(handle, no_restart=True)
    for _ in range(500):  # the name frees once the actor is gone
        try:
            ray.get_actor(TOPIC_REGISTRY_NAME, namespace=namespace)
        except ValueError:
            return
        time.sleep(0.01)


# ------------------------------------------------------------- client side

_registries: dict[Any, Any] = {}  # controller handle -> registry handle


def registry_for(controller: Any) -> Any:
    """The registry next to `controller`, looked up once per controller."""
    handle = _registries.get(controller)
    if handle is None:
        namespace = _namespace_of(controller)
        try:
            handle = ray.get_actor(TOPIC_REGISTRY_NAME, namespace=namespace)
        except ValueError:
            raise RuntimeError(
                f"no topic registry in namespace {namespace!r}: start the service with actors.start()"
            ) from None
        _registries[controller] = handle
    return handle


def _namespace_of(controller: Any) -> str:
    """The namespace holding `controller`: a client's own namespace may differ."""
    current = str(ray.get_runtime_context().namespace)
    named = ray.util.list_named_actors(all_namespaces=True)
    others = sorted({a["namespace"] for a in named if a["name"] == CONTROLLER_NAME} - {current})
    for namespace in [current, *others]:
        try:
            if ray.get_actor(CONTROLLER_NAME, namespace=namespace) == controller:
                return str(namespace)
        except ValueError:
            continue
    return current


def _retry(method: str) -> Retry:
    return Retry(CALL_TIMEOUT_S, BACKOFF, f"topic registry {method}")


def _call(controller: Any, method: str, *args: Any) -> Any:
    """One registry call, retried with backoff while Ray restarts the registry."""

    def attempt(timeout_s: float) -> Any:
        return ray.get(getattr(registry_for(controller), method).remote(*args), timeout=timeout_s)

    return call_with_retry(attempt, _retry(method))


async def _call_async(controller: Any, method: str, *args: Any) -> Any:
    async def attempt() -> Any:
        registry = _registries.get(controller) or await asyncio.to_thread(registry_for, controller)
        return await getattr(registry, method).remote(*args)

    return await call_with_retry_async(attempt, _retry(method))


def _check(error: Errors, topic: str, detail: str = "") -> None:
    if error is not Errors.NONE:
        raise TopicError(error, topic, detail)


def create_topic(controller: Any, name: str, partitions: int) -> None:
    check_topic_name(name)
    _check(_call(controller, "create_topic", name, partitions), name)


def create_partitions(controller: Any, name: str, total: int) -> None:
    _check(_call(controller, "create_partitions", name, total), name)


def _names(names: Iterable[str] | None) -> list[str] | None:
    return None if names is None else list(names)


def describe_topics(controller: Any, names: Iterable[str] | None = None) -> dict[str, int]:
    return _call(controller, "describe", _names(names))  # type: ignore[no-any-return]


async def describe_topics_async(controller: Any, names: Iterable[str] | None = None) -> dict[str, int]:
    return await _call_async(controller, "describe", _names(names))  # type: ignore[no-any-return]


def topic_ids(controller: Any, names: Iterable[str] | None = None) -> dict[str, uuid.UUID]:
    return _call(controller, "topic_ids", _names(names))  # type: ignore[no-any-return]


async def topic_ids_async(controller: Any, names: Iterable[str] | None = None) -> dict[str, uuid.UUID]:
    return await _call_async(controller, "topic_ids", _names(names))  # type: ignore[no-any-return]


def set_end_offsets(
    controller: Any, offsets: Mapping[tuple[str, int], int], at_ms: int | None = None
) -> None:
    """Report end offsets; TopicError UNKNOWN_TOPIC_OR_PARTITION or INVALID_REQUEST (with why)."""
    plain = {(t, p): o for (t, p), o in offsets.items()}
    _check(*_call(controller, "set_end_offsets", plain, at_ms))


def set_start_offsets(controller: Any, offsets: Mapping[tuple[str, int], int]) -> None:
    """Report log start offsets (Kafka's earliest), each at most the partition's end."""
    plain = {(t, p): o for (t, p), o in offsets.items()}
    _check(*_call(controller, "set_start_offsets", plain))


def end_offsets(controller: Any, topics: Iterable[str] | None = None) -> dict[TopicPartition, int]:
    raw = _call(controller, "end_offsets", _names(topics))
    return {TopicPartition(t, p): o for (t, p), o in raw.items()}


def start_offsets(controller: Any, topics: Iterable[str] | None = None) -> dict[TopicPartition, int]:
    raw = _call(controller, "start_offsets", _names(topics))
    return {TopicPartition(t, p): o for (t, p), o in raw.items()}


# The async reads, for asyncio callers (the Kafka gateway): plain (topic, partition) keys.
async def end_offsets_async(
    controller: Any, topics: Iterable[str] | None = None
) -> dict[tuple[str, int], int]:
    return await _call_async(controller, "end_offsets", _names(topics))  # type: ignore[no-any-return]


async def start_offsets_async(
    controller: Any, topics: Iterable[str] | None = None
) -> dict[tuple[str, int], int]:
    return await _call_async(controller, "start_offsets", _names(topics))  # type: ignore[no-any-return]


async def end_offset_history_async(
    controller: Any, names: Iterable[str] | None = None, since_ms: int | None = None
) -> list[tuple[str, int, int, int]]:
    rows = await _call_async(controller, "end_offset_history", _names(names), since_ms)
    return [(t, p, at, end) for t, p, at, end in rows]


def end_offset_history(
    controller: Any, names: Iterable[str] | None = None, since_ms: int | None = None
) -> list[tuple[str, int, int, int]]:
    """(topic, partition, at_ms, end_offset) rows sorted by topic, partition, at_ms;
    with `since_ms`, each partition's rows from the one in effect at `since_ms`."""
    rows = _call(controller, "end_offset_history", _names(names), since_ms)
    return [(t, p, at, end) for t, p, at, end in rows]
