"""Whether a partition's leader is alive, judged from its probe.

Liveness means serving, or loading and making progress; answering a call is
not enough. A leader ACTIVE at the expected partition and epoch serves. One
LOADING (or FAILED and reloading by itself) is alive while its probe's
`progress` moves; with no progress for `load_stall_timeout_s` it is
replaced. One still INITIAL was never activated (a controller died between
starting it and activating it): it is activated, and replaced if it stays
INITIAL as long. One that refuses to serve (its log is missing or behind
what the partition acknowledged) is kept and shown: a replacement elsewhere
would meet the same missing data, so only an operator's reassign moves it.
Anything else (CLOSED, another partition or epoch) is replaced.

Pure: probe, previous observation and time in, a judgement out.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class Verdict(Enum):
    SERVING = "SERVING"
    LOADING = "LOADING"
    ACTIVATE = "ACTIVATE"
    REFUSED = "REFUSED"
    REPLACE = "REPLACE"


@dataclass(frozen=True, slots=True)
class Observation:
    """What a probe showed, and since when (controller's monotonic seconds) it has not changed."""

    epoch: int
    state: str
    progress: int
    since_s: float


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: Verdict
    # A short, fixed cause (a metric tag) and the detail for the log.
    cause: str
    detail: str
    observation: Observation | None


def judge(
    probe: dict[str, Any],
    partition: int,
    epoch: int,
    previous: Observation | None,
    now_s: float,
    stall_timeout_s: float,
) -> Judgement:
    """The verdict on a leader expected to lead `partition` at `epoch`."""
    if (probe.get("partition"), probe.get("epoch")) != (partition, epoch):
        detail = f"leader reports partition {probe.get('partition')} epoch {probe.get('epoch')}"
        return Judgement(Verdict.REPLACE, "wrong epoch", detail, None)
    state = str(probe.get("state"))
    observed = Observation(epoch, state, int(probe.get("progress") or 0), now_s)
    if previous is not None and (previous.epoch, previous.state, previous.progress) == (
        observed.epoch,
        observed.state,
        observed.progress,
    ):
        observed = previous
    if state == "ACTIVE":
        return Judgement(Verdict.SERVING, "active", "", observed)
    if probe.get("refused"):
        return Judgement(Verdict.REFUSED, "refused", str(probe.get("failure") or "refused"), observed)
    if state not in ("INITIAL", "LOADING", "FAILED"):
        return Judgement(Verdict.REPLACE, "closed", f"leader is {state}", None)
    stalled_s = now_s - observed.since_s
    if stalled_s > stall_timeout_s:
        failure = probe.get("failure")
        detail = f"{state} with no progress for {stalled_s:.0f} s" + (f" ({failure})" if failure else "")
        return Judgement(Verdict.REPLACE, "stalled", detail, None)
    if state == "INITIAL":
        return Judgement(Verdict.ACTIVATE, "initial", "never activated", observed)
    return Judgement(Verdict.LOADING, state.lower(), str(probe.get("failure") or ""), observed)
