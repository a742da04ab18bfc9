"""Actors attached to the service: stopped with it, and told when its ACLs change.

Packages built on the service start actors beside it (the Kafka gateways,
`gateway/deploy.py`) and `attach` each one by name: the names are kept in
Ray's GCS key-value store, so they outlive the process that attached them.
`actors.service.stop()` stops them before it removes the service
(`stop_attached`), and the topic registry nudges them after every ACL change
(`nudge_attached`: their `acls_changed()` method, if they have one), as it
nudges the partition leaders, so an attached gateway's ACLs apply at once and
its 0.5 s poll only bounds a lost nudge (issue 49).

A rolling restart replaces them too (issue 48): an actor attached with
`replaced_by="package.module:function"` names the function that replaces it
with new code (`replacer`), and the controller calls it on each one in turn
(`actors/controller/rolling.py`) as `function(name, namespace, runtime_env)`.
So actors/ never imports the package above it by name (the gateway's code, as
the partition leaders' Kafka listener comes through an entry point): the
package that started the actor says how it is started again. Only a dotted
`module:function` of raygroups' own packages is accepted (`REPLACER`): the GCS
KV is writable by any process of the cluster, and the controller must not be
made to import anything else.

Here, in `core`, so the registry (`actors/client`) reaches them without
importing the service's start code.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any

import ray
from ray.experimental.internal_kv import _internal_kv_get, _internal_kv_list, _internal_kv_put

from actors.core.settings import DEFAULT_NAMESPACE

logger = logging.getLogger(__name__)
KV_NAMESPACE = "raygroups"  # the GCS KV namespace of the service's own keys
NUDGE_METHOD = "acls_changed"
REPLACER = re.compile(r"(?:gateway|actors)(?:\.[A-Za-z_]\w*)+:[A-Za-z_]\w*")
NAME_FREE_WAIT_S = 5.0


def attached_prefix(namespace: str) -> str:
    return f"raygroups/{namespace}/attached/"


def attach(name: str, namespace: str = DEFAULT_NAMESPACE, replaced_by: str | None = None) -> None:
    """Stop the named detached actor `name` of `namespace` with the service: `stop()`
    calls its `stop()` method (bounded), then kills it. Kept in the GCS KV, so it
    outlives the process that attached it. `replaced_by`: the `module:function` a
    rolling restart replaces it with (module docstring)."""
    if replaced_by is not None and not REPLACER.fullmatch(replaced_by):
        raise ValueError(
            f"replaced_by must be a 'module:function' of raygroups' own packages: {replaced_by!r}"
        )
    value = b"" if replaced_by is None else json.dumps({"replaced_by": replaced_by}).encode()
    _internal_kv_put(attached_prefix(namespace) + name, value, overwrite=True, namespace=KV_NAMESPACE)


def replaceable(namespace: str = DEFAULT_NAMESPACE) -> list[str]:
    """The names of the attached actors that name a replacer (a rolling restart's), sorted."""
    base = attached_prefix(namespace)
    return [name for name in attached(namespace)
            if _internal_kv_get(base + name, namespace=KV_NAMESPACE)]


def replacer(name: str, namespace: str = DEFAULT_NAMESPACE) -> Callable[..., Any] | None:
    """The function that replaces attached actor `name` with new code, or None (attached
    without one, or not attached). Raises ValueError for a value that is not one."""
    value = _internal_kv_get(attached_prefix(namespace) + name, namespace=KV_NAMESPACE)
    if not value:
        return None
    try:
        path = json.loads(value)["replaced_by"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"attached actor {name}: unreadable entry {value[:100]!r}") from exc
    if not isinstance(path, str) or not REPLACER.fullmatch(path):
        raise ValueError(f"attached actor {name}: replaced_by {path!r} is not 'module:function'")
    module, _, function = path.partition(":")
    found = getattr(importlib.import_module(module), function, None)
    if not callable(found):
        raise ValueError(f"attached actor {name}: {path} is not a function")
    return found  # type: ignore[no-any-return]


def until_name_free(name: str, namespace: str, timeout_s: float = NAME_FREE_WAIT_S) -> bool:
    """Wait until no live actor holds `name` (a killed detached actor frees it once dead);
    whether it is free."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            ray.get_actor(name, namespace=namespace)
        except ValueError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


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
