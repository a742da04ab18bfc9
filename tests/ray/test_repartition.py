"""Growing the offsets partition count online (actors/controller/repartition.py) on real
actors: groups keep committing through it, every acknowledged commit is where its group
now lives, members keep their group, and counts that cannot be reached are refused."""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from kafka.structs import OffsetAndMetadata as KpOffset
from kafka.structs import TopicPartition as KpPartition
from kio.schema.errors import ErrorCode

import actors
from coordinator import CoordinatorConfig
from coordinator.errors import Errors
from coordinator.messages import OffsetFetchRequest
from coordinator.routing import partition_for

from tests.gateway.gateway_support import GatewayThread
from tests.gateway.kafka_support import exchange, kio_request
from tests.gateway.test_direct_clients import kp_consumer
from tests.gateway.test_kafka_clients import HEARTBEAT_MS, SESSION_MS, wait_until

NAMESPACE = "raygroups-repartition-test"
DATA_DIRS: list[str] = []  # the running small service's
GROUPS = [f"grow-{i}" for i in range(40)]
WAIT_S = 180.0  # a bound on any wait here: a stuck group fails the test, never hangs it
KP_TIMEOUT_MS = 60_000  # kafka-python's commit retries without end otherwise


@pytest.fixture(scope="module")
def small_service(ray_session: None) -> Iterator[actors.Client]:
    """One service of its own namespace for the module (its tests run in order: the second
    repartitions what the first left)."""
    path = tempfile.mkdtemp(prefix="raygroups-repartition-")
    DATA_DIRS[:] = [path]
    client = actors.start(
        path, num_partitions=2, namespace=NAMESPACE,
        coordinator_config=CoordinatorConfig(
            group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=500
        ),
    )
    try:
        yield client
    finally:
        actors.stop(NAMESPACE)
        shutil.rmtree(path, ignore_errors=True)


class Committers:
    """Threads committing increasing offsets to every group; remembers the acknowledged ones."""

    def __init__(self, client: actors.Client) -> None:
        self.client = client
        self.acked: dict[str, int] = {}
        self.errors: list[Any] = []
        self.raised: list[str] = []  # calls that raised (the client gave up): retried
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(GROUPS[i::4],)) for i in range(4)]

    def __enter__(self) -> Committers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()

    def _run(self, groups: list[str]) -> None:
        offset = 0
        while not self.stop.is_set():
            offset += 1
            for group in groups:
                try:
                    response = self.client.commit_offsets(group, {("orders", 0): offset})
                except Exception as exc:  # not acknowledged: the next round commits again
                    self.raised.append(repr(exc))
                    continue
                error = response.errors()[("orders", 0)]
                if error is Errors.NONE:
                    self.acked[group] = offset
                else:
                    self.errors.append((group, error))

    def wait_for(self, rounds: int) -> None:
        """Until every group has an acknowledged commit of at least `rounds` (bounded)."""
        deadline = time.monotonic() + WAIT_S
        while min((self.acked.get(g, 0) for g in GROUPS), default=0) < rounds:
            assert not self.errors, self.errors[:3]
            assert time.monotonic() < deadline, (
                f"groups behind round {rounds}: "
                f"{[g for g in GROUPS if self.acked.get(g, 0) < rounds][:5]}; raised {self.raised[-3:]}"
            )
            threading.Event().wait(0.01)


def committed(client: actors.Client, group: str) -> int:
    return client.fetch_offsets(group, [("orders", 0)]).offsets()[("orders", 0)]


