"""Settings changed online (issue 48), no Ray: the classification, the one check, the registry's table."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from actors.client.settings_table import SETTING_KIND
from actors.client.topic_registry import TopicRegistry
from actors.core.setting_keys import (
    CHANGES,
    FIXED,
    ONLINE,
    ROLLING,
    SECTIONS,
    SettingError,
    parse_assignment,
    with_overrides,
)
from actors.core.settings import ServiceSettings
from actors.core.settings_watch import SettingsWatch
from actors.partition.actor import OffsetPartition
from actors.partition.topics_watch import TopicsWatch
from coordinator.errors import Errors
from coordinator.messages import JoinGroupRequest
from coordinator.service_state import ServiceEntry

from tests.actors.service_store_support import ShardStore
from tests.actors.support import WAIT_S, Answers, run, until

BASE = ServiceSettings(data_dir="/data")


def test_every_field_is_classified_once() -> None:
    top = {f.name for f in dataclasses.fields(ServiceSettings)} - set(SECTIONS)
    nested = [f.name for cls in SECTIONS.values() for f in dataclasses.fields(cls)]
    assert len(nested) == len(set(nested)) and not top & set(nested), "one key space"
    assert set(CHANGES) == top | set(nested)
    assert {change for change, _ in CHANGES.values()} == {ONLINE, ROLLING, FIXED}
    assert all(why for change, why in CHANGES.values() if change != ONLINE), "a refusal says why"


def test_online_values_apply_and_nothing_else_changes() -> None:
    changed = with_overrides(BASE, {"group_min_session_timeout_ms": 7_000, "mailbox_ttl_s": 5,
                                    "group_consumer_migration_policy": "UPGRADE"})
    assert changed.coordinator.group_min_session_timeout_ms == 7_000
    assert changed.mailbox_ttl_s == 5.0 and isinstance(changed.mailbox_ttl_s, float)
    assert changed.coordinator.group_consumer_migration_policy == "upgrade"
    assert dataclasses.replace(changed, coordinator=BASE.coordinator, mailbox_ttl_s=60.0) == BASE
    assert with_overrides(BASE, {}) is BASE


@pytest.mark.parametrize(("overrides", "reason"), [
    ({"no_such_setting": 1}, "unknown setting"),
    ({"offsets_segment_bytes": 1 << 20}, "rolling restart"),
    ({"replication_factor": 3}, "changes by never"),
    ({"group_min_session_timeout_ms": 2_000_000}, "exceeds group_max_session_timeout_ms"),
    ({"group_max_size": 0}, "group_max_size must be >= 1"),
    ({"offsets_retention_minutes": -1}, "must be >= 0"),
    ({"maintenance_interval_s": 0}, "maintenance_interval_s must be a number > 0"),
    ({"group_max_size": "10"}, "must be a int"),
    ({"group_max_size": True}, "must be a int"),
    ({"lag_metrics_partitions_max": 1.5}, "must be a int"),
    ({"group_consumer_migration_policy": "sideways"}, "must be one of"),
])
def test_refused_with_the_reason(overrides: dict[str, object], reason: str) -> None:
    with pytest.raises(SettingError, match=reason):
        with_overrides(BASE, overrides)


def test_assignments_parse_values_as_json_else_text() -> None:
    assert parse_assignment("group_max_size=10") == ("group_max_size", 10)
    assert parse_assignment(" mailbox_ttl_s = 1.5") == ("mailbox_ttl_s", 1.5)
    assert parse_assignment("group_consumer_migration_policy=upgrade") == (
        "group_consumer_migration_policy", "upgrade")
    with pytest.raises(SettingError, match="KEY=VALUE"):
        parse_assignment("group_max_size")


def registry(tmp_path: os.PathLike[str], store: ShardStore) -> TopicRegistry:
    return TopicRegistry(ServiceSettings(data_dir=str(tmp_path)), store=store)


def test_registry_keeps_changes_as_service_state_all_or_none(tmp_path: os.PathLike[str]) -> None:
    store = ShardStore()
    first = registry(tmp_path, store)
    assert first.config_set({"group_max_size": 10, "offsets_retention_minutes": 60}) == ""
    refused = first.config_set({"group_max_size": 20, "fsync": False})
    assert "fsync cannot change online" in refused
    again = registry(tmp_path, store.restarted())  # a new registry, a failover, a full restart
    rows = {row["key"]: row for row in again.config_get([])}
    assert rows["group_max_size"]["value"] == 10 and rows["group_max_size"]["start"] == 2**31 - 1
    assert rows["offsets_retention_minutes"] == {
        "key": "offsets_retention_minutes", "value": 60, "start": 10_080, "set_by": "online",
        "change": ONLINE, "why": ""}
    assert rows["fsync"]["value"] is True and rows["fsync"]["change"] == ROLLING
    assert rows["kafka_listener"]["value"]["ports"] == [19092, 19291]
    assert "unknown setting" in again.config_get(["nope"])  # type: ignore[operator]
    token, overrides = again.settings_if_changed(None)  # type: ignore[misc]
    assert overrides == {"group_max_size": 10, "offsets_retention_minutes": 60}
    assert again.settings_if_changed(token) is None
    assert again.config_set({"group_max_size": 5}) == ""
    assert again.settings_if_changed(token) == (again.settings.view(again.writer)[0],
                                                {"group_max_size": 5, "offsets_retention_minutes": 60})


def test_entries_that_no_longer_check_are_left_out(tmp_path: os.PathLike[str]) -> None:
    store = ShardStore()
    registry(tmp_path, store).config_set({"group_max_size": 10})
    writer = registry(tmp_path, store)
    writer.config_get(None)  # claims the store
    store.write(writer.writer, [ServiceEntry(SETTING_KIND, "fsync", json.dumps(False).encode()),
                                ServiceEntry(SETTING_KIND, "group_max_size", b"{not json")])
    rows = {row["key"]: row["value"] for row in registry(tmp_path, store.restarted()).config_get(None)}
    assert rows["fsync"] is True and rows["group_max_size"] == 2**31 - 1


def test_config_set_checks_over_the_settings_a_roll_put_in_force(tmp_path: os.PathLike[str]) -> None:
    # Started with sessions of 6-1800 s; a roll set the maximum to 10 s (what config get shows).
    rolled: dict[str, Any] | None = {"group_max_session_timeout_ms": 10_000}
    store = ShardStore()
    reg = TopicRegistry(ServiceSettings(data_dir=str(tmp_path)), store=store, rolled_settings=lambda: rolled)
    refused = reg.config_set({"group_min_session_timeout_ms": 20_000})  # fine over the start settings
    assert "group_min_session_timeout_ms" in refused and "group_max_session_timeout_ms" in refused
    assert reg.config_set({"group_min_session_timeout_ms": 8_000}) == ""
    # A later roll raises the maximum: a minimum the start settings refuse is in force over it.
    rolled = {"group_max_session_timeout_ms": 3_600_000}
    assert reg.config_set({"group_min_session_timeout_ms": 2_000_000}) == ""
    again = TopicRegistry(ServiceSettings(data_dir=str(tmp_path)), store=store.restarted(),
                          rolled_settings=lambda: rolled)
    [row] = again.config_get(["group_min_session_timeout_ms"])  # kept over the rolled settings
    assert (row["value"], row["set_by"]) == (2_000_000, "online")
    # The controller does not answer: nothing is checked over stale settings, nothing written.
    rolled = None
    assert "could not be read from the controller" in again.config_set({"group_max_size": 3})
    [row] = again.config_get(["group_max_size"])
    assert row["value"] == 2**31 - 1


class _Remote:
    def __init__(self, answer: object) -> None:
        self.answer = answer

    async def remote(self, _token: object) -> object:
        return self.answer


class _Registry:
    def __init__(self, answer: object) -> None:
        self.settings_if_changed = _Remote(answer)


def test_the_leaders_watch_applies_a_newer_set_and_skips_a_bad_one() -> None:
    watch = SettingsWatch(BASE)
    poll = lambda registry: asyncio.run(watch.poll(registry))  # noqa: E731
    assert poll(None) is None
    changed = poll(_Registry(("t1", {"group_max_size": 3})))
    assert changed is not None and changed.coordinator.group_max_size == 3 and watch.token == "t1"
    assert poll(_Registry(None)) is None
    assert poll(_Registry(("t2", {"fsync": False}))) is None and watch.token == "t2"
    assert watch.overrides == {"group_max_size": 3}


class _Handle:
    """A real TopicRegistry behind Ray's `.method.remote(...)` shape, in this process."""

    def __init__(self, registry: TopicRegistry) -> None:
        self.registry = registry

    def __getattr__(self, method: str) -> Any:
        async def call(*args: Any) -> Any:
            return getattr(self.registry, method)(*args)
        return SimpleNamespace(remote=call)


