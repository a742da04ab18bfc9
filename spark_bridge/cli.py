"""`raygroups lag` and `raygroups report`: offset analytics from the command line.

Owns the two analytics subcommands; `register` plugs them into the
`raygroups` command (the `raygroups.commands` entry point, actors/cli/main.py)
with `add_parsers` and `COMMANDS`. Rules:
- Importing this module is cheap (no Spark, no Ray): the heavy imports
  happen when a command runs, so other subcommands start fast.
- Each command starts one Spark session (`session()`: RayDP on the Ray
  cluster, or `--local` for plain local Spark), computes with Spark, and
  stops the session before printing or returning, whatever happens.
- `lag` prints what `kafka-consumer-groups.sh --describe` prints for
  offsets: GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG, "-"
  where the end is unknown.
- Where lag is measured to, in order: `--end-offsets FILE`; else, reading
  the running service, the end offsets its topic registry recorded over
  time (`service_ends`: `lag` uses each partition's latest sample, the
  report's lag over time the samples of each time); else (a `--data-dir`,
  or a registry without samples) the highest committed offset of each
  partition, and the output says which (`args.ends_source`).
- The log is read through the running service's replicas (`replica_reader`:
  no shared filesystem needed), whose handles the caller's `service_log`
  gives (`actors/cli/main.py` passes one: spark_bridge never imports actors).
  `--data-dir` reads a directory instead: offline analysis of a copied log.
- Progress: each long step shows on a terminal (the caller's `progress`),
  as one line per step on a piped stderr; the log is read once into
  Spark's cache, and the line "read N records ... in S s (R/s)" says how
  many records that was at what rate (stderr).
- `lag` reads the log summarized (`spark_bridge.summary`: each partition's
  commits turned into rows per group and day by the read tasks), from the
  service's replicas or a `--data-dir`; so does `report` of a `--data-dir`
  log unless `--end-offsets` is given (lag over time against given end
  offsets needs every commit), its window size chosen from the log's batch
  headers before the read. `report` of the service's log reads every
  record (its window comes from the log's span, and the registry's end
  offsets over time are given ends). On RayDP a summarized read runs in a
  Ray task started before Spark (`prefetch_summary`).
- Output: tables through the caller's `print_table` (`actors/cli/main.py` passes
  `actors.cli.tables.print_table`: a terminal table or plain aligned text,
  never a cut value); notes such as where lag was measured to go to stderr.
  Spark, its JVMs, Ray Data and py4j print nothing else unless `--verbose`
  (`quiet`); their captured output comes with the error when one fails.
- `lag --live` starts no Spark: the rows come from the coordinator's live
  lag (`service_lag`, `actors/cli/live_lag.py`: each leader's tracker,
  against the registry's latest end offsets), the same table and JSON rows
  plus LAG-SECONDS (`lag_seconds`: how long ago the committed offset was the
  end), each partition's HEALTH, and `ahead` where the committed offset is
  past the reported end (lag 0).
- Exit codes: 0 done, 1 no such group, 2 bad input or no usable Java.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from spark_bridge.time_windows import DAY_MS, choose_window_ms

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from spark_bridge.replica_reader import LogSources

LAG_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")
FROM_COMMITS = "highest committed offset per partition (no --end-offsets given)"
EXIT_OK, EXIT_NO_GROUP, EXIT_BAD_INPUT = 0, 1, 2
T = TypeVar("T")
REGISTRY_HISTORY = "end offsets the topic registry recorded, as of each time"
REGISTRY_LATEST = "latest end offset the topic registry recorded per partition"
LIVE_SOURCE = "latest end offset the topic registry recorded per partition (live, from the coordinator)"
LIVE_COLUMNS = (*LAG_COLUMNS, "LAG-SECONDS", "HEALTH")
# The parsed command line -> {partition: [replica handles]} of the running service.
ServiceLog = Callable[[argparse.Namespace], "LogSources"]
# The parsed command line -> the service's end-offset samples, rows (topic, partition, at_ms, end).
ServiceEnds = Callable[[argparse.Namespace], list[tuple[str, int, int, int]]]
# The parsed command line -> the live lag rows of its groups (LAG_KEYS, lag_ms, health, ahead);
# a `json_partitions()` method, if they have one, writes their JSON array, and `group_ids()`
# names their groups.
ServiceLag = Callable[[argparse.Namespace], Sequence[dict[str, Any]]]
# A description -> a context that shows progress while it runs (on a terminal) and yields a
# function replacing the description: actors.cli.tables.progress (spark_bridge never imports actors).
Progress = Callable[[str], AbstractContextManager[Callable[[str], None]]]


class TablePrinter(Protocol):
    """actors.cli.tables.print_table (spark_bridge never imports actors)."""

    def __call__(
        self, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], as_json: bool
    ) -> None: ...


def register(cli: Any) -> None:
    """The `raygroups.commands` plugin (actors.cli.main.CommandLine): `lag` and `report`,
    reading the running service's replicas through the CLI's `log_sources`."""
    add_parsers(
        cli.commands, cli.log_sources, cli.end_offset_history, cli.progress, print_table=cli.print_table,
        service_lag=cli.live_lag,
    )
    cli.runners.update(COMMANDS)


def add_parsers(
    subparsers: Any, service_log: ServiceLog | None = None, service_ends: ServiceEnds | None = None,
    progress: Progress | None = None, *, print_table: TablePrinter, service_lag: ServiceLag | None = None,
) -> None:
    """Add `lag` and `report` to the `raygroups` subcommands; `service_log` finds the
    running service's replicas (without it, only `--data-dir` can be read),
    `service_ends` its recorded end offsets, `progress` shows the long steps and
    `print_table` prints the tables; `service_lag` answers `lag --live`."""
    services = {
        "service_log": service_log, "service_ends": service_ends, "progress": progress,
        "print_table": print_table, "service_lag": service_lag,
    }
    lag = subparsers.add_parser(
        "lag", help="consumer lag per group, topic and partition (Spark)",
        description="Committed offsets and lag, like kafka-consumer-groups.sh --describe, computed by Spark.",
    )
    lag.add_argument("groups", nargs="*", metavar="GROUP", help="only these groups")
    _add_common(lag)
    lag.add_argument("--json", action="store_true", help="print JSON instead of a table")
    lag.add_argument(
        "--live", action="store_true",
        help="the coordinator's live lag (no Spark), with lag in seconds and each partition's health",
    )
    lag.set_defaults(func=lag_command, **services)
    report = subparsers.add_parser(
        "report", help="write offset analytics tables (CSV, Parquet), plots (PNG) and one HTML page",
        description="Every analytics table as CSV and Parquet, plots of lag, commit rate and rebalances "
        "over time, and report.html showing them together.",
    )
    _add_common(report)
    report.add_argument("--out", required=True, help="directory to write the report into")
    report.add_argument(
        "--window-ms", type=int, help="time bucket of rates and plots (default: chosen from the data's span)"
    )
    report.add_argument(
        "--idle-ms", type=int, default=7 * 24 * 3600 * 1000, help="a group idle this long is listed as idle"
    )
    report.add_argument("--top-groups", type=int, default=10, help="groups drawn in the plots")
    report.set_defaults(func=report_command, **services)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir", help="read this offsets log directory (holds offsets-<p>/), not the running service"
    )
    parser.add_argument("--namespace", help="Ray namespace of the running service (default: raygroups)")
    parser.add_argument(
        "--end-offsets", metavar="FILE",
        help="log end offsets, JSON or CSV (default: the service's topic registry, else the highest commits)",
    )
    spark = parser.add_argument_group("spark")
    spark.add_argument("--executors", type=int, default=1)
    spark.add_argument("--executor-cores", type=int, default=1)
    spark.add_argument("--executor-memory", default="1GB")
    spark.add_argument("--ray-address", help="Ray cluster to run Spark on (default: current or local)")
    spark.add_argument(
        "--local", action="store_true", help="plain local Spark instead of RayDP (machines without Ray)"
    )
    spark.add_argument(
        "--verbose", action="store_true", help="show Spark's, the JVM's and Ray Data's own logging"
    )


def lag_command(args: argparse.Namespace) -> int:
    """`raygroups lag [GROUP...] [--live]`."""
    if args.live:
        if args.data_dir is not None or args.end_offsets is not None or args.service_lag is None:
            return CommandError("--live reads the running service: no --data-dir or --end-offsets").report()
        return print_lag(args, args.service_lag(args))
    try:
        rows = _compute(args, lag_rows)
    except CommandError as exc:
        return exc.report()
    return print_lag(args, rows)


def report_command(args: argparse.Namespace) -> int:
    """`raygroups report --out DIR`."""
    try:
        counts = _compute(args, run_report)
    except CommandError as exc:
        return exc.report()
    status = print_report(args, counts)
    print(f"report page: {os.path.abspath(os.path.join(args.out, 'report.html'))}")
    return status


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"lag": lag_command, "report": report_command}


class CommandError(Exception):
    """Bad input or environment: reported on stderr with exit code 2."""

    def report(self) -> int:
        print(f"error: {self}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _compute(args: argparse.Namespace, work: Callable[[SparkSession, argparse.Namespace, Any], T]) -> T:
    """Check the input, start Spark, run `work`, and stop Spark before returning its result."""
    from log.errors import LogError
    from spark_bridge.end_offsets import EndOffsetsError
    from spark_bridge.jvm import JavaVersionError
    from spark_bridge.quiet import quiet_python_logs
    from spark_bridge.spark_session import session

    if args.data_dir is not None and not os.path.isdir(args.data_dir):
        raise CommandError(f"no offsets log directory at {args.data_dir}")
    if args.data_dir is None:
        # Before Spark starts: the service's Ray connection is the one Spark then runs on.
        with show_progress(args, "connecting to the raygroups service"):
            args.sources = _service_sources(args)
    with nullcontext() if args.verbose else quiet_python_logs():
        try:
            ends = _end_offsets(args, latest_only=work is lag_rows)
            window_ms = summary_window(args, ends, for_lag=work is lag_rows)

            def prefetch() -> None:  # on RayDP: the summarized read runs while Spark starts
                args.prefetched = prefetch_summary(args, window_ms)

            with show_progress(args, "starting Spark"):
                started = session(
                    args.executors, args.executor_cores, args.executor_memory,
                    fallback_local=args.local, ray_address=args.ray_address, quiet=not args.verbose,
                    on_ray=prefetch if window_ms is not None else None,
                )
        except (EndOffsetsError, JavaVersionError, LogError) as exc:
            raise CommandError(str(exc)) from exc
        with started as spark:
            try:
                return work(spark, args, ends)
            except LogError as exc:  # the log's own error (file, offset), as a read on the driver raises it
                raise CommandError(str(exc)) from exc


def _end_offsets(args: argparse.Namespace, latest_only: bool) -> Any:
    """What lag is measured to (module docstring); says which in `args.ends_source`."""
    from spark_bridge.end_offsets import EndOffsetHistory, load_end_offsets

    if args.end_offsets:
        args.ends_source = f"file {args.end_offsets}"
        return load_end_offsets(args.end_offsets)
    service_ends: ServiceEnds | None = getattr(args, "service_ends", None)
    if args.data_dir is None and service_ends is not None:
        try:
            rows = service_ends(args)
        except Exception as exc:  # as _service_sources: the service is unreachable
            raise CommandError(f"cannot read end offsets from the raygroups service: {exc}") from exc
        if rows:
            args.ends_source = REGISTRY_LATEST if latest_only else REGISTRY_HISTORY
            return EndOffsetHistory.of(rows)
    args.ends_source = FROM_COMMITS
    return None


def show_progress(
    args: argparse.Namespace, description: str
) -> AbstractContextManager[Callable[[str], None]]:
    """The caller's progress display for a long step on a terminal, one line per stage on a
    piped stderr, or nothing (no display given: a library call)."""
    progress: Progress | None = getattr(args, "progress", None)
    if progress is None:
        return nullcontext(lambda _text: None)
    if sys.stderr.isatty():
        return progress(description)
    return _stage_lines(description)


@contextmanager
def _stage_lines(description: str) -> Iterator[Callable[[str], None]]:
    print(f"{description} ...", file=sys.stderr, flush=True)
    yield lambda text: print(text, file=sys.stderr, flush=True)


def read_log_timed(log_df: DataFrame, records: int | None = None, started: float | None = None) -> int:
    """Read the cached `log_df` once (every later job reads the cache); say how many records
    were read at what rate, on stderr: `records` for a summarized read (which has fewer
    rows), else its rows; timed from `started` (monotonic; default: now). Returns the number
    of rows."""
    started = time.monotonic() if started is None else started
    rows = log_df.count()
    seconds = max(time.monotonic() - started, 1e-9)
    read = rows if records is None else records
    line = f"read {read:,} records of the offsets log in {seconds:.1f} s ({read / seconds:,.0f}/s)"
    if records is not None:
        line += f", summarized into {rows:,} rows"
    print(line, file=sys.stderr, flush=True)
    return rows


def end_offsets_source(args: argparse.Namespace) -> str:
    """Where the lag of this command was measured to, as its output says it."""
    source: str | None = getattr(args, "ends_source", None)
    if source is not None:
        return source
    return f"file {args.end_offsets}" if args.end_offsets else FROM_COMMITS


def _service_sources(args: argparse.Namespace) -> LogSources:
    service_log: ServiceLog | None = getattr(args, "service_log", None)
    if service_log is None:
        raise CommandError("no --data-dir given, and no running service to read the log from")
    try:
        return service_log(args)
    except Exception as exc:  # no cluster, no service, a timeout: all mean the same to the user
        raise CommandError(f"cannot reach the raygroups service (or give --data-dir): {exc}") from exc


def read_log(spark: SparkSession, args: argparse.Namespace) -> DataFrame:
    """The log as a DataFrame: from `--data-dir`, else through the service's replicas."""
    if args.data_dir is not None:
        from spark_bridge.reader import read_offsets_log

        return read_offsets_log(spark, args.data_dir)
    from spark_bridge.replica_reader import read_replicas_log

    return read_replicas_log(spark, args.sources)


