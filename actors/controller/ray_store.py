"""The controller's metadata (`actors.controller.state`) in Ray's GCS key-value store.

Where it lives: one key, `raygroups/<service namespace>/<data dir>/controller`,
in the GCS internal KV namespace `raygroups` (apart from Ray's own keys),
holding the metadata as JSON bytes. The data directory is part of the key:
the service started again with the same one finds its metadata; with
another one it starts afresh (that directory holds none of the old logs).
A save is one put, which the GCS applies atomically: a reader sees the old
value or the new one, never a mix.

Why there: the data directory is node-local (each node its own disk, no
shared filesystem), so a file written by the controller would be gone when
Ray restarts the controller on another node. The GCS is Ray's own
fault-tolerant metadata store, on the head node: it outlives the controller
actor's death and the loss of any worker node. It outlives the head node's
restart only with GCS fault tolerance, where the GCS persists its tables
(this KV included) in an external HA Redis and reloads them when it restarts
(`RAY_REDIS_ADDRESS` with `ray start --head`, or KubeRay's
`gcsFaultToleranceOptions`; https://docs.ray.io/en/latest/ray-core/fault_tolerance/gcs.html).
Without it the head node's loss ends the whole Ray cluster, every actor of
the service with it, so the metadata shares the fate of what it describes.

Migration: a KV without the key but a legacy `<data_dir>/controller.json`
(an older single-copy service on a shared directory) loads from that file.
It is read only until the first save, which the controller makes at the end
of every start; the file is then never read again and is left in place.

A GCS call blocks the calling thread (a network round trip, longer while the
GCS restarts): the control plane calls `load` and `save` through
`asyncio.to_thread`. The calls use `ray.experimental.internal_kv`, the
internal API Ray's own libraries keep their metadata with, so they need a
connected Ray worker (any actor, or a driver after `ray.init`).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from ray.experimental.internal_kv import _internal_kv_get, _internal_kv_put

from actors.core.attached import KV_NAMESPACE as KV_NAMESPACE  # the service's GCS KV namespace

logger = logging.getLogger(__name__)
LEGACY_METADATA_FILE = "controller.json"


class CorruptMetadataError(ValueError):
    """The stored metadata is not a JSON object: the controller cannot start on it."""


def metadata_key(namespace: str, data_dir: str) -> str:
    """The KV key of the metadata of the service in Ray namespace `namespace` keeping
    its logs in `data_dir`: a service started again with another data directory
    starts afresh rather than expect logs that directory does not hold."""
    return f"raygroups/{namespace}/{os.path.abspath(data_dir)}/controller"


def decode_metadata(raw: bytes, where: str) -> dict[str, Any]:
    """The metadata dict in `raw`; raises CorruptMetadataError naming `where`."""
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptMetadataError(f"controller metadata at {where} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise CorruptMetadataError(
            f"controller metadata at {where} is a JSON {type(data).__name__}, not an object"
        )
    return data


class GcsKvStore:
    """`MetadataStore` on the GCS internal KV: one key per service namespace."""

    def __init__(self, namespace: str, data_dir: str) -> None:
        self.key = metadata_key(namespace, data_dir)
        self.legacy_path = os.path.join(data_dir, LEGACY_METADATA_FILE)

    def load(self) -> dict[str, Any] | None:
        # None when the key is absent (Ray's annotation says bytes).
        raw: bytes | None = _internal_kv_get(self.key, namespace=KV_NAMESPACE)
        if raw is not None:
            return decode_metadata(raw, f"GCS KV key {KV_NAMESPACE}:{self.key}")
        return self._load_legacy()

    def save(self, data: dict[str, Any]) -> None:
        _internal_kv_put(self.key, json.dumps(data).encode(), overwrite=True, namespace=KV_NAMESPACE)

    def _load_legacy(self) -> dict[str, Any] | None:
        try:
            with open(self.legacy_path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        data = decode_metadata(raw, self.legacy_path)
        logger.warning(
            "no controller metadata in the GCS KV (%s:%s): migrating it from the legacy %s; "
            "the next save moves it to the GCS and the file is not read again",
            KV_NAMESPACE,
            self.key,
            self.legacy_path,
        )
        return data
