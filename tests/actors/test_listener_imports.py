"""Followers and standbys never import the Kafka listener (gateway/, kio); a leader does,
when it first leads, and without hypothesis; none imports the members', the controller's
or RE2's code (docs/capacity.md: an idle actor's memory). A leader listening imports only
the listener's light half: the gateway's code that serves a connection (kio's codec, the
handlers, the Ray client) comes with the first Kafka client, who is then answered.

Checked in a fresh interpreter, whose `sys.modules` only this scenario fills: a
standby, then a follower of a replicated partition, then a leader of another
partition with its listener on, all `OffsetPartition`s on one event loop without
Ray, as the actors run them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.gateway.direct_support import WAIT_S, free_port_range

REPO_ROOT = Path(__file__).resolve().parent.parent.parent

SCENARIO = """
import asyncio, json, struct, sys, uuid
from actors.core.settings import KafkaListenerSettings, ServiceSettings
from actors.partition.actor import OffsetPartition
from tests.actors.support import until

# The listener's code, and what no idle partition actor needs: client-side members, the
# controller, RE2 (regex subscriptions).
WATCHED = ("gateway", "kio", "hypothesis", "actors.member", "actors.controller", "re2",
           "gateway.direct.served", "gateway.connection", "kio.serial", "actors.client.client")
data_dir, low, high = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


def imported():
    return sorted(name for name in WATCHED if name in sys.modules)


def settings(**values):
    return ServiceSettings(data_dir=data_dir, namespace=f"imports-{uuid.uuid4().hex[:8]}", num_partitions=2,
                           kafka_listener=KafkaListenerSettings(ports=(low, high)), **values)


async def main():
    seen = {"start": imported()}
    standby = OffsetPartition(None, -1, settings())
    seen["standby"] = imported()
    replicated = settings(replication_factor=3, min_insync_replicas=2, replication_link=False)
    follower = OffsetPartition(0, 0, replicated, node_id="b")
    await follower.become_follower(1, "a", False, ("a", "b", "c"))
    await until(lambda: follower.follower is not None, "b follows a")
    seen["follower"] = imported()
    leader = OffsetPartition(1, 1, settings())
    await leader.activate()
    assert await leader.wait_active(30.0) == "ACTIVE"
    listening = await leader.kafka_listener()
    seen["leader"] = imported()
    seen["listening"] = listening is not None
    reader, writer = await asyncio.open_connection(listening["host"], listening["port"])
    payload = struct.pack(">hhih", 18, 0, 7, -1)  # ApiVersions v0, correlation id 7, no client id
    writer.write(struct.pack(">i", len(payload)) + payload)
    size, correlation_id, error_code = struct.unpack(">iih", await reader.readexactly(10))
    seen["answered"] = (correlation_id, error_code)
    seen["connected"] = imported()
    writer.close()
    for partition in (follower, leader):
        await partition.unload(partition.epoch)
    await leader.kafka.close()
    print(json.dumps(seen))


asyncio.run(main())
"""


def test_only_a_leader_imports_the_kafka_listener_and_none_what_it_does_not_use(tmp_path: Path) -> None:
    low, high = free_port_range(4)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCENARIO, str(tmp_path), str(low), str(high)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=WAIT_S * 2,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["start"] == seen["standby"] == seen["follower"] == []
    assert seen["listening"] is True
    # The listener's code came in with leadership; kio's optional hypothesis strategies did not.
    assert seen["leader"] == ["gateway", "kio"]
    # Its first client brought the served half, and was answered (ApiVersions: NONE).
    assert seen["answered"] == [7, 0]
    assert seen["connected"] == [
        "actors.client.client", "gateway", "gateway.connection", "gateway.direct.served", "kio", "kio.serial",
    ]
