"""A replicated service without metadata recovers it from the replicas' state files on the
live nodes' disks, and refuses to start beside logs it cannot recover (unlabelled nodes)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from actors.controller.forgotten_logs import ForgottenLogsError, recover_forgotten_logs, scan_replicas
from actors.controller.ray_store import GcsKvStore
from actors.core.node_names import live_nodes
from actors.core.settings import ServiceSettings
from log import replica_dir
from log.replica_state import ReplicaState, write_replica_state

pytestmark = pytest.mark.ray


def _settings(tmp_path: Path, namespace: str, num_partitions: int = 1) -> ServiceSettings:
    return ServiceSettings(
        data_dir=str(tmp_path), namespace=namespace, num_partitions=num_partitions,
        replication_factor=3, min_insync_replicas=2,
    )


def test_an_earlier_clusters_logs_under_unknown_node_names_stop_the_start(
    ray_session: None, tmp_path: Path
) -> None:
    settings = _settings(tmp_path, "forgotten-a")
    recover_forgotten_logs(settings, live_nodes())  # nothing on disk: starts
    earlier = tmp_path / "nodes" / "0123abcd" / "offsets-0"
    earlier.mkdir(parents=True)
    (tmp_path / "nodes" / "0123abcd" / "offsets-4").mkdir()  # an empty directory is no log
    recover_forgotten_logs(settings, live_nodes())
    (earlier / "00000000000000000000.log").write_bytes(b"x")
    assert [f.path for f in scan_replicas(str(tmp_path))] == [str(earlier)]
    with pytest.raises(
        ForgottenLogsError, match=f"{earlier}.*no metadata for namespace 'forgotten-a'.*raygroups.io/node"
    ):
        recover_forgotten_logs(settings, live_nodes())
    assert GcsKvStore(settings.namespace, settings.data_dir).load() is None


def test_state_files_on_a_live_node_become_the_metadata(ray_session: None, tmp_path: Path) -> None:
    settings = _settings(tmp_path, "forgotten-c")
    [node] = live_nodes()  # the test session's one-node cluster
    directory = replica_dir(str(tmp_path), node, 0)
    os.makedirs(directory)
    Path(directory, "00000000000000000000.log").write_bytes(b"")
    write_replica_state(directory, ReplicaState((node, "b", "c"), (node, "b"), node, 4, 7, 1, 3))
    recover_forgotten_logs(settings, live_nodes())
    saved = GcsKvStore(settings.namespace, settings.data_dir).load()
    assert saved is not None and saved["epochs"] == {"0": 4} and saved["known_end"] == {"0": 0}
    assert saved["replication"]["0"]["isr"] == [node, "b"] and saved["replication"]["0"]["leader"] is None


def test_a_service_with_metadata_or_one_copy_starts_over_its_logs(ray_session: None, tmp_path: Path) -> None:
    earlier = tmp_path / "nodes" / "0123abcd" / "offsets-0"
    earlier.mkdir(parents=True)
    (earlier / "00000000000000000000.log").write_bytes(b"x")
    single = ServiceSettings(data_dir=str(tmp_path), namespace="forgotten-b")
    recover_forgotten_logs(single, live_nodes())
    settings = _settings(tmp_path, "forgotten-b")
    GcsKvStore(settings.namespace, settings.data_dir).save({"num_partitions": 1})
    recover_forgotten_logs(settings, live_nodes())
    assert os.path.isdir(earlier)
