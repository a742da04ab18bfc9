"""Responses cross from a partition actor to the client as pickle bytes.

Ray serializes a returned Python object through cloudpickle, whose per-call
set-up and hooks cost about 100 us on the actor and 70 us on the caller
more than returning `bytes` (measured with an echo actor on this machine).
So `handle_wire` and `handle_batch` return responses pickled with the
standard pickler, and the client unpickles them. The messages' own compact
wire form (coordinator/messages.py) applies either way.
"""

from __future__ import annotations

import pickle
from typing import Any

PROTOCOL = pickle.HIGHEST_PROTOCOL


def dumps_response(response: Any) -> bytes:
    return pickle.dumps(response, PROTOCOL)


def loads_response(data: bytes) -> Any:
    return pickle.loads(data)
