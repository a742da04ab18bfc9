"""Benchmark of live lag (coordinator/lag.py, docs/live-lag.md): `python -m bench.lag`.

Part one, the core (no Ray, CPU time, one core), each figure beside its
baseline measured in the same run:
- the extra CPU a commit costs the shard for lag tracking: OffsetCommit
  requests (1 and 10 partitions) through `Shard.handle` with the tracker, and
  with a tracker that does nothing (target: under 5%); the same for replaying
  a log (loading, a follower's replay);
- one partition's share of the issue's state (100,000 groups, 1 M offsets on
  8 partitions: 12,500 groups, 125,000 offsets): a LagRequest for every group
  and its response pickled, and the metrics export; the same with every offset
  committed 10 times (full health windows).

`--leader` (on Ray): the shard's extra CPU above as a share of a whole commit's CPU
at the leader process (1 partition, commits coalesced from 50 coroutines): the issue's
target, under 5% of a commit's cost.

Part two (`--service`, or `--only-service`), on Ray: an embedded service with 8
partitions, 100,000 groups with 10 committed offsets each (1 M), their topic's
1,000 partitions reported twice to the topic registry. Timed: `raygroups lag
--live --json` for every group (target under 1 s; baseline: `raygroups list
--json`, which asks every leader for its groups), and a full scrape of the
node's metrics endpoint once every group's lag series is there (target under
1 s). The controller's probe timeout is 30 s there (5 s by default): on a shared
2-core host, 8 leaders loading 1 M offsets can miss a 5 s probe and be failed over.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import pickle
import time
from collections.abc import Callable
from typing import Any

from bench.table import print_figures, progress
from coordinator import Shard
from coordinator.lag_query import LagRequest
from coordinator.messages import OffsetCommitPartition, OffsetCommitRequest
from coordinator.records import OffsetCommitKey, OffsetCommitValue, Record

TOPIC_PARTITIONS = 1_000
OFFSETS_PER_GROUP = 10


class NoTracker:
    """A LagTracker that keeps nothing: the baseline of the tracking cost."""

    def on_commit(self, *_: Any) -> None:
        pass

    def on_commits(self, *_: Any) -> None:
        pass

    def on_commit_record(self, *_: Any) -> None:
        pass

    def on_offset_deleted(self, *_: Any) -> None:
        pass

    def forget_groups(self, *_: Any) -> None:
        pass


def cpu_seconds(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def group_partitions(i: int) -> list[int]:
    return [(i * OFFSETS_PER_GROUP + k) % TOPIC_PARTITIONS for k in range(OFFSETS_PER_GROUP)]


def commit_cpu(requests: list[OffsetCommitRequest], tracked: bool, rounds: int) -> float:
    """Best CPU seconds of `rounds` runs of `requests` through a shard that already holds
    their offsets (the steady state: consumers commit the partitions they own again)."""
    shard = Shard()
    if not tracked:
        shard.lag = NoTracker()  # type: ignore[assignment]
    else:
        shard.update_end_offsets([("t", p, 0, 1_000_000) for p in range(TOPIC_PARTITIONS)], whole=True)

    def run() -> None:
        for n, request in enumerate(requests):
            shard.handle(request, n, n)

    run()
    return min(cpu_seconds(run) for _ in range(rounds))


def tracking_us(commits: int, rounds: int) -> dict[int, tuple[float, float]]:
    """Per commit width (1 and OFFSETS_PER_GROUP partitions): the shard's CPU per commit in
    microseconds with the tracker and with one that does nothing."""
    figures = {}
    for width in (1, OFFSETS_PER_GROUP):
        requests = [
            OffsetCommitRequest(
                f"g{n % 1_000}",
                tuple(OffsetCommitPartition("t", p, n) for p in group_partitions(n % 1_000)[:width]),
            )
            for n in range(commits)
        ]
        figures[width] = (commit_cpu(requests, True, rounds) / commits * 1e6,
                          commit_cpu(requests, False, rounds) / commits * 1e6)
    return figures


def commit_rows(commits: int, rounds: int) -> list[tuple[str, ...]]:
    rows = []
    for width, (with_tracker, without) in tracking_us(commits, rounds).items():
        extra = (with_tracker - without) / without
        rows.append((
            f"OffsetCommit of {width} partition{'s' if width > 1 else ''}, shard CPU per commit",
            f"{with_tracker:.1f} us", f"{without:.1f} us untracked",
            f"+{extra:.1%}", "< 5% (extra CPU of lag tracking)",
        ))
    return rows


def records_for(groups: int, start: int = 0) -> list[Record]:
    return [
        Record(OffsetCommitKey(f"group-{i}", "t", p), OffsetCommitValue(i, 1, "", i))
        for i in range(start, start + groups)
        for p in group_partitions(i)
    ]


def replay_rows(records: list[Record], rounds: int) -> list[tuple[str, ...]]:
    def best(tracked: bool) -> float:
        times = []
        for _ in range(rounds):
            shard = Shard()
            if not tracked:
                shard.lag = NoTracker()  # type: ignore[assignment]
            times.append(cpu_seconds(lambda shard=shard: shard.replay_many(records)))
        return min(times)

    with_tracker, without = best(True), best(False)
    return [(
        f"replay of {len(records):,} offset records (a load, a follower)",
        f"{with_tracker:.2f} s", f"{without:.2f} s untracked", f"+{(with_tracker - without) / without:.1%}",
        "the tracker is fed on replay too: no rebuild at failover",
    )]


def query_rows(records: list[Record]) -> list[tuple[str, ...]]:
    shard = Shard()
    shard.replay_many(records)
    ends = [("t", p, t, e) for p in range(TOPIC_PARTITIONS) for t, e in ((0, 0), (60_000, 2_000_000))]
    shard.update_end_offsets(ends, whole=True)
    now = 120_000
    groups = len(shard.lag.committed)
    answer: list[Any] = []
    asked = cpu_seconds(lambda: answer.append(shard.handle(LagRequest(None), now, 1).responses[0][1]))
    pickled = cpu_seconds(lambda: pickle.dumps(answer[0], pickle.HIGHEST_PROTOCOL))
    as_json = LagRequest(None, as_json=True)
    texts = cpu_seconds(lambda: answer.append(shard.handle(as_json, now, 1).responses[0][1]))
    texts_pickled = cpu_seconds(lambda: pickle.dumps(answer[1], pickle.HIGHEST_PROTOCOL))
    exported = cpu_seconds(lambda: shard.lag.export(now, 1_000))
    return [
        (f"LagRequest for all {groups:,} groups ({len(records):,} offsets) of one partition",
         f"{asked * 1000:.0f} ms", f"{pickled * 1000:.0f} ms to pickle it", "",
         "one eighth of the issue's state"),
        ("the same as JSON text (lag --live --json's question), leader CPU with its pickle",
         f"{(texts + texts_pickled) * 1000:.0f} ms", f"{(asked + pickled) * 1000:.0f} ms as rows",
         f"{(texts + texts_pickled) / (asked + pickled):.2f}", ""),
        ("metrics export of that partition (every group, top 1,000 partitions)", f"{exported * 1000:.0f} ms",
         "", "", "every lag_metrics_interval_s (10 s)"),
    ]


def window_rows(groups: int) -> list[tuple[str, ...]]:
    """A LagRequest and the export where every offset has a full health window (10 commits,
    all in the window, lag > 0): each commit's lag then is looked up when asked."""
    records = [
        Record(OffsetCommitKey(f"group-{i}", "t", p), OffsetCommitValue(1_000 * c + i, 1, "", 100_000 + c))
        for c in range(10)
        for i in range(groups)
        for p in group_partitions(i)
    ]
    shard = Shard()
    ends = [("t", p, t, e) for p in range(TOPIC_PARTITIONS) for t, e in ((0, 0), (60_000, 2_000_000))]
    shard.update_end_offsets(ends, whole=True)
    shard.replay_many(records)
    now = 120_000
    asked = min(cpu_seconds(lambda: shard.handle(LagRequest(None), now, 1)) for _ in range(3))
    exported = cpu_seconds(lambda: shard.lag.export(now, 1_000))
    offsets = len(records) // 10
    return [
        (f"LagRequest for all {groups:,} groups, {offsets:,} offsets with 10-commit windows",
         f"{asked * 1000:.0f} ms", "", "", "a question: the windows' lags then looked up"),
        ("metrics export of that partition, 10-commit windows", f"{exported * 1000:.0f} ms", "", "", ""),
    ]


