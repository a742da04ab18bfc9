"""The controller on the session's Ray cluster, in a namespace and data
directory of its own: killed in the middle of a reassign, it finishes the
move with one leader per partition and no orphan actors, and Ray's retry of
the call moves nothing more; a leader it adopts while still INITIAL is
activated."""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import ray

import actors
from actors.client.client import Client
from actors.controller.cluster_view import PARTITION_ACTOR_PREFIX
from actors.controller.ray_store import GcsKvStore
from actors.core.settings import CONTROLLER_NAME, ServiceSettings
from actors.partition.actor import RemotePartition
from coordinator import CoordinatorConfig

from tests.ray.helpers import kill_and_wait_dead, wait_until

pytestmark = [pytest.mark.ray, pytest.mark.chaos]


@dataclass
class OwnService:
    client: Client
    settings: ServiceSettings

    def controller(self) -> Any:
        return ray.get_actor(CONTROLLER_NAME, namespace=self.settings.namespace)

    def store(self) -> GcsKvStore:
        return GcsKvStore(self.settings.namespace, self.settings.data_dir)

    def metadata(self) -> dict[str, Any]:
        data = self.store().load()
        assert data is not None, "the controller saved no metadata"
        return data

    def partition_actors(self) -> dict[str, Any]:
        named = ray.util.list_named_actors(all_namespaces=True)
        names = [
            a["name"]
            for a in named
            if a["namespace"] == self.settings.namespace and a["name"].startswith(PARTITION_ACTOR_PREFIX)
        ]
        found = {}
        for name in names:
            try:
                found[name] = ray.get(
                    ray.get_actor(name, namespace=self.settings.namespace).probe.remote(), timeout=10
                )
            except Exception:
                continue  # killed while listed
        return found


@pytest.fixture
def own_service(ray_session: None) -> Iterator[OwnService]:
    path = tempfile.mkdtemp(prefix="raygroups-controller-")
    settings = ServiceSettings(
        data_dir=path,
        num_partitions=3,
        namespace=f"raygroups-ctl-{uuid.uuid4().hex[:8]}",
        coordinator=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
        reap_interval_s=1.0,
    )
    client = actors.start(settings=settings)
    yield OwnService(client, settings)
    actors.stop(settings.namespace)
    shutil.rmtree(path, ignore_errors=True)


def _settled(service: OwnService) -> bool:
    """Every partition ACTIVE, no move under way, every partition actor owned."""
    try:
        status = ray.get(service.controller().status.remote(), timeout=10)
    except Exception:
        return False
    if any(p.get("state") != "ACTIVE" or "operation" in p for p in status):
        return False
    meta = service.metadata()
    owned = set(meta["actors"].values()) | set(meta["standbys"])
    return set(service.partition_actors()) == owned and not meta["intents"]


def test_a_controller_killed_mid_reassign_leaves_one_leader_per_partition(own_service: OwnService) -> None:
    client = own_service.client
    group = "moved"
    client.commit_offsets(group, {("t", 0): 42})
    partition = client.partition_for(group)
    before = client.status()[partition]["epoch"]
    # As the client calls it: naming the epoch it moves away from.
    moving = own_service.controller().reassign.remote(partition, None, before)
    # Kill it once the move is saved and under way (a new actor takes seconds to start).
    wait_until(lambda: own_service.metadata()["intents"], timeout_s=30, interval_s=0.005)
    ray.kill(own_service.controller(), no_restart=False)
    # Ray restarts it and retries the call; the restarted controller finishes the
    # move, and the retry, naming the same epoch, does not move the partition again.
    assert ray.get(moving, timeout=120) == before + 1
    wait_until(
        lambda: _settled(own_service),
        timeout_s=60,
        explain=lambda: (own_service.metadata(), own_service.partition_actors()),
    )
    leaders: dict[int, list[str]] = {}
    for name, probe in own_service.partition_actors().items():
        if probe["partition"] >= 0:
            leaders.setdefault(probe["partition"], []).append(name)
    assert {p: len(names) for p, names in leaders.items()} == {0: 1, 1: 1, 2: 1}
    assert client.status()[partition]["epoch"] == before + 1
    assert client.fetch_offsets(group).offsets() == {("t", 0): 42}