def test_a_running_leader_applies_a_change_and_a_new_leader_starts_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registry stores the change in partition 0's log; the leader's topics loop reads it
    and its shard decides with it (a JoinGroup under the new minimum session timeout is refused);
    a new actor on the same log (a failover, a restart) applies it at its first read."""
    store = ShardStore()
    handle = _Handle(registry(tmp_path / "registry", store))
    monkeypatch.setattr(TopicsWatch, "lookup", lambda self: handle)
    settings = ServiceSettings(data_dir=str(tmp_path), num_partitions=1, topics_refresh_interval_s=0.01)
    join = JoinGroupRequest("g", 6_000, 30_000, "consumer", (("range", b""),), require_known_member_id=False)

    async def leader() -> OffsetPartition:
        partition = OffsetPartition(0, 1, settings)
        await partition.activate()
        assert await partition.wait_active(WAIT_S) == "ACTIVE"
        return partition

    async def joined(partition: OffsetPartition) -> Errors:
        answers = Answers()
        return (await answers.wait(answers.send(partition, join))).error  # type: ignore[no-any-return]

    async def scenario() -> None:
        first = await leader()
        assert await joined(first) is Errors.NONE
        assert handle.registry.config_set({"group_min_session_timeout_ms": 7_000, "mailbox_ttl_s": 5}) == ""
        await until(lambda: first.runtime.shard.config.group_min_session_timeout_ms == 7_000, "applied")
        assert await joined(first) is Errors.INVALID_SESSION_TIMEOUT
        assert first.mailboxes.ttl_s == 5.0 and first.settings.mailbox_ttl_s == 5.0
        await first.unload(first.epoch)
        handle.registry = registry(tmp_path / "registry", store.restarted())  # the registry restarted too
        second = await leader()
        await until(lambda: second.settings.coordinator.group_min_session_timeout_ms == 7_000, "at start")
        assert await joined(second) is Errors.INVALID_SESSION_TIMEOUT
        await second.unload(second.epoch)

    run(scenario())
