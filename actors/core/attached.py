"""Actors attached to the service: stopped with it, and told when its ACLs change.

Packages built on the service start actors beside it (the Kafka gateways,
`gateway/deploy.py`) and `attach` each one by name: the names are kept in
Ray's GCS key-value store, so they outlive the process that attached them.
`actors.service.stop()` stops them before it removes the service
(`stop_attached`), and the topic registry nudges them after every ACL change
(`nudge_attached`: their `acls_changed()` method, if they have one), as it
nudges the partition leaders, so an attached gateway's ACLs apply at once and
its 0.5 s poll only bounds a lost nudge (issue 49).

Here, in `core`, so the registry (`actors/client`) reaches them without
importing the service's start code.
"""

from __future__ import annotations

import logging

import ray
from ray.experimental.internal_kv import _internal_kv_list, _internal_kv_put

from actors.core.settings import DEFAULT_NAMESPACE

logger = logging.getLogger(__name__)
KV_NAMESPACE = "raygroups"  # the GCS KV namespace of the service's own keys
NUDGE_METHOD = "acls_changed"


def attached_prefix(namespace: str) -> str:
    return f"raygroups/{namespace}/attached/"


def attach(name: str, namespace: str = DEFAULT_NAMESPACE) -> None:
    """Stop the named detached actor `name` of `namespace` with the service: `stop()`
    calls its `stop()` method (bounded), then kills it. Kept in the GCS KV, so it
    outlives the process that attached it."""
    _internal_kv_put(attached_prefix(namespace) + name, b"", overwrite=True, namespace=KV_NAMESPACE)


def attached(namespace: str = DEFAULT_NAMESPACE, prefix: str = "") -> list[str]:
    """The names of the actors attached to the service of `namespace`, starting with `prefix`."""
    base = attached_prefix(namespace)
    keys = _internal_kv_list(base + prefix, namespace=KV_NAMESPACE)
    return sorted(key.decode()[len(base):] for key in keys)


def nudge_attached(namespace: str) -> None:
    """Call `acls_changed()` on every attached actor that has it (best effort: one that
    misses it reads the ACLs at its next poll)."""
    for name in attached(namespace):
        try:
            actor = ray.get_actor(name, namespace=namespace)
            getattr(actor, NUDGE_METHOD).remote()
        except (ValueError, AttributeError):  # gone, or not one that watches ACLs
            continue
        except Exception as exc:
            logger.info("ACL change not pushed to %s: %r", name, exc)