# ------------------------------------------------------------------ the service


def client_rows(groups: int) -> list[tuple[str, ...]]:
    """The client's part of `lag --live --json` for `groups` groups (8 partitions' answers):
    the leaders' JSON text unpickled, its groups put in order and joined (`LiveJson`), beside
    the same answers as rows unpickled and sorted, before any JSON is written."""
    from operator import itemgetter

    from actors.cli.live_lag import LiveJson

    share = groups // 8
    answers: dict[bool, list[bytes]] = {False: [], True: []}
    for k in range(8):
        shard = Shard()
        shard.replay_many(records_for(share, k * share))
        shard.update_end_offsets([("t", p, 0, 2_000_000) for p in range(TOPIC_PARTITIONS)], whole=True)
        for as_json in answers:
            response = shard.handle(LagRequest(None, as_json=as_json), 60_000, 1).responses[0][1]
            answers[as_json].append(pickle.dumps(response, pickle.HIGHEST_PROTOCOL))

    def texts() -> str:
        got = [text for answer in answers[True] for text in pickle.loads(answer).json_groups]
        got.sort(key=itemgetter(0))
        return LiveJson(got).json_partitions()

    def rows() -> None:
        got = [row for answer in answers[False] for row in pickle.loads(answer).partitions]
        got.sort(key=itemgetter(0))

    written, unpickled = cpu_seconds(texts), cpu_seconds(rows)
    return [(
        f"lag --live --json's client CPU for {share * 8 * OFFSETS_PER_GROUP:,} rows (8 answers to JSON)",
        f"{written:.2f} s", f"{unpickled:.2f} s the rows, no JSON", f"{written / unpickled:.2f}",
        "< 1 s with the leaders' answer",
    )]


