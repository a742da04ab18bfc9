"""Small helpers for the Ray integration tests: members driven by hand."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ray

from actors.client.client import Client
from coordinator import Errors
from coordinator.consumer_protocol import Subscription, encode_subscription
from coordinator.messages import JoinGroupRequest, JoinGroupResponse, SyncGroupRequest

SUB = encode_subscription(Subscription(("t",)))


def join_request(group: str, member_id: str = "", session_ms: int = 3_000, **kw: Any) -> JoinGroupRequest:
    kw.setdefault("rebalance_timeout_ms", 30_000)
    return JoinGroupRequest(
        group,
        session_ms,
        protocol_type="consumer",
        protocols=(("range", SUB),),
        member_id=member_id,
        client_id="test",
        **kw,
    )


def join(client: Client, group: str, member_id: str = "", **kw: Any) -> JoinGroupResponse:
    """JoinGroup including the KIP-394 member-id round."""
    response = client.join_group(join_request(group, member_id, **kw))
    if response.error is Errors.MEMBER_ID_REQUIRED:
        response = client.join_group(join_request(group, response.member_id, **kw))
    return response


def form_group(client: Client, group: str, n: int, **kw: Any) -> tuple[list[str], int]:
    """n members join concurrently and sync; returns (member ids, leader first; generation)."""
    with ThreadPoolExecutor(n) as pool:
        first = list(pool.map(lambda _: client.join_group(join_request(group, **kw)), range(n)))
        ids = [r.member_id for r in first]
        joined = list(pool.map(lambda m: client.join_group(join_request(group, m, **kw)), ids))
        while {r.generation_id for r in joined} != {max(r.generation_id for r in joined)} or any(
            r.error is not Errors.NONE for r in joined
        ):
            joined = list(pool.map(lambda m: client.join_group(join_request(group, m, **kw)), ids))
        generation = joined[0].generation_id
        leader = joined[0].leader
        assignment = tuple((m, m.encode()) for m in ids)
        syncs = list(
            pool.map(
                lambda m: client.sync_group(
                    SyncGroupRequest(group, generation, m, assignments=assignment if m == leader else ())
                ),
                ids,
            )
        )
    assert all(s.error is Errors.NONE for s in syncs), syncs
    # The elected leader first: callers name the members (leader, follower, ...).
    return sorted(ids, key=lambda m: m != leader), generation


def wait_until(predicate: Any, timeout_s: float = 30.0, interval_s: float = 0.05, explain: Any = None) -> Any:
    """Poll `predicate` until true; on timeout report `explain()` (what was seen)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in time; last seen: {explain() if explain else value!r}")
        time.sleep(interval_s)


def kill_and_wait_dead(actor: Any, timeout_s: float = 30.0) -> None:
    """`ray.kill` a partition actor for good and return once Ray reports it
    dead (its calls fail with ActorDiedError). `ray.kill` is asynchronous: a
    call made just after it may still be served by the living actor."""
    ray.kill(actor, no_restart=True)

    def reported_dead() -> bool:
        try:
            ray.get(actor.ping.remote(), timeout=5)
        except ray.exceptions.ActorDiedError:
            return True
        except ray.exceptions.GetTimeoutError:
            pass
        return False

    wait_until(reported_dead, timeout_s, explain=lambda: f"{actor} still answers after ray.kill")


def group_state(client: Client, group: str) -> str:
    return client.describe_groups([group])[0].state
