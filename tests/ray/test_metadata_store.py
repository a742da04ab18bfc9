"""The controller's metadata in the GCS key-value store (actors/controller/ray_store.py),
on the session's Ray cluster: a round trip, one key per service namespace,
migration from a legacy controller.json, a clear error on a corrupt value;
and the property it exists for: a controller restarted with no file left in
the data directory still knows every partition's leader and epoch."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from ray.experimental.internal_kv import _internal_kv_put

import actors
from actors.client.client import Client
from actors.controller.ray_store import KV_NAMESPACE, CorruptMetadataError, GcsKvStore, metadata_key
from actors.core.settings import CONTROLLER_NAME, ServiceSettings
from coordinator import CoordinatorConfig

from tests.ray.helpers import wait_until

pytestmark = pytest.mark.ray

METADATA = {"num_partitions": 2, "epochs": {"0": 3, "1": 1}, "actors": {"0": "a", "1": "b"}}


def _namespace() -> str:
    return f"raygroups-store-{uuid.uuid4().hex[:8]}"


def test_saved_metadata_loads_back_and_a_save_replaces_it(ray_session: None, data_dir: str) -> None:
    store = GcsKvStore(_namespace(), data_dir)
    assert store.load() is None
    store.save(METADATA)
    assert store.load() == METADATA
    newer = {**METADATA, "epochs": {"0": 4, "1": 1}}
    store.save(newer)
    assert store.load() == newer
    # Nothing goes to the node-local data directory.
    assert os.listdir(data_dir) == []


def test_two_service_namespaces_do_not_see_each_others_metadata(ray_session: None, data_dir: str) -> None:
    first, second = GcsKvStore(_namespace(), data_dir), GcsKvStore(_namespace(), data_dir)
    first.save(METADATA)
    assert second.load() is None
    other = {**METADATA, "num_partitions": 5}
    second.save(other)
    assert first.load() == METADATA
    assert second.load() == other


def test_a_legacy_controller_json_is_migrated_until_the_first_save(
    ray_session: None, data_dir: str, caplog: pytest.LogCaptureFixture
) -> None:
    legacy = os.path.join(data_dir, "controller.json")
    with open(legacy, "w", encoding="utf-8") as f:
        json.dump(METADATA, f)
    store = GcsKvStore(_namespace(), data_dir)
    with caplog.at_level(logging.WARNING, logger="actors.controller.ray_store"):
        assert store.load() == METADATA
    assert any(legacy in record.getMessage() for record in caplog.records)
    # Once saved to the GCS, the KV wins over the file left in place.
    newer = {**METADATA, "epochs": {"0": 9, "1": 9}}
    store.save(newer)
    assert store.load() == newer


@pytest.mark.parametrize("value", [b"{not json", b"[1, 2]", b"\xff\xfe"])
def test_a_corrupt_value_raises_an_error_naming_the_key(
    ray_session: None, data_dir: str, value: bytes
) -> None:
    namespace = _namespace()
    _internal_kv_put(metadata_key(namespace, data_dir), value, overwrite=True, namespace=KV_NAMESPACE)
    with pytest.raises(CorruptMetadataError, match=re.escape(metadata_key(namespace, data_dir))):
        GcsKvStore(namespace, data_dir).load()


def test_a_corrupt_legacy_file_raises_an_error_naming_it(ray_session: None, data_dir: str) -> None:
    legacy = os.path.join(data_dir, "controller.json")
    with open(legacy, "w", encoding="utf-8") as f:
        f.write('"a string"')
    with pytest.raises(CorruptMetadataError, match=re.escape(legacy)):
        GcsKvStore(_namespace(), data_dir).load()


# ------------------------------------------------ a restarted controller


@pytest.fixture
def own_service(ray_session: None) -> Iterator[tuple[Client, ServiceSettings]]:
    path = tempfile.mkdtemp(prefix="raygroups-store-")
    settings = ServiceSettings(
        data_dir=path,
        num_partitions=3,
        namespace=_namespace(),
        coordinator=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
    )
    yield actors.start(settings=settings), settings
    actors.stop(settings.namespace)
    shutil.rmtree(path, ignore_errors=True)


def _leaders(client: Client) -> dict[int, tuple[int, int]] | None:
    """Per partition (epoch, leader pid) once every partition is ACTIVE with no move under way."""
    try:
        rows = client.status()
    except ray.exceptions.RayError:
        return None  # the controller is restarting
    if any(row.get("state") != "ACTIVE" or "operation" in row for row in rows):
        return None
    return {row["partition"]: (row["epoch"], row["pid"]) for row in rows}


def _controller_pid(namespace: str) -> Any:
    controller = ray.get_actor(CONTROLLER_NAME, namespace=namespace)
    return ray.get(controller.__ray_call__.remote(lambda _self: os.getpid()), timeout=30)


def test_a_restarted_controller_without_a_metadata_file_keeps_every_leader_and_epoch(
    own_service: tuple[Client, ServiceSettings],
) -> None:
    client, settings = own_service
    client.commit_offsets("kept", {("t", 0): 5})
    # One partition past its first epoch: a controller that lost its metadata
    # would start every partition again at epoch 1.
    client.reassign(client.partition_for("kept"))
    before = wait_until(lambda: _leaders(client), timeout_s=60)
    pid_before = _controller_pid(settings.namespace)

    ray.kill(ray.get_actor(CONTROLLER_NAME, namespace=settings.namespace), no_restart=False)
    legacy = os.path.join(settings.data_dir, "controller.json")
    if os.path.exists(legacy):
        os.remove(legacy)

    # Ray restarts the actor, on whichever node: what it knows comes from the GCS.
    wait_until(lambda: _restarted(settings.namespace, pid_before), timeout_s=60)
    after = wait_until(lambda: _leaders(client), timeout_s=60)
    # The same epochs and the same leader processes: no partition was started again.
    assert after == before
    assert sorted(epoch for epoch, _ in after.values()) == [1, 1, 2]
    assert client.fetch_offsets("kept").offsets() == {("t", 0): 5}


def _restarted(namespace: str, pid_before: int) -> bool:
    try:
        return bool(_controller_pid(namespace) != pid_before)
    except (ray.exceptions.RayError, ValueError):
        return False  # not back yet


def test_another_data_directory_starts_afresh(ray_session: None, data_dir: str) -> None:
    namespace = _namespace()
    GcsKvStore(namespace, data_dir).save({"num_partitions": 2})
    assert GcsKvStore(namespace, os.path.join(data_dir, "elsewhere")).load() is None
    assert GcsKvStore(namespace, data_dir).load() == {"num_partitions": 2}
