"""`raygroups config get/set` on the running service (issue 48): a change reaches every leader."""

from __future__ import annotations

import json
import time

import pytest

from actors.cli.main import main
from actors.client.client import Client
from coordinator.errors import Errors

from tests.ray.helpers import join_request

pytestmark = pytest.mark.ray
WAIT_S = 10.0


class FreshGroups:
    """A new group per join (a join into a group with a member would wait for its rebalance)."""

    def __init__(self, service: Client) -> None:
        self.service = service
        self.partitions = len(service.status())
        self.n = 0

    def one_per_partition(self) -> list[str]:
        groups: dict[int, str] = {}
        while len(groups) < self.partitions:
            self.n += 1
            groups.setdefault(self.service.partition_for(f"cfg-{self.n}"), f"cfg-{self.n}")
        return list(groups.values())

    def refused_everywhere(self) -> bool:
        """A 1 s session timeout is refused by the leader of every partition."""
        requests = [join_request(g, session_ms=1_000, require_known_member_id=False)
                    for g in self.one_per_partition()]
        return all(self.service.join_group(r).error is Errors.INVALID_SESSION_TIMEOUT for r in requests)


def test_an_online_change_reaches_every_leader_and_a_bad_one_is_refused(
    service: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    groups = FreshGroups(service)
    start = {row["key"]: row["value"] for row in service.config(["group_min_session_timeout_ms"])}
    assert start == {"group_min_session_timeout_ms": 500}
    assert not groups.refused_everywhere()
    try:
        assert main(["config", "set", "group_min_session_timeout_ms=2000"]) == 0
        began = time.monotonic()
        while not groups.refused_everywhere():
            assert time.monotonic() - began < WAIT_S, "every leader applies the change"
            time.sleep(0.05)
        with capsys.disabled():
            print(f"\napplied by {groups.partitions} leaders in {time.monotonic() - began:.2f} s")
        capsys.readouterr()
        assert main(["config", "get", "group_min_session_timeout_ms", "fsync", "--json"]) == 0
        rows = {row["KEY"]: row for row in json.loads(capsys.readouterr().out)}
        assert rows["group_min_session_timeout_ms"]["VALUE"] == "2000"
        assert rows["group_min_session_timeout_ms"]["SET-BY"] == "online"
        assert rows["fsync"]["CHANGE"] == "rolling"
        assert main(["config", "set", "group_min_session_timeout_ms=-5"]) == 1
        assert main(["config", "set", "replication_factor=3"]) == 1
        assert "cannot change online" in capsys.readouterr().err
    finally:
        service.set_config(start)
