"""Service-wide singleton actors (controller, topic registry): named, detached,
restarted by Ray when they die, created once per namespace."""

from __future__ import annotations

from typing import Any

import ray

from actors.core.settings import ServiceSettings


def detached_singleton(cls: type, name: str, settings: ServiceSettings, **options: Any) -> Any:
    """Create the `name` actor of `settings.namespace`, or get the running one."""
    return (
        ray.remote(cls)
        .options(
            name=name,
            namespace=settings.namespace,
            lifetime="detached",
            get_if_exists=True,
            max_restarts=-1,
            max_task_retries=-1,
            num_cpus=0,
            **options,
        )
        .remote(settings)
    )
