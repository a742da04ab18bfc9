"""Slow clients cannot stall a partition leader (issue 45): a leader's listener with
SASL on (so on the node's address), hundreds of slow connections on real sockets (half
send a header promising the largest frame allowed before a login and go silent, half
send that header then a byte a second; each one closed is replaced until the commits
are done) and kafka-python consumers committing through it.

Checked on the mechanism, never on time: the strangers' frames fill their part of the
memory pool (more wait for room) while the logged-in consumers' commits are answered,
the partition's other work is served and a client arriving then logs in and commits;
every slow connection is closed at its frame's deadline (one log line each, nothing
answered) and every reservation is returned. The latency beside them is measured by
bench/slow_clients.py."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.slow_clients import PASSWORD, USER, SlowClients, commit, sasl_consumer
from coordinator.errors import Errors
from coordinator.messages import OffsetFetchRequest

from tests.gateway.direct_support import PartitionThread, free_port_range, group_of, wait_for

SLOW = 300
FRAME_BYTES = 65_536  # the largest frame before a login (max_unauthenticated_bytes)
# Strangers may hold half of it: 32 slow frames at once, the other slow connections wait.
POOL_BYTES = 4 * 1024 * 1024
DEADLINE_MS = 1_500
COMMITTERS = 2


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[PartitionThread]:
    users = tmp_path / "users"
    users.write_text(f"{USER}:{PASSWORD}\n")
    limits = (("max_unauthenticated_bytes", FRAME_BYTES), ("memory_pool_bytes", POOL_BYTES),
              ("max_request_bytes", POOL_BYTES // 2), ("frame_deadline_ms", DEADLINE_MS))
    running = PartitionThread(str(tmp_path / "log"), free_port_range(2), num_partitions=1,
                              sasl_users_file=str(users), limits=limits, super_users=(f"User:{USER}",))
    yield running
    running.close()


def pool_stats(leader: PartitionThread) -> dict[str, Any]:
    described = leader.describe()
    assert described is not None
    return described


def test_slow_clients_are_closed_at_their_deadline_and_never_stall_the_leaders_clients(
    leader: PartitionThread, caplog: pytest.LogCaptureFixture
) -> None:
    host, port = leader.kafka["host"], leader.port
    groups = [group_of(0, 1, f"slow-{n}") for n in range(COMMITTERS)]
    consumers = [sasl_consumer(f"{host}:{port}", group) for group in groups]
    slow = None
    try:
        for consumer in consumers:
            commit(consumer, "t", 0)  # logged in, its coordinator found
        with caplog.at_level(logging.INFO, logger="gateway.direct.listener"):
            slow = SlowClients(host, port, SLOW, FRAME_BYTES, replace=True)

            def strangers_hold_their_part() -> bool:
                stats = pool_stats(leader)
                full = stats["pool_bytes_in_use_unauthenticated"] == POOL_BYTES // 2
                return full and stats["pool_waiting"] > 0

            wait_for(strangers_hold_their_part, "the slow connections' frames filling their part of the pool")
            for offset in range(1, 6):
                for consumer in consumers:
                    commit(consumer, "t", offset)
            # A client arriving now logs in (frames before a login, as the strangers') and commits.
            consumers.append(sasl_consumer(f"{host}:{port}", groups[0]))
            commit(consumers[-1], "t", 5)
            fetched = leader.call(leader.actor.handle(OffsetFetchRequest(groups[0], None)))
            # Slow connections still waited for room after the commits (never fewer than those
            # replaced since): they held the strangers' part of the pool throughout.
            assert pool_stats(leader)["pool_waiting"] > 0
            slow.replace = False
            assert fetched.error is Errors.NONE and fetched.offsets()[("t", 0)] == 5
            assert [consumer.committed(_tp()) for consumer in consumers] == [5] * (COMMITTERS + 1)

            wait_for(lambda: (c := slow.snapshot()).closed == c.connected, "every slow connection closed")
        counts = slow.snapshot()
        assert counts.connected >= SLOW and counts.answered == 0
        deadlines = [r for r in caplog.records if "frame not whole" in r.getMessage()]
        assert len(deadlines) == counts.connected
        # The consumers' connections remain; every slow frame's bytes are back.
        wait_for(lambda: pool_stats(leader)["connections"] <= 2 * len(consumers), "the slow connections gone")
        stats = pool_stats(leader)
        held = (stats["pool_bytes_in_use"], stats["pool_bytes_in_use_unauthenticated"], stats["pool_waiting"])
        assert held == (0, 0, 0)
        commit(consumers[0], "t", 6)
    finally:
        if slow is not None:
            slow.close()
        for consumer in consumers:
            consumer.close()


def _tp() -> Any:
    from kafka.structs import TopicPartition

    return TopicPartition("t", 0)