def read_cached(
    spark: SparkSession, args: argparse.Namespace, summary_window_ms: int | None
) -> tuple[Any, DataFrame]:
    """The log for the jobs (a DataFrame, or a `jobs.SummarizedLog` by `summary_window_ms`
    windows, prefetched if `_compute` started it) and the cached frame under it, read once."""
    import ray

    from spark_bridge.jobs import SummarizedLog
    from spark_bridge.reader import read_prefetched_summary, read_summarized_log
    from spark_bridge.replica_reader import read_summarized_replicas_here
    from spark_bridge.spark_session import raydp_session

    records = None
    with show_progress(args, "reading the offsets log (Spark)"):
        started = time.monotonic()
        if summary_window_ms is None:
            log = frame = read_log(spark, args).cache()
        else:
            prefetched = getattr(args, "prefetched", None)
            if prefetched is not None and prefetched.window_ms != summary_window_ms:
                prefetched = None
            if prefetched is None and args.data_dir is None and raydp_session(spark) is not None:
                prefetched = prefetch_summary(args, summary_window_ms)  # the replicas' read, now
            if prefetched is not None:
                # Timed from when it started: with Spark, when it was started for it.
                summarized, started = read_prefetched_summary(spark, prefetched), prefetched.started
                records = int(ray.get(prefetched.records))
            elif args.data_dir is not None:  # Spark's executors read the directory
                summarized = read_summarized_log(spark, args.data_dir, summary_window_ms)
                records = _extent(args).records
            else:  # a Spark that cannot read Ray's object store: made in this process
                summarized, records = read_summarized_replicas_here(spark, args.sources, summary_window_ms)
            frame = summarized.frame.cache()
            log = SummarizedLog(frame, summary_window_ms)
        read_log_timed(frame, records, started)
    return log, frame


