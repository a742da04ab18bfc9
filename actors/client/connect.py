"""`connect()`: a client for the running service, importing only the client's code.

Here, not in actors/service.py (which re-exports it), so a command that only asks
the service (`raygroups lag --live`, `list`, `describe`) imports none of the
controller's or the partition actor's modules: in a fresh process they cost
more than the question itself.
"""

from __future__ import annotations

import os

import ray

from actors.client.client import Client, controller_handle
from actors.core.settings import DEFAULT_NAMESPACE

CREDENTIAL_ENV = "RAYGROUPS_CREDENTIAL"


def connect(
    address: str | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    timeout_s: float = 30.0,
    credential: str | None = None,
) -> Client:
    """A client for the service running in `namespace` on the Ray cluster. `credential`
    (default: the RAYGROUPS_CREDENTIAL environment variable) is sent with every request,
    where the service authorizes Ray callers (docs/security.md)."""
    if not ray.is_initialized():
        ray.init(address=address or "auto", namespace=namespace, log_to_driver=False)
    credential = credential or os.environ.get(CREDENTIAL_ENV) or None
    return Client(controller_handle(namespace), timeout_s=timeout_s, credential=credential)
