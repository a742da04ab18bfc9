"""Session-wide test setup.

Tests start throwaway local Ray clusters: Ray 2.60's default token
authentication would write ~/.ray/auth_token and warn on every start.
"""

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

# Messages pickle in their compact form in every test, whichever tests ran
# before: importing actors.core.wire registers it (tests/core/test_wire.py checks).
import actors.core.wire  # noqa: E402, F401


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """One local Ray cluster for the whole session: few CPUs, quiet logs.

    4 logical CPUs on a 2-core machine: Spark executors hold one each for
    their lifetime, and the service's actors take none.
    """
    import ray

    from actors.service import init_local_ray

    init_local_ray(num_cpus=4)
    yield
    ray.shutdown()


@pytest.fixture
def data_dir() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="raygroups-test-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def service(ray_session: None) -> Iterator[object]:
    """The coordinator service on the session cluster, shared by the tests
    (each uses its own group names); removed with its data at the end."""
    import actors
    from coordinator import CoordinatorConfig

    path = tempfile.mkdtemp(prefix="raygroups-service-")
    client = actors.start(
        path,
        num_partitions=4,
        coordinator_config=CoordinatorConfig(
            group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=500,
            # Consumer groups (KIP-848) reconcile at the heartbeat interval the coordinator gives.
            group_consumer_heartbeat_interval_ms=250, group_consumer_session_timeout_ms=10_000,
        ),
    )
    try:
        yield client
        actors.stop()
    finally:
        shutil.rmtree(path, ignore_errors=True)
