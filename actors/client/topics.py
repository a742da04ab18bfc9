"""The topic registry's callers: the client functions, and the service's start and stop of it.

The registry itself, and where its state lives, is
`actors/client/topic_registry.py`. Clients find it through their controller
handle, in whatever namespace that controller lives (`registry_for`), and
retry a call with backoff for up to 30 s while Ray restarts the registry, as
group requests ride over a failover (actors/client/retry.py); then
CoordinatorUnavailableError. A refusal is `TopicError` with Kafka's code.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import ray

from actors.client.retry import Backoff, Retry, call_with_retry, call_with_retry_async
from actors.client.topic_registry import TopicRegistry, valid_topic_name
from actors.core.settings import CONTROLLER_NAME, DEFAULT_NAMESPACE, TOPIC_REGISTRY_NAME, ServiceSettings
from actors.core.singleton import detached_singleton
from coordinator.errors import Errors
from coordinator.topic_partition import TopicPartition

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
    if not valid_topic_name(name):
        raise ValueError(f"invalid topic name {name!r}: 1-249 characters of [a-zA-Z0-9._-], not . or ..")


# ------------------------------------------------------------ service side


def ensure_topic_registry(settings: ServiceSettings) -> Any:
    """Create the registry of the service in `settings.namespace`, or get the running one."""
    handle = detached_singleton(TopicRegistry, TOPIC_REGISTRY_NAME, settings)
    # Created before the service answers; it reads its state from partition 0 at its first
    # call, so a partition 0 still loading (or HELD after a full restart) delays topic
    # calls only, never the service's start.
    ray.get(handle.node_id.remote())
    return handle


def stop_topic_registry(namespace: str = DEFAULT_NAMESPACE) -> None:
    """Remove the registry actor (its state stays in partition 0's log); a no-op when it is not running."""
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


def _call(controller: Any, method: str, *args: Any, credential: str | None = None) -> Any:
    """One registry call, retried with backoff while Ray restarts the registry; `credential`
    (an administrative method's, actors/client/admin_guard.py) is sent when given."""
    kwargs = {} if credential is None else {"credential": credential}

    def attempt(timeout_s: float) -> Any:
        registry = registry_for(controller)
        with _forget_if_dead(controller, registry):
            return ray.get(getattr(registry, method).remote(*args, **kwargs), timeout=timeout_s)

    return call_with_retry(attempt, _retry(method))


async def _call_async(controller: Any, method: str, *args: Any) -> Any:
    async def attempt() -> Any:
        registry = _registries.get(controller) or await asyncio.to_thread(registry_for, controller)
        with _forget_if_dead(controller, registry):
            return await getattr(registry, method).remote(*args)

    return await call_with_retry_async(attempt, _retry(method))


@contextmanager
def _forget_if_dead(controller: Any, registry: Any) -> Iterator[None]:
    """A registry that died for good (removed and started anew: a new actor) is looked up
    again at the next attempt; one Ray restarts keeps its handle."""
    try:
        yield
    except ray.exceptions.ActorDiedError:
        if _registries.get(controller) is registry:
            del _registries[controller]
        raise


def _check(error: Errors, topic: str, detail: str = "") -> None:
    if error is not Errors.NONE:
        raise TopicError(error, topic, detail)


def create_topic(controller: Any, name: str, partitions: int, credential: str | None = None) -> None:
    check_topic_name(name)
    _check(_call(controller, "create_topic", name, partitions, credential=credential), name)


def create_partitions(controller: Any, name: str, total: int, credential: str | None = None) -> None:
    _check(_call(controller, "create_partitions", name, total, credential=credential), name)


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
    controller: Any, offsets: Mapping[tuple[str, int], int], at_ms: int | None = None,
    credential: str | None = None,
) -> None:
    """Report end offsets; TopicError UNKNOWN_TOPIC_OR_PARTITION or INVALID_REQUEST (with why)."""
    plain = {(t, p): o for (t, p), o in offsets.items()}
    _check(*_call(controller, "set_end_offsets", plain, at_ms, credential=credential))


def set_start_offsets(
    controller: Any, offsets: Mapping[tuple[str, int], int], credential: str | None = None
) -> None:
    """Report log start offsets (Kafka's earliest), each at most the partition's end."""
    plain = {(t, p): o for (t, p), o in offsets.items()}
    _check(*_call(controller, "set_start_offsets", plain, credential=credential))


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