def service_rows(groups: int, runs: int, scrape: bool) -> list[tuple[str, ...]]:
    import asyncio
    import os
    import shutil
    import tempfile

    import ray

    import actors
    from actors.cli.main import main as cli
    from actors.core.settings import ServiceSettings
    from coordinator import CoordinatorConfig

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    data_dir = tempfile.mkdtemp(prefix="raygroups-bench-lag-")
    try:
        actors.init_local_ray(num_cpus=2, object_store_memory=512 * 1024 * 1024)
        settings = ServiceSettings(
            data_dir, num_partitions=8, lag_metrics_interval_s=5.0, probe_timeout_s=30.0,
            coordinator=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
        )
        client = actors.start(data_dir, settings=settings)
        client.create_topic("t", TOPIC_PARTITIONS)
        progress(f"committing {groups * OFFSETS_PER_GROUP:,} offsets of {groups:,} groups")
        started = time.perf_counter()
        asyncio.run(populate(client, groups))
        progress(f"  in {time.perf_counter() - started:.0f} s")
        now_ms = int(time.time() * 1000)
        client.set_end_offsets({("t", p): 100 for p in range(TOPIC_PARTITIONS)}, at_ms=now_ms - 60_000)
        client.set_end_offsets({("t", p): 200_000 for p in range(TOPIC_PARTITIONS)}, at_ms=now_ms)
        sampled = [f"group-{i}" for i in range(0, groups, 997)]
        wait_for(lambda: all(g.lag is not None for g in client.lag(sampled)))

        import psutil  # type: ignore[import-untyped]

        leaders = [psutil.Process(ray.get(client.leader(p).info.remote())["pid"]) for p in range(8)]
        here = psutil.Process()

        def cpu(processes: list[Any]) -> float:
            return sum(t.user + t.system for t in (p.cpu_times() for p in processes))

        def timed(argv: list[str]) -> tuple[float, int, float, float]:
            """(wall seconds, bytes written, the leaders' CPU seconds, this process's)."""
            out = io.StringIO()
            leaders_cpu, own_cpu, started = cpu(leaders), cpu([here]), time.perf_counter()
            with contextlib.redirect_stdout(out):
                cli(argv)
            wall = time.perf_counter() - started
            figures = wall, len(out.getvalue()), cpu(leaders) - leaders_cpu, cpu([here]) - own_cpu
            progress(f"  {' '.join(argv)}: {wall:.2f} s (the leaders' CPU {figures[2]:.2f} s, the "
                     f"client's {figures[3]:.2f} s), load average {os.getloadavg()[0]:.0f}")
            return figures

        def timed_or_failed(argv: list[str]) -> tuple[float, int, float, float]:
            try:
                return timed(argv)
            except Exception as exc:  # a loaded host: the other figures stand
                progress(f"  {' '.join(argv)} failed: {exc!r:.200}")
                return float("inf"), 0, 0.0, 0.0

        commands = (["lag", "--live", "--json"], ["list", "--json"])
        timings = [(timed_or_failed(commands[0]), timed_or_failed(commands[1])) for _ in range(runs)]
        (live_s, live_bytes, leaders_s, client_s), (list_s, *_) = min(timings)
        rows = [
            (f"raygroups lag --live --json, all {groups:,} groups ({groups * OFFSETS_PER_GROUP:,} rows)",
             f"{live_s * 1000:.0f} ms", f"{list_s * 1000:.0f} ms raygroups list --json",
             f"{live_s / list_s:.1f}", f"< 1 s; {live_bytes / 1e6:.0f} MB of JSON, best of {runs}"),
            ("  its CPU: the 8 leaders' (all their work meanwhile), the client's", f"{leaders_s:.2f} s",
             f"{client_s:.2f} s client", "", f"load average {os.getloadavg()[0]:.0f}"),
        ]
        progress(f"  {rows[0]}")
        if not scrape:
            return rows
        # Per-group series only for each leader's worst groups (lag_metrics_groups_max, docs/metrics.md).
        scrape_s, series, failed = scrape_when_complete(min(groups, 8 * settings.lag_metrics_groups_max))
        scraped = f"full scrape of the metrics endpoint ({series:,} lag series)"
        rows.append((scraped, f"{scrape_s * 1000:.0f} ms", "", "", f"< 1 s{'; ' + failed if failed else ''}"))
        return rows
    finally:
        actors.stop()
        ray.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)


