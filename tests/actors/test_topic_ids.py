"""Topic ids of the topic registry (the actor class as plain Python over a partition-0 shard, no Ray)."""

from __future__ import annotations

import json
import os

from actors.client.topic_registry import LEGACY_TOPICS_FILE, RESERVED_TOPIC_IDS, TopicRegistry
from actors.core.settings import ServiceSettings
from coordinator.consumer.subscriptions import topic_id_for
from coordinator.errors import Errors

from tests.actors.service_store_support import ShardStore


def test_every_topic_gets_a_unique_non_zero_id_kept_across_restarts(tmp_path: os.PathLike[str]) -> None:
    settings = ServiceSettings(data_dir=str(tmp_path))
    store = ShardStore()
    first = TopicRegistry(settings, store=store)
    for name in ("a", "b", "c"):
        first.create_topic(name, 2)
    ids = first.topic_ids(None)
    assert len(set(ids.values())) == 3 and not set(ids.values()) & RESERVED_TOPIC_IDS
    first.create_partitions("a", 5)
    assert first.topic_ids(["a", "missing"]) == {"a": ids["a"]}  # growing keeps the id
    assert TopicRegistry(settings, store=store.restarted()).topic_ids(None) == ids


def test_a_registry_written_before_ids_assigns_them_once(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(str(tmp_path), LEGACY_TOPICS_FILE)
    old = {"partitions": 2, "end_offsets": {}, "start_offsets": {}}
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": 1, "topics": {"x": old, "y": dict(old)}}, f)
    settings = ServiceSettings(data_dir=str(tmp_path))
    store = ShardStore()
    ids = TopicRegistry(settings, store=store).topic_ids(None)
    assert ids == {"x": topic_id_for("x"), "y": topic_id_for("y")}, "the ids the core assumed for them"
    os.remove(path)
    assert TopicRegistry(settings, store=store.restarted()).topic_ids(None) == ids


def test_topics_if_changed_answers_none_until_a_change(tmp_path: os.PathLike[str]) -> None:
    settings = ServiceSettings(data_dir=str(tmp_path))
    store = ShardStore()
    registry = TopicRegistry(settings, store=store)
    registry.create_topic("t", 1)
    token, counts, ids = registry.topics_if_changed(None)  # type: ignore[misc]
    assert counts == {"t": 1} and set(ids) == {"t"}
    assert registry.topics_if_changed(token) is None
    registry.set_end_offsets({("t", 0): 3})  # offsets are no topic change
    assert registry.topics_if_changed(token) is None
    registry.create_partitions("t", 4)
    changed = registry.topics_if_changed(token)
    assert changed is not None and changed[1] == {"t": 4} and changed[2] == ids
    # A restarted registry has a new token: its first answer is the whole view.
    assert TopicRegistry(settings, store=store.restarted()).topics_if_changed(changed[0]) is not None


def test_the_actor_refuses_what_the_client_would_not_send(tmp_path: os.PathLike[str]) -> None:
    """Any Ray caller can reach the registry: it checks names and counts itself."""
    registry = TopicRegistry(ServiceSettings(data_dir=str(tmp_path)), store=ShardStore())
    assert registry.create_topic("no spaces", 1) is Errors.INVALID_TOPIC_EXCEPTION
    assert registry.create_topic(7, 1) is Errors.INVALID_TOPIC_EXCEPTION  # type: ignore[arg-type]
    assert registry.create_topic("t", "3") is Errors.INVALID_PARTITIONS  # type: ignore[arg-type]
    assert registry.create_topic("t", 2) is Errors.NONE
    assert registry.create_partitions("t", 2.5) is Errors.INVALID_PARTITIONS  # type: ignore[arg-type]
    assert registry.describe(None) == {"t": 2}
