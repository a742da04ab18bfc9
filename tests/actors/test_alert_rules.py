"""The shipped Prometheus alert rules (actors/dashboards/raygroups-alerts.yml).

Parsed here: every rule names only metrics `actors/core/metrics.py` declares, under
their exported names, and the alerts docs/metrics.md promises are there. With
promtool on the PATH (Debian's `prometheus` package) the file is also checked by
promtool and its unit tests run (tests/actors/alerts/raygroups-alerts-test.yml: each
alert fires on the series that should fire it, and only then).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

import actors

from tests.actors.test_grafana_dashboard import EXPORTED, declared_metrics

RULES = Path(actors.__file__).parent / "dashboards" / "raygroups-alerts.yml"
UNIT_TESTS = Path(__file__).parent / "alerts" / "raygroups-alerts-test.yml"
# alert -> what its expression must read (docs/metrics.md lists them)
PROMISED = {
    "RaygroupsGroupLagHigh": "ray_raygroups_group_lag_seconds",
    "RaygroupsGroupStopped": "ray_raygroups_group_health",
    "RaygroupsGroupStalled": "ray_raygroups_group_health",
    "RaygroupsPartitionBelowMinIsr": "ray_raygroups_partition_below_min_isr",
    "RaygroupsPartitionHeld": "ray_raygroups_controller_held_partitions",
}


def rules() -> list[dict[str, Any]]:
    loaded = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def test_every_rule_reads_declared_metrics_and_says_what_and_how_bad() -> None:
    declared = declared_metrics().items()
    exported = {EXPORTED[kind].format(name).removesuffix("_bucket") for name, kind in declared}
    found = rules()
    assert {rule["alert"] for rule in found} >= set(PROMISED)
    for rule in found:
        read = set(re.findall(r"\bray_raygroups_\w+", rule["expr"]))
        assert read and read <= exported, (rule["alert"], read - exported)
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    for alert, metric in PROMISED.items():
        [rule] = [r for r in found if r["alert"] == alert]
        assert metric in rule["expr"]


def test_the_health_codes_the_rules_compare_with_are_the_cores() -> None:
    from coordinator.lag import Health

    exprs = {rule["alert"]: rule["expr"] for rule in rules()}
    assert exprs["RaygroupsGroupStopped"].endswith(f"== {int(Health.STOPPED)}")
    assert exprs["RaygroupsGroupStalled"].endswith(f"== {int(Health.STALLED)}")


def test_promtool_checks_the_rules_and_runs_their_unit_tests() -> None:
    if shutil.which("promtool") is None:
        why = "no promtool (apt-get install prometheus)"
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(why)  # scripts/setup.sh installs it under CI
        # A developer machine without Debian's prometheus package; the parser tests above
        # check the same file.
        pytest.skip(why)
    checked = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        ["promtool", "test", "rules", UNIT_TESTS.name], capture_output=True, text=True, cwd=UNIT_TESTS.parent
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