def summary_window(args: argparse.Namespace, ends: Any, for_lag: bool) -> int | None:
    """The window of the summarized read a command makes; None when it reads every record.
    Lag: one window a day (only the newest commits matter), from either source; a report of a
    `--data-dir` log: its window, when lag is measured against the highest commits (no
    `--end-offsets`). A report of the service's log reads every record: its window comes from
    the log's span, which the replicas would have to read the log to give."""
    if for_lag:
        return DAY_MS
    if args.data_dir is None:
        return None
    return window_or_chosen(args) if ends is None else None


def prefetch_summary(args: argparse.Namespace, window_ms: int) -> Any:
    """Start the summarized read of the command's log in a Ray task (`reader.PrefetchedSummary`):
    the `--data-dir` directory on this node, or the service's partitions through their replicas."""
    if args.data_dir is not None:
        from spark_bridge.reader import prefetch_summarized_log

        return prefetch_summarized_log(args.data_dir, window_ms)
    from spark_bridge.replica_reader import prefetch_summarized_replicas

    return prefetch_summarized_replicas(args.sources, window_ms)


def window_or_chosen(args: argparse.Namespace) -> int:
    """`--window-ms`, else the window size chosen from the `--data-dir` log's span."""
    from spark_bridge.jobs import DEFAULT_WINDOW_MS

    if args.window_ms is not None:
        return int(args.window_ms)
    span = _extent(args).span
    return DEFAULT_WINDOW_MS if span is None else choose_window_ms(*span)


