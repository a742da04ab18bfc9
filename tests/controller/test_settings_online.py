"""The controller takes the settings changed online (`raygroups config set`) from the registry."""

from __future__ import annotations

from typing import Any

from actors.core.settings import TOPIC_REGISTRY_NAME

from tests.controller.fake import FakeCluster, MemoryStore
from tests.controller.helpers import make_plane, run


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
