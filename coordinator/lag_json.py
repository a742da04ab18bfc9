"""A partition's live lag rows written as JSON text: `raygroups lag --live --json` at scale.

`lag --live --json` for every group of a large service is a million rows
(issue 47: 100,000 groups, 1 M committed offsets, under 1 s). Made as one
tuple per row by each leader, pickled, unpickled and then written by the
one client, most of that time was the client's: a per-row object crossing
Ray and a serial encoder. Written here instead, each leader writes its own
groups' rows in one pass over its tracker (no row object), the leaders work
at once, and the answer is one string per group, pickled as plain text; the
client only interleaves the leaders' groups in order
(`actors/cli/live_lag.py` `LiveJson`).

DESIGN section 9 sends encoding off the partition's one thread; this encoding
stays on it because it replaces work that was there already: the text costs the
leader less than the row tuples and their pickle did (`python -m bench.lag`:
about 0.7 of it), and only `--json` asks for it.

The text is exactly what `raygroups lag --json` writes for the same rows
(spark_bridge/cli.py `_lag_json`'s keys, in order; compact; each row followed
by ",\\n"; tests/actors/test_live_rows.py), and the rows are exactly
`LagTracker.rows`' (lag, lag in seconds, health): the figures are computed
inline here, each partition's end-offset history looked up once, since a
function call per row is a fifth of the cost. tests/core/test_lag_json.py
holds both to those definitions.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from json.encoder import encode_basestring_ascii
from typing import Any

from coordinator.lag import Health, LagTracker, OffsetKey, TopicPartition

_HEALTH_NAMES = [health.name for health in sorted(Health)]
_STOPPED, _OK = Health.STOPPED.name, Health.OK.name
# Lag in seconds is `lag_ms / 1000` written as JSON writes a float (its repr): below
# _EXACT_MS, where the float of ms / 1000 is the nearest to a decimal of at most 15 digits,
# that repr is the decimal itself, trimmed, so it is written from the integers (a third of
# the cost of formatting floats; tests/core/test_lag_json.py compares the two).
_EXACT_MS = 10**15
_FRACTIONS = [repr(ms / 1000)[1:] for ms in range(1000)]  # ".0", ".001", ..., ".5", ..., ".999"
# Per topic partition: its samples and their ends (None: no end reported), its end, and the
# fixed text of a row before the committed offset and between it and the lag.
_Partition = tuple[Any, Any, int, str, str]


def json_lines(tracker: LagTracker, group_ids: Iterable[str], now_ms: int) -> tuple[tuple[str, str], ...]:
    """Per group of `group_ids` the tracker holds, in the order given: (its id, its rows' text),
    each row one JSON object and ",\\n", sorted by topic and partition."""
    committed, window_ms = tracker.committed, tracker.window_ms
    since = now_ms - window_ms
    known: dict[TopicPartition, _Partition] = {}
    texts: list[tuple[str, str]] = []
    for group_id in group_ids:
        windows = committed.get(group_id)
        if windows is None:
            continue
        head = '{"group":' + encode_basestring_ascii(group_id) + ',"topic":'
        lines = []
        for key, window in sorted(windows.items(), key=_key_of):
            tp = (key[1], key[2])
            partition = known.get(tp)
            if partition is None:
                partition = known[tp] = _partition(tracker, tp)
            samples, sample_ends, end, before, between = partition
            offset = window[-2]
            if samples is None:
                if len(window) == 2:  # committed once: lag.py `window_health`'s first rule, inline
                    health = _OK
                else:
                    health = _HEALTH_NAMES[tracker.window_health(window, None, tp, now_ms)]
                line = f'{head}{before}{offset}{between}"{health}","ahead":false}},\n'
            else:
                if offset >= end:
                    lag, seconds = 0, "0.0"
                else:
                    lag = end - offset
                    # lag.py `lag_ms`: when the message at `offset` was produced, interpolated
                    i = bisect_left(sample_ends, offset + 1)
                    if i == 0:
                        lagged_ms = now_ms - samples[0][0]
                    else:
                        (at0, end0), (at1, end1) = samples[i - 1], samples[i]
                        lagged_ms = now_ms - (at0 + (offset + 1 - end0) * (at1 - at0) // (end1 - end0))
                    if lagged_ms < 0:
                        lagged_ms = 0
                    if lagged_ms < _EXACT_MS:
                        seconds = f"{lagged_ms // 1000}{_FRACTIONS[lagged_ms % 1000]}"
                    else:  # past 31,000 years: the float's own text
                        seconds = repr(lagged_ms / 1000)
                if len(window) == 2:
                    health = _STOPPED if lag and window[-1] < since else _OK
                else:
                    health = _HEALTH_NAMES[tracker.window_health(window, lag, tp, now_ms)]
                ahead = "true" if offset > end else "false"
                line = (
                    f'{head}{before}{offset}{between}{lag},"lag_seconds":{seconds},'
                    f'"health":"{health}","ahead":{ahead}}},\n'
                )
            lines.append(line)
        texts.append((group_id, "".join(lines)))
    return tuple(texts)


def _partition(tracker: LagTracker, tp: TopicPartition) -> _Partition:
    before = f'{encode_basestring_ascii(tp[0])},"partition":{tp[1]},"current_offset":'
    samples = tracker.samples.get(tp)
    if not samples:
        return None, None, 0, before, ',"log_end_offset":null,"lag":null,"lag_seconds":null,"health":'
    end = samples[-1][1]
    return samples, tracker.sample_ends(tp), end, before, f',"log_end_offset":{end},"lag":'


def _key_of(item: tuple[OffsetKey, list[Any]]) -> OffsetKey:
    return item[0]
