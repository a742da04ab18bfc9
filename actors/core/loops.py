"""The event loop raygroups runs on: uvloop's, as Ray runs async actors, unless switched off.

Ray 2.60 runs every async actor (the partition leaders and their Kafka
listeners, the controller) on uvloop wherever uvloop is installed, unless
`RAY_USE_UVLOOP` says otherwise; raygroups installs it (measured: 18-26%
less of a partition leader's CPU per request, docs/benchmarks.md). The loops
raygroups makes itself follow the same switch, so one setting puts the
whole service on one kind of loop: the gateway's (`raygroups gateway`)
and the Ray client's sending thread (`actors.client.coalesce`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def uses_uvloop() -> bool:
    """Whether new loops are uvloop's: installed, and not switched off. Ray's own rule
    (`ray._private.async_compat.get_new_event_loop`, private, so not called from here)."""
    if os.environ.get("RAY_USE_UVLOOP", "1").lower() not in ("1", "true"):
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop of the kind Ray runs this process's async actors on."""
    if uses_uvloop():
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on a loop of `new_event_loop`."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
