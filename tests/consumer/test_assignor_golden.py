"""Our uniform and range assignors give Kafka's own results on 400 random cases.

`kafka_reference/assignor_golden.json` holds what Kafka's `UniformAssignor`
and `RangeAssignor` (apache/kafka at the commit recorded in the file) returned
for the cases `golden_cases.generate_case(seed)` builds; `generate_golden.py`
recorded them by running Kafka's classes. `None` is Kafka's
PartitionAssignorException.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coordinator.consumer.assignors import ASSIGNORS, PartitionAssignorError, TopicMetadata

from tests.consumer.kafka_reference.golden_cases import encode_result, generate_case

GOLDEN = json.loads((Path(__file__).parent / "kafka_reference" / "assignor_golden.json").read_text())
SEEDS = sorted(int(seed) for seed in GOLDEN["results"])


def test_golden_file_covers_every_kind_of_case() -> None:
    kinds = {(generate_case(s).assignor, generate_case(s).group.subscription_type) for s in SEEDS[:40]}
    assert len(kinds) == 4
    assert len(SEEDS) >= 400


@pytest.mark.parametrize("seed", SEEDS)
def test_same_result_as_kafka(seed: int) -> None:
    case = generate_case(seed)
    topics = {t: TopicMetadata(t, f"t{i}", count) for i, (t, count) in enumerate(case.counts.items())}
    expected = GOLDEN["results"][str(seed)]
    if expected is None:
        with pytest.raises(PartitionAssignorError):
            ASSIGNORS[case.assignor].assign(case.group, topics)
        return
    result = ASSIGNORS[case.assignor].assign(case.group, topics).members
    assert encode_result(case, result) == expected
