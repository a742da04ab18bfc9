"""The controller takes the settings changed online (`raygroups config set`) from the registry,
and answers `config get` with what is in force: the start settings, the rolling restart's
`--settings`, the online changes over them."""

from __future__ import annotations

from typing import Any

from actors.core.settings import TOPIC_REGISTRY_NAME
from coordinator.replication.rolling import DONE, RollPlan

from tests.controller.fake import FakeCluster, MemoryStore
from tests.controller.helpers import make_plane, make_settings, run


class FakeRegistry:
    """`settings_if_changed` as `TopicRegistry` answers it."""

    def __init__(self, overrides: dict[str, Any], token: str) -> None:
        self.overrides, self.token = overrides, token
        self.settings_if_changed = self

    async def remote(self, token: str | None) -> Any:
        return None if token == self.token else (self.token, self.overrides)


def test_the_probe_and_standby_settings_change_while_it_runs() -> None:
    cluster = FakeCluster()
    plane = make_plane(cluster, MemoryStore())

    async def scenario() -> None:
        await plane.settings_once()  # no registry yet: the start settings stay
        assert plane.settings.probe_timeout_s == 5.0
        cluster.live[TOPIC_REGISTRY_NAME] = FakeRegistry({"probe_timeout_s": 2.5, "standby_actors": 2,
                                                          "group_max_size": 9}, "t1")
        await plane.settings_once()
        assert plane.settings.probe_timeout_s == 2.5 and plane.standbys.settings.standby_actors == 2
        assert plane.settings.coordinator.group_max_size == 9, "new partition actors start with it"
        cluster.live[TOPIC_REGISTRY_NAME] = FakeRegistry({"fsync": False}, "t2")  # not online: never applied
        await plane.settings_once()
        assert plane.settings_watch.token == "t2"
        assert plane.settings.log.fsync is True and plane.settings.probe_timeout_s == 2.5

    run(scenario())


def test_config_get_shows_what_a_roll_set_and_online_changes_over_it() -> None:
    cluster = FakeCluster()
    plane = make_plane(cluster, MemoryStore())

    async def scenario() -> None:
        rows = {r["key"]: r for r in await plane.describe_settings([])}  # type: ignore[union-attr]
        assert rows["commit_timeout_ms"]["value"] == 5000 and rows["commit_timeout_ms"]["set_by"] == "start"
        plane.state.roll = RollPlan(2, ["n1"], None, {"commit_timeout_ms": 7000, "probe_interval_s": 3.0})
        cluster.live[TOPIC_REGISTRY_NAME] = FakeRegistry({"probe_interval_s": 2.0}, "t1")
        rows = {r["key"]: r for r in await plane.describe_settings([])}  # type: ignore[union-attr]
        assert rows["commit_timeout_ms"] == {
            "key": "commit_timeout_ms", "value": 7000, "start": 5000,
            "set_by": "rolling-restart 2 (under way)", "change": "rolling",
            "why": "read by each leader's runtime at start"}
        # An online change wins over the roll's value, as every actor applies it over its start.
        assert rows["probe_interval_s"]["value"] == 2.0 and rows["probe_interval_s"]["set_by"] == "online"
        assert rows["fsync"]["set_by"] == "start"
        plane.state.roll.phase = DONE
        [row] = await plane.describe_settings(["commit_timeout_ms"])  # type: ignore[misc]
        assert row["set_by"] == "rolling-restart 2" and row["value"] == 7000
        # Read fresh from the registry: a change just made shows at once (not at the next poll).
        cluster.live[TOPIC_REGISTRY_NAME] = FakeRegistry({"probe_interval_s": 4.0}, "t2")
        [row] = await plane.describe_settings(["probe_interval_s"])  # type: ignore[misc]
        assert row["value"] == 4.0
        assert "unknown setting" in await plane.describe_settings(["nope"])  # type: ignore[operator]

    run(scenario())


def test_the_controller_refuses_keys_that_are_not_a_list_of_names_before_anything() -> None:
    from actors.controller.actor import Controller

    controller = Controller(make_settings())  # single copy, no event loop: nothing started

    async def scenario() -> None:
        assert "keys must be a list of setting names" in await controller.config_get("fsync")  # type: ignore[arg-type,operator]
        assert "keys must be a list" in await controller.config_get([1])  # type: ignore[list-item,operator]
        assert controller._startup is None  # refused at the boundary: the plane was not started

    run(scenario())
