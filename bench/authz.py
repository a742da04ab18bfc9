"""Cost of Kafka's authorization per request: `python -m bench.authz [--kafka]`.

Issue 49's target: authorizing a request costs under 5% of what the request
costs, with 1,000 ACLs defined. Two measures, each against its baseline in
the same run, with an Authorizer of `--acls` bindings (LITERAL and PREFIXED,
on groups and topics, for other principals, so every lookup walks a
realistic index) and two allowing `User:bench` its groups and topic:
- pure (the default; no Ray, no log): the shard's CPU time for an
  OffsetCommit of one partition (the commonest request) and a Heartbeat,
  and `coordinator.authz.check` of the same requests; the ratio is the
  check's time over the shard's;
- `--kafka`: on a running leader. An embedded service of one partition
  whose leader's Kafka listener has SASL/PLAIN (so the authorizer on), the
  ACLs created through the service; confluent-kafka consumers (bench.gateway's
  worker processes, `--processes` of them, a thread and a consumer per
  group, `--callers` groups) logged in as `bench` commit 1 and 100
  partitions synchronously on the direct path (bootstrapped at the leader's
  listener, their coordinator). Rounds alternate (their order too) between
  the authorizer off and on; the one thing that differs is the listener's
  guard, which connections read per request (gateway.connection): taken
  away (as on a listener without SASL or TLS: no check at all) and put back,
  in the leader through Ray's `__ray_call__`. Printed: commits/s and the
  leader process's CPU per commit (user + system, the steadier figure on a
  shared machine), with the ratios on over off, and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import ray
from confluent_kafka import KafkaError, KafkaException

from actors.core.settings import KafkaListenerSettings
from bench.embedded import embedded_service
from bench.gateway import TOPIC, WIDE_COMMIT, ConfluentProcesses, commit_now, confluent_consumers
from bench.table import print_figures, progress
from coordinator import CoordinatorConfig, Shard
from coordinator.acl import AclBinding, Authorizer, Operation, PatternType, Permission, ResourceType
from coordinator.authz import check
from coordinator.messages import HeartbeatRequest, OffsetCommitPartition, OffsetCommitRequest

USER, PASSWORD = "bench", "bench-password"


def acls(count: int, topic: str = "orders") -> list[AclBinding]:
    """`count` bindings for other principals, and Read for `User:bench` on groups `bench-*`
    and on `topic`."""
    made = []
    for i in range(count):
        kind = ResourceType.GROUP if i % 2 else ResourceType.TOPIC
        pattern = PatternType.PREFIXED if i % 5 == 0 else PatternType.LITERAL
        made.append(AclBinding(kind, f"team-{i}.", pattern, f"User:user-{i}", "*", Operation.READ,
                               Permission.ALLOW))
    read, allow = Operation.READ, Permission.ALLOW
    made += [AclBinding(ResourceType.GROUP, "bench-", PatternType.PREFIXED, "User:bench", "*", read, allow),
             AclBinding(ResourceType.TOPIC, topic, PatternType.LITERAL, "User:bench", "*", read, allow)]
    return made


def per_op_us(n: int, fn: Callable[[int], object]) -> float:
    start = time.process_time()
    for i in range(n):
        fn(i)
    return (time.process_time() - start) / n * 1e6


def pooled(
    rounds: int, ways: dict[str, Callable[[], tuple[int, float]]], process: psutil.Process
) -> dict[str, tuple[float, float]]:
    """Per way (calls/s, `process`'s CPU us per call), pooled over `rounds` alternating rounds."""
    totals = {name: [0, 0.0, 0.0] for name in ways}
    for round_number in range(rounds):
        order = list(ways.items())
        for name, way in order if round_number % 2 == 0 else reversed(order):
            cpu = process.cpu_times()
            done, seconds = way()
            after = process.cpu_times()
            totals[name][0] += done
            totals[name][1] += seconds
            totals[name][2] += (after.user - cpu.user) + (after.system - cpu.system)
    return {name: (done / seconds, cpu / done * 1e6) for name, (done, seconds, cpu) in totals.items()}


def pure(args: argparse.Namespace) -> None:
    authorizer = Authorizer(acls(args.acls))
    shard = Shard()
    commits = [OffsetCommitRequest(f"bench-{i % 100}", (OffsetCommitPartition("orders", 0, i),))
               for i in range(1000)]
    beat = HeartbeatRequest("bench-0", 1, "nobody")
    shard_commit = per_op_us(args.n, lambda i: shard.handle(commits[i % 1000], i, i))
    check_commit = per_op_us(args.n, lambda i: check(authorizer, "User:bench", "10.0.0.1", commits[i % 1000]))
    shard_beat = per_op_us(args.n, lambda i: shard.handle(beat, i, i))
    check_beat = per_op_us(args.n, lambda i: check(authorizer, "User:bench", "10.0.0.1", beat))
    allowed = check(authorizer, "User:bench", "h", commits[0]).send is commits[0]
    assert allowed, "the bench principal is allowed"
    rows = [
        ["OffsetCommit, 1 partition: shard", f"{shard_commit:.1f}", "us", "1.00"],
        ["  authorization", f"{check_commit:.1f}", "us", f"{check_commit / shard_commit:.3f}"],
        ["Heartbeat: shard", f"{shard_beat:.1f}", "us", "1.00"],
        ["  authorization", f"{check_beat:.1f}", "us", f"{check_beat / shard_beat:.3f}"],
    ]
    print_figures(f"authorization per request, {len(authorizer.literal) + len(authorizer.prefixed)} "
                  f"indexed names, {args.acls + 2} ACLs", ("figure", "CPU", "unit", "x shard"), rows)


# ------------------------------------------------------------ --kafka: a running leader


def _set_guard(actor: Any, on: bool) -> None:
    """In the leader (`__ray_call__`): its listener's guard kept aside (off) or put back (on)."""
    core = actor.kafka._listener.served.core  # with SASL, loaded at start (gateway.direct.listener)
    kept = vars(core).setdefault("bench_guard", core.guard)
    assert kept is not None, "the listener has no authorizer: SASL is off"
    core.guard = kept if on else None


def switch(leader: Any, on: bool) -> None:
    ray.get(leader.__ray_call__.remote(_set_guard, on))


def check_switch(leader: Any, bootstrap: str, login: dict[str, str]) -> None:
    """The switch works: a group no ACL names is committed to with the authorizer off and
    refused with it on."""
    stranger = confluent_consumers(bootstrap, ["unlisted"], login)[0]
    try:
        for on in (False, True):
            switch(leader, on)
            try:
                commit_now(stranger, 0, 1)
                refused = False
            except KafkaException as exc:
                refused = exc.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
            assert refused is on, f"authorizer {'on' if on else 'off'}: refused {refused}"
    finally:
        stranger.close()


def kafka(args: argparse.Namespace) -> None:
    load = os.getloadavg()
    config = CoordinatorConfig(group_initial_rebalance_delay_ms=0)
    with tempfile.TemporaryDirectory(prefix="raygroups-bench-users-") as users_dir:
        users = Path(users_dir) / "users"
        users.write_text(f"{USER}:{PASSWORD}\n")
        listener = KafkaListenerSettings(sasl_users_file=str(users))
        # ray_credentials off: the baseline is the Kafka listener's own check; the Ray path is bench.raycreds.
        with embedded_service(2, config, num_partitions=1, kafka_listener=listener,
                              ray_credentials=False) as (client, _):
            client.create_acls(acls(args.acls, TOPIC))
            client.commit_offsets("bench-warm-up", {(TOPIC, 0): 0})  # waits for the leader
            client.refresh()
            leader = client.leader(0)
            address = ray.get(leader.kafka_listener.remote())
            process = psutil.Process(ray.get(leader.info.remote())["pid"])
            progress(f"leader pid {process.pid}")
            login = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                     "sasl.username": USER, "sasl.password": PASSWORD}
            groups = [f"bench-{c}" for c in range(args.callers)]
            bootstrap = f"{address['host']}:{address['port']}"
            check_switch(leader, bootstrap, login)
            consumers = ConfluentProcesses(bootstrap, groups, args.processes, login)
            try:
                rows = kafka_rows(args, leader, consumers, process)
            finally:
                consumers.close()
    print_figures(
        f"OffsetCommit on the direct path, SASL/PLAIN leader, authorizer off and on ({args.acls + 2} ACLs); "
        f"{args.callers} confluent-kafka consumers in {args.processes} processes, {args.rounds} rounds "
        f"of {args.calls:,} commits each way",
        ("figure", "commits/s", "x off", "leader CPU us/commit", "x off"), rows,
        notes=[f"load average at the start {load[0]:.1f}, at the end {os.getloadavg()[0]:.1f}"],
    )


