"""Consumer groups at the sizes the issue names, on the pure core with a manual clock:
10,000 members joining one group, and a regex matching 10,000 topics. The assertions are
about correctness (every partition assigned exactly once, epochs consistent, replaying the
written records gives the live groups), never about time.

The 10,000 members join with Kafka 4.3's assignment batching on (KIP-1263,
`group_consumer_assignment_interval_ms`); without it every join runs the assignor over
every member (quadratic: minutes on this machine, see the heartbeat module's docstring).
"""

from __future__ import annotations

from collections import Counter
from uuid import UUID

from coordinator.consumer.group import ConsumerGroupState
from coordinator.consumer.reconciliation import MemberState
from coordinator.consumer.subscriptions import topic_id_for
from coordinator.messages import ConsumerGroupTopicPartitions

from tests.consumer.heartbeat_harness import GROUP, Driver, beat, join, owned

MEMBERS, PARTITIONS, INTERVAL_MS = 10_000, 20_000, 1_000
T = topic_id_for("t")
Owned = tuple[ConsumerGroupTopicPartitions, ...]


def test_ten_thousand_members_join_and_each_partition_is_owned_once() -> None:
    driver = Driver({"t": PARTITIONS}, group_consumer_assignment_interval_ms=INTERVAL_MS)
    ids = [f"member-{i:05d}" for i in range(MEMBERS)]
    epochs: dict[str, int] = {}
    owns: dict[str, Owned] = {}
    for member_id in ids:
        joined = driver.ok(join(member_id, "t"))
        epochs[member_id], owns[member_id] = joined.member_epoch, joined.assignment or ()
    group = driver.shard.consumer_groups[GROUP]
    # Batched: the first join ran the assignor (epoch 1), the others wait for the next run.
    assert group.group_epoch == MEMBERS and group.assignment_epoch == 1
    assert group.state is ConsumerGroupState.ASSIGNING
    assert len(owned(owns[ids[0]])[T]) == PARTITIONS

    settle(driver, epochs, owns, INTERVAL_MS)

    assert group.state is ConsumerGroupState.STABLE
    assert group.assignment_epoch == group.group_epoch == MEMBERS
    assert set(epochs.values()) == {group.group_epoch}
    assert all(m.state is MemberState.STABLE for m in group.members.values())
    assert owned_once(owns) == {(T, p) for p in range(PARTITIONS)}
    assert {len(owned(owns[m])[T]) for m in ids} == {PARTITIONS // MEMBERS}
    # What the members were told is what the group holds, and its partition epochs.
    for member_id in ids[:: MEMBERS // 100]:
        assert group.members[member_id].assigned_partitions == {T: set(owned(owns[member_id])[T])}
    assert set(group.partition_epochs[T].values()) == {group.group_epoch}
    driver.assert_replay_equals_live()


def settle(driver: Driver, epochs: dict[str, int], owns: dict[str, Owned], interval_ms: int = 0) -> None:
    """Heartbeat every member with what it owns, a round per interval, until nobody moves."""
    for _ in range(5):
        driver.advance(interval_ms)
        moved = 0
        for member_id in epochs:
            answer = driver.ok(beat(member_id, epochs[member_id], owns[member_id]))
            moved += answer.member_epoch != epochs[member_id] or answer.assignment is not None
            epochs[member_id] = answer.member_epoch
            if answer.assignment is not None:
                owns[member_id] = answer.assignment
        owned_once(owns)  # at every step, not only at the end
        if not moved:
            return
    raise AssertionError("the group does not settle")


def owned_once(owns: dict[str, Owned]) -> set[tuple[UUID, int]]:
    """Every partition the members own, checking that none is owned twice."""
    owners = Counter((t, p) for owned_now in owns.values() for t, ps in owned(owned_now).items() for p in ps)
    assert set(owners.values()) <= {1}, "a partition owned twice"
    return set(owners)


def test_a_regex_matching_ten_thousand_topics_is_resolved_assigned_and_follows_new_topics() -> None:
    topics = {f"events-{i:05d}": 2 for i in range(10_000)} | {f"other-{i}": 1 for i in range(50)}
    driver = Driver(topics)
    regex = "events-[0-9]+"
    epochs: dict[str, int] = {}
    owns: dict[str, Owned] = {}
    for member_id in ("A", "B"):
        joined = driver.ok(join(member_id, subscribed_topic_names=None, subscribed_topic_regex=regex))
        epochs[member_id], owns[member_id] = joined.member_epoch, joined.assignment or ()
    group = driver.shard.consumer_groups[GROUP]
    assert len(group.resolved_regular_expressions[regex].topics) == 10_000
    assert len(group.subscription_metadata) == 10_000
    settle(driver, epochs, owns)
    matching = {topic_id_for(name) for name in topics if name.startswith("events-")}
    assert owned_once(owns) == {(t, p) for t in matching for p in range(2)}
    assert {sum(map(len, owned(o).values())) for o in owns.values()} == {10_000}

    epoch = group.group_epoch
    driver.topics(topics | {"events-99999": 4, "unrelated": 3})
    assert group.group_epoch == epoch + 1, "a new matching topic bumps the group epoch"
    assert "events-99999" in group.resolved_regular_expressions[regex].topics
    driver.topics(topics | {"events-99999": 4, "unrelated": 3, "more-unrelated": 1})
    assert group.group_epoch == epoch + 1, "a topic the regex does not match changes nothing"
    settle(driver, epochs, owns)
    new = topic_id_for("events-99999")
    assert owned_once(owns) == {(t, p) for t in matching for p in range(2)} | {(new, p) for p in range(4)}
    assert set(epochs.values()) == {epoch + 1}
    driver.assert_replay_equals_live()


def test_batched_assignment_runs_once_per_interval_for_every_change_meanwhile() -> None:
    driver = Driver({"t": 4}, group_consumer_assignment_interval_ms=INTERVAL_MS)
    a = driver.ok(join("A", "t"))  # a new group: the assignor runs at once
    assert (a.member_epoch, len(owned(a.assignment)[T])) == (1, 4)
    b = driver.ok(join("B", "t"))
    c = driver.ok(join("C", "t"))
    group = driver.shard.consumer_groups[GROUP]
    # Within the interval: the epoch moves, the target waits; B and C are members with nothing yet.
    assert (group.group_epoch, group.assignment_epoch) == (3, 1)
    assert (b.member_epoch, owned(b.assignment), c.member_epoch) == (1, {}, 1)
    assert driver.ok(beat("A", 1, a.assignment)).assignment is None, "A keeps everything meanwhile"
    driver.advance(INTERVAL_MS - 1)
    assert driver.ok(beat("B", 1, ())).member_epoch == 1
    driver.advance(1)
    # The first heartbeat after the interval runs the assignor once, for B and C together.
    runs_before = sum(
        r.key.__class__.__name__ == "ConsumerGroupTargetAssignmentMetadataKey" for r in driver.log
    )
    driver.ok(beat("B", 1, ()))
    assert group.assignment_epoch == 3
    written = [type(r.key).__name__ for r in driver.last]
    assert written.count("ConsumerGroupTargetAssignmentMetadataKey") == 1
    assert sum(len(group.target_assignment[m][T]) for m in "ABC") == 4
    assert runs_before == 1
    driver.assert_replay_equals_live()