def _extent(args: argparse.Namespace) -> Any:
    """The `--data-dir` log's `reader.log_extent`, scanned once per command (`args.extent`)."""
    from spark_bridge.reader import log_extent

    if getattr(args, "extent", None) is None:
        args.extent = log_extent(args.data_dir)
    return args.extent


# ------------------------------------------------------------------ lag


def lag_rows(spark: SparkSession, args: argparse.Namespace, ends: Any) -> list[dict[str, Any]]:
    """The lag table, sorted by group, topic and partition, as plain dicts."""
    from pyspark.sql import functions as F

    from spark_bridge.jobs import consumer_lag

    # The lag job reads the log twice (commits, ends from commits): read it once, cached,
    # summarized by day (the service's log through its replicas, or a --data-dir).
    log, frame = read_cached(spark, args, summary_window(args, ends, for_lag=True))
    try:
        with show_progress(args, "computing lag (Spark)"):
            lag = consumer_lag(log, ends)
            if args.groups:
                lag = lag.where(F.col("group_id").isin(args.groups))
            rows = [row.asDict() for row in lag.collect()]
    finally:
        frame.unpersist()
    # Sorted here, not by Spark: a global sort costs a sampling job more, and the table is small.
    return sorted(rows, key=lambda row: (row["group_id"], row["topic"], row["topic_partition"]))


