"""A replicated service without metadata refuses to start beside an earlier cluster's logs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import ray

from actors.forgotten_logs import ForgottenLogsError, refuse_forgotten_logs, replica_logs
from actors.ray_store import GcsKvStore
from actors.settings import ServiceSettings

pytestmark = pytest.mark.ray


def _settings(tmp_path: Path, namespace: str) -> ServiceSettings:
    return ServiceSettings(
        data_dir=str(tmp_path), namespace=namespace, replication_factor=3, min_insync_replicas=2
    )


def _live() -> list[str]:
    return [node["NodeID"] for node in ray.nodes() if node["Alive"]]


def test_an_earlier_clusters_logs_without_metadata_stop_the_start(ray_session: None, tmp_path: Path) -> None:
    settings = _settings(tmp_path, "forgotten-a")
    refuse_forgotten_logs(settings, _live())  # nothing on disk: starts
    earlier = tmp_path / "nodes" / "0123abcd" / "offsets-3"
    earlier.mkdir(parents=True)
    (tmp_path / "nodes" / "0123abcd" / "offsets-4").mkdir()  # an empty directory is no log
    refuse_forgotten_logs(settings, _live())
    (earlier / "00000000000000000000.log").write_bytes(b"x")
    assert replica_logs(str(tmp_path)) == [str(earlier)]
    with pytest.raises(ForgottenLogsError, match=f"{earlier}.*no metadata for namespace 'forgotten-a'"):
        refuse_forgotten_logs(settings, _live())


def test_a_service_with_metadata_or_one_copy_starts_over_its_logs(ray_session: None, tmp_path: Path) -> None:
    earlier = tmp_path / "nodes" / "0123abcd" / "offsets-0"
    earlier.mkdir(parents=True)
    (earlier / "00000000000000000000.log").write_bytes(b"x")
    single = ServiceSettings(data_dir=str(tmp_path), namespace="forgotten-b")
    refuse_forgotten_logs(single, _live())
    settings = _settings(tmp_path, "forgotten-b")
    GcsKvStore(settings.namespace, settings.data_dir).save({"num_partitions": 1})
    refuse_forgotten_logs(settings, _live())
    assert os.path.isdir(earlier)