def test_an_adopted_leader_still_initial_becomes_active(own_service: OwnService) -> None:
    client, settings = own_service.client, own_service.settings
    client.commit_offsets("adopted", {("t", 1): 7})
    partition = client.partition_for("adopted")
    # The controller stops for good, as if it died between starting a leader and activating it.
    ray.kill(own_service.controller(), no_restart=True)
    wait_until(lambda: CONTROLLER_NAME not in _names(settings.namespace))
    meta = own_service.metadata()
    old = ray.get_actor(meta["actors"][str(partition)], namespace=settings.namespace)
    kill_and_wait_dead(old)
    epoch = meta["epochs"][str(partition)] + 1
    name = f"{PARTITION_ACTOR_PREFIX}adopted-{uuid.uuid4().hex[:6]}"
    initial = (
        RemotePartition
        .options(name=name, namespace=settings.namespace, lifetime="detached", num_cpus=0)
        .remote(partition, epoch, settings)
    )
    assert ray.get(initial.probe.remote())["state"] == "INITIAL"
    meta["epochs"][str(partition)], meta["actors"][str(partition)] = epoch, name
    own_service.store().save(meta)
    restarted = actors.start(settings=settings)
    wait_until(lambda: ray.get(initial.probe.remote())["state"] == "ACTIVE", timeout_s=60)
    assert restarted.status()[partition]["epoch"] == epoch
    assert restarted.fetch_offsets("adopted").offsets() == {("t", 1): 7}


def _names(namespace: str) -> set[str]:
    time.sleep(0.05)
    return {a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == namespace}


def test_a_parked_lag_watch_follows_its_group_to_a_new_leader(own_service: OwnService) -> None:
    """A consumer pool's lag watch (coordinator/lag_watch.py) parked at the old leader is
    answered NOT_COORDINATOR when leadership moves; the client sends it on to the new
    leader. Parked again with what each answer showed, as the pool does, the watches see
    the lag unknown until the new leader read the end offsets, then over the target."""
    from concurrent.futures import ThreadPoolExecutor

    from coordinator.errors import Errors
    from coordinator.lag_watch import LagWatchRequest

    client, group, topic = own_service.client, "watched", "watched-t"
    client.create_topic(topic, 1)
    client.set_end_offsets({(topic, 0): 10})
    client.commit_offsets(group, {(topic, 0): 0})
    wait_until(lambda: (lag := client.lag([group])) and lag[0].lag == 10, timeout_s=30)
    partition = client.partition_for(group)
    before = client.status()[partition]["epoch"]

    def watch(seen: int | None) -> LagWatchRequest:
        return LagWatchRequest(group, "pool", seen, None, 100, None, 0, 60_000)

    with ThreadPoolExecutor(1) as pool:
        parked = pool.submit(client.send, watch(10), None, 120)
        moved = own_service.controller().reassign.remote(partition, None, before)
        assert ray.get(moved, timeout=120) == before + 1
        wait_until(lambda: (lag := client.lag([group])) and lag[0].lag == 10, timeout_s=30)
        client.set_end_offsets({(topic, 0): 500})
        answers = [parked.result(timeout=120)]
    while answers[-1].error is Errors.NONE and answers[-1].groups[0][1] != 500 and len(answers) < 5:
        answers.append(client.send(watch(answers[-1].groups[0][1]), timeout_s=120))
    assert [a.error for a in answers] == [Errors.NONE] * len(answers), answers
    assert answers[-1].groups[0][:2] == (group, 500), answers
    assert client.status()[partition]["epoch"] == before + 1