def print_lag(args: argparse.Namespace, rows: Sequence[dict[str, Any]]) -> int:
    """The lag table (JSON: with where the end offsets came from); that source on stderr."""
    live = bool(getattr(args, "live", False))
    source = LIVE_SOURCE if live else end_offsets_source(args)
    if args.json:
        # Compact, one partition a line: a service's every group can be a million rows.
        written = getattr(rows, "json_partitions", None)  # live rows, as the leaders wrote them
        partitions = written() if written else _json_lines([_lag_json(r, live) for r in rows])
        print(f'{{"end_offsets": {json.dumps(source)}, "partitions": {partitions}}}')
    else:
        columns = LIVE_COLUMNS if live else LAG_COLUMNS
        args.print_table("consumer lag", columns, [_lag_cells(r, live) for r in rows], False)
        print(f"LOG-END-OFFSET: {source}", file=sys.stderr)
    present = getattr(rows, "group_ids", None)  # live rows: their groups without a dict per row
    if args.groups:
        missing = sorted(set(args.groups) - (present() if present else {row["group_id"] for row in rows}))
    else:
        missing = []
    for group in missing:
        print(f"Consumer group '{group}' has no committed offsets.", file=sys.stderr)
    return EXIT_NO_GROUP if missing else EXIT_OK


LAG_KEYS = ("group_id", "topic", "topic_partition", "current_offset", "log_end_offset", "lag")


def _lag_json(row: dict[str, Any], live: bool = False) -> dict[str, Any]:
    names = ("group", "topic", "partition", "current_offset", "log_end_offset", "lag")
    out = {name: row[key] for name, key in zip(names, LAG_KEYS)}
    if live:
        out.update(lag_seconds=_seconds(row["lag_ms"]), health=row["health"], ahead=row["ahead"])
    return out


def _json_lines(rows: list[dict[str, Any]]) -> str:
    """A JSON array of `rows`, compact, one a line."""
    return "[\n" + ",\n".join(map(_compact, rows)) + "\n]" if rows else "[]"


_compact = json.JSONEncoder(separators=(",", ":")).encode


def _lag_cells(row: dict[str, Any], live: bool = False) -> list[Any]:
    cells = [row[key] for key in LAG_KEYS]
    return [*cells, _seconds(row["lag_ms"]), row["health"]] if live else cells


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


# --------------------------------------------------------------- report


def run_report(spark: SparkSession, args: argparse.Namespace, ends: Any) -> dict[str, int]:
    """Compute and write the report; returns rows per table."""
    from spark_bridge.report import ReportSettings, build_tables, data_window, write_report

    # Seven tables read the same log: read it once, before their jobs run side by side;
    # summarized when lag is measured against the highest commits of a --data-dir log.
    summary_window_ms = summary_window(args, ends, for_lag=False)
    window_ms = args.window_ms if summary_window_ms is None else summary_window_ms
    log, frame = read_cached(spark, args, summary_window_ms)
    try:
        with show_progress(args, "computing the report's tables") as update:
            window_ms, span = data_window(log, ends, window_ms)
            settings = ReportSettings(
                int(time.time() * 1000), window_ms, args.idle_ms, args.top_groups, end_offsets_source(args)
            )
            return write_report(build_tables(log, ends, settings), args.out, settings, span, update)
    finally:
        frame.unpersist()


def print_report(args: argparse.Namespace, counts: dict[str, int]) -> int:
    """Where the report went and what it holds; where lag was measured to on stderr."""
    rows: list[list[Any]] = [[name, count, f"{name}.csv {name}.parquet"] for name, count in counts.items()]
    rows.append(["plots", None, "lag_over_time.png commit_rate.png rebalances.png"])
    rows.append(["page", None, "report.html"])
    print(f"report written to {os.path.abspath(args.out)}")
    args.print_table("report files", ["TABLE", "ROWS", "FILES"], rows, False)
    print(f"lag measured against the {end_offsets_source(args)}", file=sys.stderr)
    return EXIT_OK
