"""`raygroups backup DEST`, `raygroups backup --verify SRC` and `raygroups restore SRC`.

The work is `actors.backup`'s; this module parses, reports and turns a
`BackupError` into one line on stderr and exit code 1 (the message names
the file at fault).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from actors.backup.restore import restore
from actors.backup.take import DEFAULT_MB_PER_S, ActorSource, Throttle, take_backup
from actors.cli.tables import print_table, progress
from log.backup_manifest import BackupError, Manifest, verify_backup

COLUMNS = ["PARTITION", "CUT", "FILES", "BYTES", "SOURCE"]


def add_parsers(commands: Any, common: argparse.ArgumentParser) -> None:
    backup = commands.add_parser(
        "backup", parents=[common],
        help="back the running service up into DEST (a consistent cut, commits go on), or --verify one",
    )
    backup.add_argument("path", metavar="DEST", help="a new or empty directory (with --verify: the backup)")
    backup.add_argument("--verify", action="store_true", help="check the backup at DEST, every file")
    backup.add_argument(
        "--max-mb-per-s", type=float, default=DEFAULT_MB_PER_S,
        help=f"pace of the reads from the service (default {DEFAULT_MB_PER_S:g}; 0: no limit)",
    )
    restore_parser = commands.add_parser(
        "restore", parents=[common], help="start a new service from a backup, on this cluster's nodes",
    )
    restore_parser.add_argument("path", metavar="SRC", help="the backup directory")
    restore_parser.add_argument("--data-dir", required=True, help="the new service's data directory (empty)")
    restore_parser.add_argument("--replication-factor", type=int, help="default: 3 from 3 nodes, 2 on 2")
    restore_parser.add_argument("--min-insync-replicas", type=int, help="default: 2 with 3+ replicas, else 1")


def run_backup(args: argparse.Namespace) -> int:
    try:
        if args.verify:
            manifest = verify_backup(args.path)
            _print(manifest, f"backup {args.path}: verified", args.json)
            return 0
        import ray

        import actors

        client = actors.connect(args.address, namespace=args.namespace)
        def log_sources() -> dict[int, list[Any]]:
            return ray.get(client.controller.log_sources.remote(), timeout=60)  # type: ignore[no-any-return]

        before = client.repartition_status()

        def steady() -> None:
            """One partition count for the whole cut: no repartition under way, none since."""
            now = client.repartition_status()
            if before["running"] or now["running"] or now["version"] != before["version"]:
                raise BackupError("the offsets partitions are being repartitioned: take the backup "
                                  "once `raygroups repartition` is done")

        sources = log_sources()
        factor = max([len(row.get("replicas") or [None]) for row in client.status()] + [1])
        started = time.monotonic()
        with progress(f"backing up {len(sources)} partitions into {args.path}"):
            source = ActorSource(sources, refresh=log_sources)
            throttle = Throttle(args.max_mb_per_s or None)
            manifest = take_backup(
                args.path, source, client.num_partitions, args.namespace, factor, throttle=throttle,
                steady=steady,
            )
        took = time.monotonic() - started
        _print(manifest, f"backup {args.path}: complete in {took:.1f} s", args.json)
        return 0
    except (BackupError, ValueError) as exc:
        print(f"raygroups backup: {exc}", file=sys.stderr)
        return 1


def run_restore(args: argparse.Namespace) -> int:
    from actors.cli.admin import ADMIN_COMMANDS

    try:
        with progress(f"restoring {args.path} into {args.data_dir}"):
            manifest, client = restore(
                args.path, args.data_dir, namespace=args.namespace, address=args.address,
                replication_factor=args.replication_factor, min_insync_replicas=args.min_insync_replicas,
            )
    except BackupError as exc:
        print(f"raygroups restore: {exc}", file=sys.stderr)
        return 1
    partitions = manifest.num_partitions
    print(f"restored {args.path} ({partitions} partitions) into {args.data_dir}", file=sys.stderr)
    return ADMIN_COMMANDS["status"](client, args)


def _print(manifest: Manifest, title: str, as_json: bool) -> None:
    rows = [
        [p.partition, p.cut, len(p.files), sum(f.bytes for f in p.files), p.source]
        for p in manifest.partitions
    ]
    print_table(title, COLUMNS, rows, as_json)


RUNNERS = {"backup": run_backup, "restore": run_restore}
