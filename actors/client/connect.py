"""`connect()`: a client for the running service, importing only the client's code.

Here, not in actors/service.py (which re-exports it), so a command that only asks
the service (`raygroups lag --live`, `list`, `describe`) imports none of the
controller's or the partition actor's modules: in a fresh process they cost
more than the question itself.
"""

from __future__ import annotations

import ray

from actors.client.client import Client, controller_handle
from actors.core.settings import DEFAULT_NAMESPACE


def connect(
    address: str | None = None, namespace: str = DEFAULT_NAMESPACE, timeout_s: float = 30.0
) -> Client:
    """A client for the service running in `namespace` on the Ray cluster."""
    if not ray.is_initialized():
        ray.init(address=address or "auto", namespace=namespace, log_to_driver=False)
    return Client(controller_handle(namespace), timeout_s=timeout_s)