def test_groups_move_whole_to_their_new_partitions_while_they_commit(small_service: actors.Client) -> None:
    """Refused counts first (nothing changes), then 2 -> 8 under load, then 8 -> 2."""
    client = small_service
    with actors.GroupMember("grow-members", ["orders"], client=client) as member:
        client.create_topic("orders", 4)
        owned = member.wait_for_assignment(timeout=30)
        member.commit({tp: 11 for tp in owned})
        with Committers(client) as load:
            load.wait_for(3)
            refused = ((3, "neither a multiple nor a divisor"), (4096, "max_partitions"), (2, "already has"))
            for count, why in refused:
                with pytest.raises(Exception, match=why):
                    client.repartition(count)
            assert client.repartition_status() == {"partitions": 2, "version": 0, "running": False}
            client.repartition(8, wait=False)
            with pytest.raises(Exception, match="under way"):
                client.repartition(16)
            while (status := client.repartition_status())["running"]:
                load.wait_for(1)
            assert (status["partitions"], status["version"], status["running"]) == (8, 1, False)
            assert status["partitions_ready_s"] >= 0 and status["handoffs_s"] >= 0
            assert {"export_s", "admit_s", "switch_s", "routing_s", "frozen_s"} <= set(status), status
            client.refresh()
            moved_at = dict(load.acked)
            load.wait_for(max(moved_at.values()) + 3)  # every group commits at its new partition
        assert not load.errors, load.errors[:3]
        assert client.num_partitions == 8 and client.routing.previous is None
        for group in GROUPS:
            assert committed(client, group) == load.acked[group], group
        # the member's group moved with its generation: it heartbeats and commits on
        assert member.wait_for_assignment(timeout=30) == owned
        member.commit({tp: 12 for tp in owned})
        fetched = client.fetch_offsets("grow-members", [(tp.topic, tp.partition) for tp in owned])
        assert set(fetched.offsets().values()) == {12}
    served = {row["partition"]: row for row in client.status()}
    assert sorted(served) == list(range(8))
    listed = {g.group_id for g in client.list_groups()}
    assert set(GROUPS) <= listed
    moved = [g for g in GROUPS if partition_for(g, 8) >= 2]
    assert moved, "some groups moved to the new partitions"
    # an old partition no longer serves a group it handed off
    group = moved[0]
    old = ray.get(client.leader(partition_for(group, 2)).handle.remote(OffsetFetchRequest(group, None)))
    assert old.error is Errors.NOT_COORDINATOR

    # and back: 8 -> 2 merges partitions 2..7 into 0 and 1, and retires them
    stale = actors.connect(namespace=NAMESPACE)  # routes by 8 partitions until a call fails
    with Committers(client) as load:
        load.wait_for(max(load.acked.values(), default=0) + 1)
        status = client.repartition(2)
        assert (status["partitions"], status["version"], status["running"]) == (2, 2, False)
        load.wait_for(max(load.acked.values()) + 2)
    assert not load.errors, load.errors[:3]
    for group in GROUPS:
        assert committed(client, group) == load.acked[group], group
    assert sorted(row["partition"] for row in client.status()) == [0, 1]
    assert set(GROUPS) <= {g.group_id for g in client.list_groups()}
    retired = sorted(os.path.basename(p) for p in glob.glob(os.path.join(DATA_DIRS[0], "retired-v2-*")))
    assert retired == [f"retired-v2-offsets-{p}" for p in range(2, 8)], retired
    # a call sent to a partition the shrink retired is answered by the group's new owner
    group = next(g for g in GROUPS if stale.partition_for(g) >= 2)
    answer = stale.commit_offsets(group, {("orders", 0): load.acked[group] + 1})
    assert answer.errors() == {("orders", 0): Errors.NONE}
    assert stale.partition_for(group) == partition_for(group, 2)
    assert committed(client, group) == load.acked[group] + 1


def test_fanned_out_admin_calls_answer_every_group_once_through_a_grow_and_a_shrink(
    small_service: actors.Client,
) -> None:
    """list_groups, describe_groups and lag (every group, and named ones; rows and JSON) asked over and over
    by a client whose routing goes stale, while the count goes N -> 2N -> N: every answer
    names each group exactly once, described by its owner (actors/client/fanout.py)."""
    client = small_service
    count = client.num_partitions
    for group in GROUPS:
        client.commit_offsets(group, {("orders", 1): 1})
    asker = actors.connect(namespace=NAMESPACE, timeout_s=WAIT_S)
    answers: dict[str, int] = {}
    failures: list[str] = []
    done = threading.Event()

    def check(name: str, ids: list[str]) -> None:
        mine = [g for g in ids if g in set(GROUPS)]
        if sorted(mine) != sorted(GROUPS):
            missing, twice = set(GROUPS) - set(mine), {g for g in mine if mine.count(g) > 1}
            failures.append(f"{name}: missing {sorted(missing)[:3]}, twice {sorted(twice)[:3]}")
        answers[name] = answers.get(name, 0) + 1

    def ask(name: str, call: Any, ids: Any) -> None:
        while not done.is_set():
            try:
                check(name, ids(call()))
            except Exception as exc:  # the test fails on any
                failures.append(f"{name}: {exc!r:.300}")

    def described() -> Any:
        groups = asker.describe_groups(GROUPS)
        wrong = [d for d in groups if d.error is not Errors.NONE]
        assert not wrong, wrong[:2]
        return groups

    def listed_async() -> Any:
        return asyncio.run(asker.list_groups_async())

    def lag_json() -> Any:  # `raygroups lag --live --json`'s question: the leaders' text per group
        return asyncio.run(asker.lag_json_async())

    ids = lambda groups: [g.group_id for g in groups]  # noqa: E731
    calls = {
        "list": (asker.list_groups, ids), "list_async": (listed_async, ids), "describe": (described, ids),
        "lag": (asker.lag, ids), "lag_named": (lambda: asker.lag(GROUPS, partitions=False), ids),
        "lag_json": (lag_json, lambda texts: [group_id for group_id, _ in texts]),
    }
    threads = [threading.Thread(target=ask, args=(name, *c)) for name, c in calls.items()]
    for thread in threads:
        thread.start()

    def answered_after(before: dict[str, int]) -> None:
        """Until every caller has answered once more than `before` (bounded)."""
        deadline = time.monotonic() + WAIT_S
        while any(answers.get(name, 0) <= before.get(name, 0) for name in calls) and not failures:
            assert time.monotonic() < deadline, answers
            threading.Event().wait(0.01)

    try:
        answered_after({})
        assert client.repartition(2 * count)["partitions"] == 2 * count
        assert client.repartition(count)["partitions"] == count
        for _ in range(2):  # each caller's last answer is of a call begun after the shrink
            answered_after(dict(answers))
    finally:
        done.set()
        for thread in threads:
            thread.join()
    assert not failures, failures[:5]
    assert asker.num_partitions == count, "the shrink's end reached the asking client"


