"""Fixtures of the Ray integration tests: the session's service (tests/conftest.py)
with its topic registry, shared by the tests; each uses its own group and topic names."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors import Client

from tests.ray.member_support import Cleanup


@pytest.fixture
def registry(service: Client) -> Client:
    """The service's client, for tests that use its topic registry."""
    return service


@pytest.fixture
def cleanup(registry: Client) -> Iterator[Cleanup]:
    """Members and actors a test makes, closed after it."""
    made = Cleanup()
    yield made
    made.close()
