"""The rebalances plot's series (pure) for classic generations and consumer group epochs, and its PNG."""

from __future__ import annotations

from typing import Any

from spark_bridge import report_plots
from spark_bridge.report_plots import Span

from tests.spark.histories import T0

SPAN = Span(T0, T0 + 10_000, 1_000)


def row(group_id: str, generation: int, at: int, group_type: str) -> dict[str, Any]:
    return {"group_id": group_id, "generation": generation, "timestamp_ms": T0 + at, "group_type": group_type}


# g: classic, upgraded (epoch 1 carried over, then 2), downgraded (generation 2), rebalanced (3).
# cg: a consumer group from the start.
ROWS = [
    row("g", 1, 1_000, "classic"), row("g", 1, 2_000, "consumer"), row("g", 2, 2_000, "consumer"),
    row("g", 2, 4_000, "classic"), row("g", 3, 5_000, "classic"),
    row("cg", 1, 0, "consumer"), row("cg", 2, 3_000, "consumer"), row("other", 7, 0, "classic"),
]


def test_a_converted_group_is_one_series_held_to_the_end() -> None:
    series = report_plots.generation_series(ROWS, ["g", "cg"], SPAN)

    assert series == {
        "g": [(T0 + 1_000, 1), (T0 + 2_000, 1), (T0 + 2_000, 2), (T0 + 4_000, 2), (T0 + 5_000, 3),
              (T0 + 10_000, 3)],
        "cg": [(T0, 1), (T0 + 3_000, 2), (T0 + 10_000, 2)],
    }


def test_consumer_epochs_are_marked_apart() -> None:
    assert report_plots.consumer_epoch_points(ROWS, ["g", "cg"]) == {
        "g": [(T0 + 2_000, 1), (T0 + 2_000, 2)],
        "cg": [(T0, 1), (T0 + 3_000, 2)],
    }
    # Rows written before the history had a group type are classic generations.
    untyped = {"group_id": "g", "generation": 1, "timestamp_ms": T0}
    assert report_plots.consumer_epoch_points([ROWS[0], untyped], ["g"]) == {}


def test_the_rebalances_plot_draws_both_types() -> None:
    groups = ["g", "cg"]
    series = report_plots.generation_series(ROWS, groups, SPAN)
    png = report_plots.draw_rebalances(series, SPAN, report_plots.consumer_epoch_points(ROWS, groups))

    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    assert report_plots.draw_rebalances({}, SPAN).startswith(b"\x89PNG")
