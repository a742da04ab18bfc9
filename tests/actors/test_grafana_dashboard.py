"""The shipped Grafana dashboard (actors/dashboards/raygroups.json) against the metrics the service exports.

Every metric `actors/core/metrics.py` declares must be drawn, under the name Ray's
Prometheus endpoint gives it (`ray_` prefix; counters `_total`; histograms
through their `_bucket` series); the JSON must be a dashboard Grafana loads:
unique panel ids, a grid position each, Prometheus targets through the
datasource variable, every variable a query uses defined.
"""

from __future__ import annotations

import ast
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import actors

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = Path(actors.__file__).parent / "dashboards" / "raygroups.json"
# Ray's Prometheus names: counters get `_total`; a histogram is queried through its buckets.
EXPORTED = {"Counter": "ray_{}_total", "Gauge": "ray_{}", "Histogram": "ray_{}_bucket"}
BUILT_IN_VARIABLES = {"__rate_interval", "__interval", "__all"}


def declared_metrics() -> dict[str, str]:
    """{name: kind} of every metrics.Counter/Gauge/Histogram(name, ...) in actors/core/metrics.py."""
    tree = ast.parse((ROOT / "actors" / "core" / "metrics.py").read_text(encoding="utf-8"))
    found = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "metrics"
            and node.func.attr in EXPORTED
        ):
            name = node.args[0]
            assert isinstance(name, ast.Constant) and isinstance(name.value, str), ast.dump(node)
            found[name.value] = node.func.attr
    return found


def load() -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return dashboard


def drawn(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [panel for panel in dashboard["panels"] if panel["type"] != "row"]


def test_every_exported_metric_is_drawn() -> None:
    metrics = declared_metrics()
    exprs = " ".join(t["expr"] for panel in drawn(load()) for t in panel["targets"])

    assert len(metrics) >= 17  # the parse found the declarations, not nothing
    missing = [EXPORTED[kind].format(name) for name, kind in sorted(metrics.items())
               if not re.search(rf"\b{EXPORTED[kind].format(name)}\b", exprs)]
    assert missing == []


def test_it_is_a_dashboard_grafana_loads() -> None:
    dashboard = load()
    panels = dashboard["panels"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}

    assert dashboard["title"] and dashboard["uid"] and isinstance(dashboard["schemaVersion"], int)
    assert len({panel["id"] for panel in panels}) == len(panels)
    for panel in panels:
        position = panel["gridPos"]
        assert set(position) == {"h", "w", "x", "y"} and position["x"] + position["w"] <= 24, panel["title"]
    source = variables["datasource"]
    assert source["type"] == "datasource" and source["query"] == "prometheus"
    for panel in drawn(dashboard):
        assert panel["type"] == "timeseries" and panel["title"] and panel["description"]
        assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"] and len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
            used = set(re.findall(r"\$(\w+)", target["expr"]))
            assert used <= set(variables) | BUILT_IN_VARIABLES, (panel["title"], used)


def test_the_dashboard_ships_in_the_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

    assert "dashboards/*.json" in config["tool"]["setuptools"]["package-data"]["actors"]