async def populate(client: Any, groups: int) -> None:
    import asyncio

    sem = asyncio.Semaphore(256)

    async def commit(i: int) -> None:
        async with sem:
            offsets = {("t", p): 1_000 + i for p in group_partitions(i)}
            await client.commit_offsets_async(f"group-{i}", offsets)

    await asyncio.gather(*(commit(i) for i in range(groups)))


def wait_for(condition: Callable[[], bool], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the leaders did not get the end offsets")
        time.sleep(0.5)


def scrape_when_complete(groups: int, timeout_s: float = 180.0) -> tuple[float, int, str]:
    """(seconds of the first full scrape that holds `groups` group lag series (every one the
    leaders export under their cap), lag series in it, what went wrong if none did: the last
    answer's error)."""
    import urllib.error
    import urllib.request

    import ray

    node = next(n for n in ray.nodes() if n["Alive"])
    url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
    deadline = time.monotonic() + timeout_s
    failed = ""
    while True:
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(url, timeout=60) as answer:
                text = answer.read().decode()
            failed = ""
        except (urllib.error.URLError, TimeoutError) as exc:
            text, failed = "", f"the endpoint answered {exc!r}"
            progress(f"  scrape: {failed}")
        elapsed = time.perf_counter() - started
        group_series = text.count("\nray_raygroups_group_lag{")
        series = group_series + text.count("\nray_raygroups_group_lag_seconds{") + text.count(
            "\nray_raygroups_group_health{") + text.count("\nray_raygroups_topic_partition_lag") + text.count(
            "\nray_raygroups_groups_by_health{") + text.count("\nray_raygroups_lag_groups_not_exported{")
        progress(f"  scrape: {group_series:,} group lag series of {groups:,} in {elapsed:.1f} s")
        if group_series >= groups or time.monotonic() > deadline:
            return elapsed, series, failed
        time.sleep(5)


def leader_rows(
    commits: int, rounds: int, calls: int = 4_000, concurrency: int = 50
) -> list[tuple[str, ...]]:
    """The issue's measure: tracking's extra CPU (the shard's, above) as a share of a whole
    commit's CPU at the leader (its process: the Ray call, the runtime, the log append),
    commits coalesced from `concurrency` coroutines (the cheapest a commit gets there)."""
    import asyncio
    import shutil
    import tempfile

    import psutil  # type: ignore[import-untyped]
    import ray

    import actors
    from actors.core.settings import KafkaListenerSettings
    from coordinator import CoordinatorConfig

    def commit_all(client: Any, width: int, count: int) -> int:
        async def worker(w: int) -> None:
            for i in range(count // concurrency):
                await client.commit_offsets_async(f"g{width}-{w}", {("t", p): i for p in range(width)})

        async def run() -> None:
            await asyncio.gather(*(worker(w) for w in range(concurrency)))

        asyncio.run(run())
        return count // concurrency * concurrency

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    shard = tracking_us(commits, rounds)
    extra = {width: tracked - untracked for width, (tracked, untracked) in shard.items()}
    data_dir = tempfile.mkdtemp(prefix="raygroups-bench-")
    try:
        actors.init_local_ray(num_cpus=2)
        client = actors.start(data_dir, num_partitions=1, kafka_listener=KafkaListenerSettings(enabled=False),
                              coordinator_config=CoordinatorConfig(group_initial_rebalance_delay_ms=0))
        leader = psutil.Process(ray.get(client.leader(0).info.remote())["pid"])
        rows = []
        for width in extra:
            commit_all(client, width, calls // 10)  # warm up: the groups made
            best = float("inf")
            for _ in range(rounds):
                before = leader.cpu_times()
                done = commit_all(client, width, calls)
                after = leader.cpu_times()
                best = min(best, ((after.user - before.user) + (after.system - before.system)) / done * 1e6)
            rows.append((
                f"OffsetCommit of {width} partition{'s' if width > 1 else ''}: tracking's share of the "
                "leader's CPU per commit", f"+{extra[width]:.2f} us", f"{best:.1f} us per commit",
                f"+{extra[width] / best:.1%}", "< 5% of a commit's cost",
            ))
        return rows
    finally:
        actors.stop()
        ray.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--groups", type=int, default=100_000, help="of the service part")
    parser.add_argument("--service", action="store_true", help="also the Ray part")
    parser.add_argument("--only-service", action="store_true")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of the CLI (the best is shown)")
    parser.add_argument("--no-scrape", action="store_true", help="skip the metrics endpoint's scrape")
    parser.add_argument("--leader", action="store_true",
                        help="also tracking's share of a commit at the leader")
    args = parser.parse_args(argv)
    rows: list[tuple[str, ...]] = []
    if args.leader:
        progress("Ray: the leader's CPU per commit")
        rows += leader_rows(args.commits, args.rounds)
    if not args.only_service:
        progress("core: commits with and without lag tracking")
        rows += commit_rows(args.commits, args.rounds)
        share = records_for(args.groups // 8)
        progress(f"core: replay and query of {len(share):,} offsets")
        rows += replay_rows(share, args.rounds)
        rows += query_rows(share)
        rows += window_rows(args.groups // 8)
        progress(f"core: the client's JSON of {args.groups * OFFSETS_PER_GROUP:,} rows")
        rows += client_rows(args.groups)
    if args.service or args.only_service:
        rows += service_rows(args.groups, args.runs, not args.no_scrape)
    print_figures("live lag", ("figure", "value", "baseline", "ratio", "target"), rows)


if __name__ == "__main__":
    main()
