"""docs/capacity.md's planning rates, read by `raygroups capacity` and the controller's
`--auto-repartition` policy alike (`actors/controller/autogrow.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# One partition's planned requests/s: a single copy, and replicated.
PLANNED_REQUESTS_PER_S = 2_500
PLANNED_REQUESTS_PER_S_REPLICATED = 1_500


def planned_rate(row: Mapping[str, Any]) -> int:
    """The requests/s docs/capacity.md plans this partition at (less when it replicates)."""
    replicated = len(row.get("replicas") or ()) > 1
    return PLANNED_REQUESTS_PER_S_REPLICATED if replicated else PLANNED_REQUESTS_PER_S


def load_share(row: Mapping[str, Any]) -> float | None:
    """The leader's request rate as a share of its planned rate (None without a leader's figure)."""
    rate = row.get("requests_per_s")
    return None if rate is None else rate / planned_rate(row)
