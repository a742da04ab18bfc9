"""Pausing the cyclic garbage collector around bulk decoding.

Loading, compaction and snapshots create millions of tuples that stay alive
(or die by reference counting); the collector's passes would traverse them
again and again for nothing: measured, these take two to three times as
long with it on. Rules: the pause covers one bounded operation, nests, and
restores the collector only if it was enabled before. It is process-wide:
cycles created meanwhile by other threads are collected after the pause.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
