"""The coordinator on a real local Ray cluster: every request through the
client, parking across actor calls, failover, reassignment, controller
restart and epoch fencing."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import ray

import actors
from actors.client.client import Client, controller_handle
from actors.core.settings import ServiceSettings
from coordinator import Errors
from coordinator.messages import MemberIdentity, SyncGroupRequest

from tests.ray.helpers import form_group, group_state, join, join_request, kill_and_wait_dead, wait_until

pytestmark = pytest.mark.ray
# Sessions that outlast a slow, loaded machine where a test needs no expiry.
SLOW_SESSION_MS = 20_000


def groups_on_distinct_partitions(client: Client, n: int) -> list[str]:
    chosen: dict[int, str] = {}
    i = 0
    while len(chosen) < n:
        chosen.setdefault(client.partition_for(f"group-{i}"), f"group-{i}")
        i += 1
    return list(chosen.values())


def test_every_request_type_end_to_end(service: Client) -> None:
    client = service
    (leader, follower), gen = form_group(client, "g", 2)
    assert client.heartbeat("g", gen, follower).error is Errors.NONE
    commit = client.commit_offsets("g", {("t", 0): 10, ("t", 1): 20}, gen, follower)
    assert {p.error for p in commit.partitions} == {Errors.NONE}
    assert client.fetch_offsets("g", [("t", 0), ("t", 9)]).offsets() == {("t", 0): 10, ("t", 9): -1}
    [described] = client.describe_groups(["g"])
    assert described.state == "Stable" and {m.member_id for m in described.members} == {leader, follower}
    assert ("g", "Stable") in [(g.group_id, g.state) for g in client.list_groups()]
    leave = client.leave_group("g", [MemberIdentity(leader), MemberIdentity(follower)])
    assert [m.error for m in leave.members] == [Errors.NONE, Errors.NONE]
    wait_until(lambda: client.describe_groups(["g"])[0].state == "Empty")
    deleted = client.delete_offsets("g", [("t", 1)])
    assert deleted.error is Errors.NONE
    assert client.fetch_offsets("g").offsets() == {("t", 0): 10}
    assert client.delete_groups(["g", "nope"]) == {"g": Errors.NONE, "nope": Errors.GROUP_ID_NOT_FOUND}
    assert "g" not in [g.group_id for g in client.list_groups()]


def test_two_groups_on_different_partitions_rebalance_concurrently(service: Client) -> None:
    a, b = groups_on_distinct_partitions(service, 2)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda g: form_group(service, g, 3), [a, b]))
    assert all(len(ids) == 3 for ids, _ in results)
    assert {d.state for d in service.describe_groups([a, b])} == {"Stable"}


def test_the_async_admin_calls_answer_as_the_sync_ones_across_partitions(service: Client) -> None:
    busy, empty = groups_on_distinct_partitions(service, 2)
    missing = "no-such-group"
    (member,), _ = form_group(service, busy, 1, session_ms=SLOW_SESSION_MS)
    (leaving,), _ = form_group(service, empty, 1, session_ms=SLOW_SESSION_MS)
    assert service.leave_group(empty, [MemberIdentity(leaving)]).error is Errors.NONE
    wait_until(lambda: service.describe_groups([empty])[0].state == "Empty")
    ids = [busy, empty, missing]

    async def describe() -> tuple[Any, ...]:
        return await asyncio.gather(
            service.describe_groups_async(ids), service.describe_consumer_groups_async(ids),
            service.list_groups_async(types=["classic"]),
        )

    described, consumer, listed = asyncio.run(describe())
    assert {g.group_id: g.state for g in described} == {busy: "Stable", empty: "Empty", missing: "Dead"}
    assert [[m.member_id for m in g.members] for g in described if g.group_id == busy] == [[member]]
    assert {g.group_id: g.error for g in consumer} == dict.fromkeys(ids, Errors.GROUP_ID_NOT_FOUND)
    assert {busy, empty} <= {g.group_id for g in listed}
    deleted = asyncio.run(service.delete_groups_async(ids))
    assert deleted == {busy: Errors.NON_EMPTY_GROUP, empty: Errors.NONE, missing: Errors.GROUP_ID_NOT_FOUND}
    ours = {busy, empty}
    assert {g.group_id for g in service.list_groups()} & ours == {busy}
    assert {g.group_id for g in asyncio.run(service.list_groups_async())} & ours == {busy}


def test_join_and_sync_park_across_actor_calls(service: Client) -> None:
    (leader, follower), gen = form_group(service, "p", 2, session_ms=SLOW_SESSION_MS)
    parked: dict[str, object] = {}
    t = threading.Thread(
        target=lambda: parked.update(
            leader=service.join_group(join_request("p", leader, session_ms=SLOW_SESSION_MS))
        )
    )
    t.start()
    wait_until(lambda: service.describe_groups(["p"])[0].state == "PreparingRebalance")
    assert t.is_alive(), "the leader's JoinGroup waits for the follower"
    rejoined = service.join_group(join_request("p", follower, session_ms=SLOW_SESSION_MS))
    t.join(10)
    assert parked["leader"].generation_id == rejoined.generation_id == gen + 1  # type: ignore[attr-defined]
    follower_sync: dict[str, object] = {}
    s = threading.Thread(
        target=lambda: follower_sync.update(r=service.sync_group(SyncGroupRequest("p", gen + 1, follower)))
    )
    s.start()
    wait_until(lambda: service.describe_groups(["p"])[0].state == "CompletingRebalance")
    assert s.is_alive(), "the follower's SyncGroup waits for the leader"
    service.sync_group(SyncGroupRequest("p", gen + 1, leader, assignments=((follower, b"F"), (leader, b"L"))))
    s.join(10)
    assert follower_sync["r"].assignment == b"F"  # type: ignore[attr-defined]


def test_dead_member_is_removed_after_session_timeout(service: Client) -> None:
    (leader, follower), gen = form_group(service, "d", 2, session_ms=1_000)

    # Only the leader keeps heartbeating: the follower "died".
    def leader_sees_rebalance() -> bool:
        return service.heartbeat("d", gen, leader).error is Errors.REBALANCE_IN_PROGRESS

    wait_until(leader_sees_rebalance, timeout_s=10, interval_s=0.2)
    again = join(service, "d", leader, session_ms=1_000)
    assert again.error is Errors.NONE and [m.member_id for m in again.members] == [leader]


def test_killed_partition_actor_is_replaced_and_commits_survive(service: Client) -> None:
    group = "survivor"
    (member,), gen = form_group(service, group, 1, session_ms=20_000)
    partition = service.partition_for(group)
    acknowledged = {}
    for i in range(50):
        response = service.commit_offsets(group, {("t", i % 5): i}, gen, member)
        if response.partitions[0].error is Errors.NONE:
            acknowledged[("t", i % 5)] = i
    service.refresh()
    old = service.leader(partition)
    old_epoch = ray.get(old.ping.remote())
    kill_and_wait_dead(old)
    # The client retries through the failover transparently.
    fetched = service.fetch_offsets(group).offsets()
    assert fetched == acknowledged
    service.refresh()
    new_epoch = ray.get(service.leader(partition).ping.remote())
    assert new_epoch > old_epoch
    # The member still belongs to the reloaded group and can keep committing.
    assert service.heartbeat(group, gen, member).error is Errors.NONE
    assert service.commit_offsets(group, {("t", 0): 999}, gen, member).partitions[0].error is Errors.NONE


def test_reassign_mid_rebalance_answers_parked_and_clients_converge(service: Client) -> None:
    (leader, follower), gen = form_group(service, "r", 2, session_ms=20_000)
    partition = service.partition_for("r")
    results: dict[str, object] = {}
    t = threading.Thread(target=lambda: results.update(leader=join(service, "r", leader, session_ms=20_000)))
    t.start()
    wait_until(
        lambda: group_state(service, "r") == "PreparingRebalance",
        explain=lambda: (service.describe_groups(["r"]), results, service.status()),
    )
    service.reassign(partition)
    # The parked JoinGroup got NOT_COORDINATOR inside the client, which
    # retried against the new leader: the group, reloaded as Stable,
    # rebalances again; the follower learns it from its heartbeat.
    wait_until(lambda: service.heartbeat("r", gen, follower).error is Errors.REBALANCE_IN_PROGRESS)
    follower_again = join(service, "r", follower, session_ms=20_000)
    t.join(30)
    assert not t.is_alive()
    response = results["leader"]
    assert response.error is Errors.NONE  # type: ignore[attr-defined]
    assert follower_again.error is Errors.NONE
    assert response.generation_id == follower_again.generation_id == gen + 1  # type: ignore[attr-defined]


def test_reassign_to_a_named_node_puts_the_leader_there_or_refuses(service: Client) -> None:
    node = ray.get_runtime_context().get_node_id()
    epoch = service.reassign(1, node)
    assert {(p["epoch"], p["node_id"]) for p in service.status() if p["partition"] == 1} == {(epoch, node)}
    with pytest.raises(ValueError, match="no live Ray node"):
        service.reassign(1, "f" * 56)
    assert [p["epoch"] for p in service.status() if p["partition"] == 1] == [epoch]


def test_controller_restart_keeps_service(service: Client) -> None:
    service.commit_offsets("c", {("t", 0): 1})
    before = service.status()
    ray.kill(controller_handle(), no_restart=False)
    wait_until(lambda: _controller_answers(), timeout_s=30)
    after = Client(controller_handle()).status()
    assert [p["epoch"] for p in after] == [p["epoch"] for p in before], "live leaders are adopted"
    assert service.fetch_offsets("c").offsets() == {("t", 0): 1}


def _controller_answers() -> bool:
    try:
        ray.get(controller_handle().stats.remote(), timeout=2)
        return True
    except Exception:
        return False


def test_stale_epoch_actor_refuses_writes(service: Client) -> None:
    from actors.partition.actor import RemotePartition

    partition = service.partition_for("fence")
    service.commit_offsets("fence", {("t", 0): 1})
    current = ray.get(service.leader(partition).ping.remote())
    stale = RemotePartition.options(num_cpus=0).remote(partition, current - 1, _settings(service))
    ray.get(stale.activate.remote())
    assert ray.get(stale.wait_active.remote(10)) == "CLOSED", "an older epoch never becomes active"
    from coordinator.messages import OffsetCommitPartition, OffsetCommitRequest

    response = ray.get(stale.handle.remote(OffsetCommitRequest("fence", (OffsetCommitPartition("t", 0, 2),))))
    assert response.partitions[0].error is Errors.NOT_COORDINATOR
    ray.kill(stale)
    assert service.fetch_offsets("fence").offsets() == {("t", 0): 1}


def test_a_partition_whose_request_slots_are_all_taken_still_answers_its_probe(service: Client) -> None:
    """The controller's probe runs in a Ray concurrency group of its own: a partition with
    a queue of requests in front of it is busy, not dead, and still answers in time."""
    from actors.partition.actor import RemotePartition

    # A standby (no partition) is never active: each wait_active holds a request slot for
    # 120 s, so a probe in the same group as they would wait past its 30 s deadline.
    actor = RemotePartition.options(num_cpus=0, max_concurrency=2).remote(None, 0, _settings(service))
    held = [actor.wait_active.remote(120) for _ in range(2)]
    try:
        assert ray.get(actor.probe.remote(), timeout=30)["state"] == "INITIAL"
        ready, _ = ray.wait(held, timeout=0)
        assert ready == [], f"a request slot was free when the probe was answered: {_outcomes(ready)}"
    finally:
        ray.kill(actor)


def _outcomes(refs: list[Any]) -> list[Any]:
    outcomes = []
    for ref in refs:
        try:
            outcomes.append(ray.get(ref, timeout=0))
        except Exception as exc:
            outcomes.append(exc)
    return outcomes


def _settings(client: Client) -> object:
    return ray.get(client.controller.get_settings.remote())


def test_a_replication_factor_above_the_live_node_count_is_refused(tmp_path: Path) -> None:
    settings = ServiceSettings(data_dir=str(tmp_path), replication_factor=3, min_insync_replicas=2)
    with pytest.raises(ValueError, match="replication_factor 3 needs as many live Ray nodes.*has 1"):
        actors.start(settings=settings)
