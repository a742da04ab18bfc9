"""DiskHealth: an outage starts once, backs off exponentially up to a cap, ends on recovery."""

from coordinator.replication import DiskHealth, disk_failed


def test_an_outage_backs_off_to_the_cap_and_ends_on_recovery() -> None:
    health = DiskHealth(retry_initial_ms=100, retry_max_ms=1_000)
    assert not health.failed and health.retry_in_ms(0) == 0
    assert health.on_failure("append: ENOSPC", now_ms=1_000) is True
    assert (health.since_ms, health.next_retry_ms, health.failures) == (1_000, 1_100, 1)
    assert health.on_failure("sync: ENOSPC", now_ms=1_010) is False  # the same outage
    assert (health.error, health.last_error, health.failures) == ("append: ENOSPC", "sync: ENOSPC", 1)
    delays = []
    for now in (1_100, 1_400, 2_000, 3_000, 4_000):
        health.on_retry_failed("still full", now)
        delays.append(health.next_retry_ms - now)  # type: ignore[operator]
    assert delays == [200, 400, 800, 1_000, 1_000]
    assert health.retry_in_ms(4_500) == 500 and health.retry_in_ms(9_999) == 0
    view = health.describe()
    assert view["failed"] and view["retries"] == 5 and view["since_ms"] == 1_000
    assert disk_failed({"disk": view}) and not disk_failed("gone") and not disk_failed({"state": "ACTIVE"})
    health.on_recovered()
    assert not health.failed and health.describe()["error"] is None and health.failures == 1
    assert health.on_failure("EIO", now_ms=9_000) and health.failures == 2 and health.retries == 0
