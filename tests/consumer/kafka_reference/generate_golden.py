"""Record Kafka's own assignor results for the golden cases (a developer tool, not a test).

Needs a JDK and Kafka's sources. Compile Kafka's assignors with
`KafkaAssignorDriver.java`, then run this with the class path:

    python -m tests.consumer.kafka_reference.generate_golden --classpath /tmp/kafka-assignors/out

where the class path holds, compiled from apache/kafka (the commit is written
into the JSON): clients `common/Uuid.java` and `common/annotation/InterfaceStability.java`,
server-common `server/common/TopicIdPartition.java`, every file of
group-coordinator-api `api/assignor/`, group-coordinator `assignor/{AssignorHelpers,
RangeAssignor,RangeSet,UniformAssignor,UniformHeterogeneousAssignmentBuilder,
UniformHomogeneousAssignmentBuilder}.java` and `modern/MemberAssignmentImpl.java`,
plus two stubs: `org.apache.kafka.common.errors.ApiException extends RuntimeException`
and a no-op `org.slf4j.Logger` / `LoggerFactory`.
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
from pathlib import Path
from uuid import UUID

from coordinator.consumer.assignors import ASSIGNORS, PartitionAssignorError, TopicMetadata

from tests.consumer.kafka_reference.golden_cases import GoldenCase, encode_result, generate_case

HERE = Path(__file__).parent
GOLDEN = HERE / "assignor_golden.json"


def kafka_string(topic_id: UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def driver_input(cases: list[GoldenCase]) -> str:
    lines = []
    for case in cases:
        lines.append(f"CASE {case.seed} {case.assignor} {case.group.subscription_type.name}")
        lines.extend(f"TOPIC {kafka_string(t)} {count}" for t, count in case.counts.items())
        for member in case.group.members:
            subscribed = ",".join(kafka_string(t) for t in member.subscribed_topic_ids) or "-"
            lines.append(f"MEMBER {member.member_id} {member.instance_id or '-'} {subscribed}")
            for topic_id, partitions in member.assignment.items():
                listed = ",".join(str(p) for p in sorted(partitions))
                lines.append(f"ASSIGN {member.member_id} {kafka_string(topic_id)} {listed}")
        lines.append("END")
    return "\n".join(lines) + "\n"


def parse_driver_output(text: str, cases: dict[int, GoldenCase]) -> dict[int, dict[str, str] | None]:
    results: dict[int, dict[str, str] | None] = {}
    current: dict[str, dict[UUID, frozenset[int]]] = {}
    seed = -1
    for line in text.splitlines() + ["RESULT -1"]:
        kind, _, rest = line.partition(" ")
        if kind in ("RESULT", "ERROR"):
            if seed >= 0 and results.get(seed, {}) is not None:
                results[seed] = encode_result(cases[seed], current)
            seed, current = int(rest), {}
            if kind == "ERROR":
                results[seed] = None
        else:
            member_id, _, assignment = rest.rpartition(" ")
            current[member_id] = {
                UUID(bytes=base64.urlsafe_b64decode(t + "==")): frozenset(int(p) for p in ps.split(","))
                for t, _, ps in (entry.partition(":") for entry in assignment.split(";") if entry)
            }
    return results


def ours(case: GoldenCase) -> dict[str, str] | None:
    topics = {t: TopicMetadata(t, f"t{i}", count) for i, (t, count) in enumerate(case.counts.items())}
    try:
        return encode_result(case, ASSIGNORS[case.assignor].assign(case.group, topics).members)
    except PartitionAssignorError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--classpath", required=True)
    parser.add_argument("--kafka-commit", default="1eb7644349cb07139d6a3c1ad1986979647cac99")
    parser.add_argument("--cases", type=int, default=400)
    args = parser.parse_args()
    cases = {seed: generate_case(seed) for seed in range(args.cases)}
    run = subprocess.run(
        [
            "java",
            "-Dfile.encoding=UTF-8",
            "-Dsun.stdout.encoding=UTF-8",
            "-cp",
            args.classpath,
            "KafkaAssignorDriver",
        ],
        input=driver_input(list(cases.values())).encode(),
        capture_output=True,
        check=True,
    )
    kafka = parse_driver_output(run.stdout.decode(), cases)
    differing = [seed for seed, case in cases.items() if ours(case) != kafka[seed]]
    print(f"{len(cases)} cases, {len(differing)} differ from Kafka: {differing[:20]}")
    payload = {"kafka_commit": args.kafka_commit, "results": {str(s): r for s, r in kafka.items()}}
    GOLDEN.write_text(json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
