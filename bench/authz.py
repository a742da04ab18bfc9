"""Cost of Kafka's authorization per request, pure (no Ray, no log): `python -m bench.authz`.

Issue 49's target: authorizing a request costs under 5% of what the request
costs, with 1,000 ACLs defined. Measured here in the same run: the shard's
CPU time for an OffsetCommit of one partition (the commonest request) and a
Heartbeat, and `coordinator.authz.check` of the same requests against an
Authorizer of `--acls` bindings (LITERAL and PREFIXED, on groups and
topics, for other principals, so every lookup walks a realistic index); the
ratio is the check's time over the shard's. What a request costs end to end
(a Ray call or a Kafka frame, about 1 ms of CPU) is far above the shard's,
so this ratio is an upper bound of the share on either path.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from bench.table import print_figures
from coordinator import Shard
from coordinator.acl import AclBinding, Authorizer, Operation, PatternType, Permission, ResourceType
from coordinator.authz import check
from coordinator.messages import HeartbeatRequest, OffsetCommitPartition, OffsetCommitRequest


def acls(count: int) -> list[AclBinding]:
    made = []
    for i in range(count):
        kind = ResourceType.GROUP if i % 2 else ResourceType.TOPIC
        pattern = PatternType.PREFIXED if i % 5 == 0 else PatternType.LITERAL
        made.append(AclBinding(kind, f"team-{i}.", pattern, f"User:user-{i}", "*", Operation.READ,
                               Permission.ALLOW))
    read, allow = Operation.READ, Permission.ALLOW
    made += [AclBinding(ResourceType.GROUP, "bench-", PatternType.PREFIXED, "User:bench", "*", read, allow),
             AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:bench", "*", read, allow)]
    return made


def per_op_us(n: int, fn: Callable[[int], object]) -> float:
    start = time.process_time()
    for i in range(n):
        fn(i)
    return (time.process_time() - start) / n * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--acls", type=int, default=1_000)
    parser.add_argument("-n", type=int, default=50_000)
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    main()
