"""Which responses mean "ask the coordinator again", and the backoff policy.

A response is retriable when the whole request failed with a coordinator
error (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE):
the client then refreshes its routing and retries until its deadline.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from coordinator.errors import RETRIABLE_COORDINATOR_ERRORS, Errors
from coordinator.status import item_errors


class CoordinatorUnavailableError(RuntimeError):
    """The coordinator did not answer usefully before the call's deadline."""


def coordinator_error(response: Any) -> Errors | None:
    """The retriable error a whole response carries, if any: every item of a
    per-partition or per-group answer has it, or the response's own error."""
    items = item_errors(response)
    errors = {response.error} if items is None else set(items)
    if len(errors) == 1:
        (error,) = errors
        if error in RETRIABLE_COORDINATOR_ERRORS:
            return error
    return None


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with jitter, like Kafka's retry.backoff(.max).ms."""

    initial_s: float = 0.05
    max_s: float = 1.0

    def delay_s(self, attempt: int) -> float:
        base = min(self.max_s, self.initial_s * (2**attempt))
        return base * random.uniform(0.8, 1.2)