def kafka_rows(args: argparse.Namespace, leader: Any, consumers: ConfluentProcesses,
               process: psutil.Process) -> list[list[str]]:
    def commits(name: str, on: bool, calls: int) -> Callable[[], tuple[int, float]]:
        def way() -> tuple[int, float]:
            switch(leader, on)
            return asyncio.run(consumers.rate(name, calls, args.callers))

        return way

    rows = []
    for name in ("OffsetCommit", f"OffsetCommit x{WIDE_COMMIT}"):
        for on in (True, False):  # warm-up: logins, the coordinator found, the decisions made
            commits(name, on, args.callers * 4)()
        figures = pooled(args.rounds, {"off": commits(name, False, args.calls),
                                       "on": commits(name, True, args.calls)}, process)
        (rate, cpu), (base_rate, base_cpu) = figures["on"], figures["off"]
        rows.append([f"{name}: authorizer off", f"{base_rate:.0f}", "1.00", f"{base_cpu:.0f}", "1.00"])
        rows.append([f"  on, {args.acls + 2:,} ACLs", f"{rate:.0f}", f"{rate / base_rate:.3f}", f"{cpu:.0f}",
                     f"{cpu / base_cpu:.3f}"])
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--acls", type=int, default=1_000)
    parser.add_argument("-n", type=int, default=50_000, help="pure: checks per figure")
    parser.add_argument("--kafka", action="store_true", help="on a running leader's Kafka listener")
    parser.add_argument("--calls", type=int, default=4_000, help="--kafka: commits per round")
    parser.add_argument("--callers", type=int, default=64, help="--kafka: consumers, a group each")
    parser.add_argument("--processes", type=int, default=4, help="--kafka: the consumers' processes")
    parser.add_argument("--rounds", type=int, default=4, help="--kafka: alternations of off and on")
    parser.add_argument("--quick", action="store_true", help="--kafka: a smoke run, few calls, one round")
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.rounds = 400, 1
    if args.kafka:
        kafka(args)
    else:
        pure(args)


if __name__ == "__main__":
    main()