def test_a_kafka_consumer_on_the_direct_path_follows_its_group_to_its_new_partition(
    small_service: actors.Client,
) -> None:
    client = small_service
    count = client.num_partitions
    group = next(g for g in (f"kp-grow-{i}" for i in range(100)) if partition_for(g, 2 * count) >= count)
    client.create_topic("kp-orders", 2)
    gateway = GatewayThread(actors.connect(namespace=NAMESPACE))  # its routing goes stale
    consumer = kp_consumer(
        "kp-orders", bootstrap_servers=gateway.bootstrap, group_id=group, enable_auto_commit=False,
        session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
    )
    try:
        wait_until(lambda: len(consumer.assignment()) == 2, lambda: consumer.poll(100), "assigned")
        consumer.commit({KpPartition("kp-orders", 0): KpOffset(5, "", -1)}, timeout_ms=KP_TIMEOUT_MS)
        client.repartition(client.num_partitions * 2)
        assert client.partition_for(group) != partition_for(group, client.num_partitions // 2), "it moved"
        # the consumer re-finds its coordinator
        consumer.commit({KpPartition("kp-orders", 0): KpOffset(6, "", -1)}, timeout_ms=KP_TIMEOUT_MS)
        assert consumer.committed(KpPartition("kp-orders", 0), timeout_ms=KP_TIMEOUT_MS) == 6
        fetched = client.fetch_offsets(group, [("kp-orders", 0)]).offsets()
        assert fetched == {("kp-orders", 0): 6}
    finally:
        consumer.close()
        gateway.close()


def test_a_gateway_whose_routing_predates_a_shrink_answers_every_group_without_waiting(
    small_service: actors.Client,
) -> None:
    """The gateway's ListGroups and DescribeGroups (gateway/handlers/admin.py) by a routing
    older than a shrink: the partitions it retired are not waited for (their groups are
    answered by their new owners), each group once."""
    client = small_service
    names = [f"gw-shrink-{i}" for i in range(12)]
    for group in names:  # (and every partition serves)
        client.commit_offsets(group, {("orders", 0): 3})
    if client.num_partitions < 4:  # the module's tests run alone
        client.repartition(4)
    count = client.num_partitions
    gateway = GatewayThread(actors.connect(namespace=NAMESPACE), direct=False)  # routes by `count`
    try:
        client.repartition(count // 2)
        listed = exchange(gateway, kio_request(16, 4, states_filter=[]))
        assert listed.error_code == ErrorCode.none
        ids = [g.group_id for g in listed.groups]
        assert sorted(g for g in ids if g in names) == sorted(names), "each group once"
        described = exchange(gateway, kio_request(15, 5, groups=names, include_authorized_operations=False))
        assert [(g.group_id, g.error_code) for g in described.groups] == [(g, ErrorCode.none) for g in names]
    finally:
        gateway.close()


def test_a_source_is_pre_copied_while_its_groups_commit(small_service: actors.Client) -> None:
    """With `precopy_min_groups` 1 every source is pre-copied (docs/design-precopy.md): its
    moving groups are copied while they commit and frozen only for the last delta; every
    acknowledged commit is at the group's new partition."""
    client = small_service
    client.set_config(precopy_min_groups=1)
    try:
        deadline = time.monotonic() + WAIT_S
        while ray.get(client.controller.get_settings.remote()).precopy_min_groups != 1:
            assert time.monotonic() < deadline, "the controller never took the setting"
            threading.Event().wait(0.01)
        count = client.num_partitions
        with Committers(client) as load:
            load.wait_for(1)
            status = client.repartition(2 * count)
            assert status["copy_rounds"] >= 1 and status["copy_s"] >= 0, status
            assert {"delta_s", "switch_s", "frozen_s"} <= set(status), status
            load.wait_for(max(load.acked.values()) + 2)
        assert not load.errors, load.errors[:3]
        for group in GROUPS:
            assert committed(client, group) == load.acked[group], group
    finally:
        client.set_config(precopy_min_groups=10_000)
