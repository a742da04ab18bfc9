"""The Ray layer: partition actors, controller, client routing and the `raygroups` CLI.

Applications use `actors.start()` / `actors.connect()` to get a `Client`.
"""

from actors.client import Client
from actors.retry import CoordinatorUnavailableError
from actors.service import connect, init_local_ray, start, stop
from actors.settings import ServiceSettings

__all__ = [
    "Client",
    "CoordinatorUnavailableError",
    "ServiceSettings",
    "connect",
    "init_local_ray",
    "start",
    "stop",
]
