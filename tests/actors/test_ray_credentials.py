"""The Ray path's credentials: the registry's secret and revocations as service state, and the
partition leader's guard (actors/partition/ray_guard.py) deciding per call and request (no Ray)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from typing import Any

import pytest

from actors.client.topic_registry import TopicRegistry
from actors.core.settings import KafkaListenerSettings, ServiceSettings
from actors.partition.ray_guard import RayGuard, decisions_for
from coordinator.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from coordinator.credentials import CredentialError
from coordinator.errors import Errors
from coordinator.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    OffsetCommitPartition,
    OffsetCommitRequest,
)

from tests.actors.service_store_support import ShardStore


class Clock:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def now_ms(self) -> int:
        return self.ms


def registry(tmp_path: os.PathLike[str], store: ShardStore, clock: Clock) -> TopicRegistry:
    return TopicRegistry(ServiceSettings(data_dir=str(tmp_path)), clock=clock, store=store)


def read_group(principal: str, group: str) -> AclBinding:
    return AclBinding(ResourceType.GROUP, group, PatternType.LITERAL, principal, "*", Operation.READ,
                      Permission.ALLOW)


def test_the_secret_is_made_once_and_survives_a_restart_as_do_revocations(tmp_path: os.PathLike[str]) -> None:
    store, clock = ShardStore(), Clock()
    first = registry(tmp_path, store, clock)
    token, _, secret, revoked = first.ray_auth_if_changed(None)
    assert len(secret) == 32 and not revoked
    assert first.ray_auth_if_changed(token) is None, "unchanged: one small answer"
    credential, why = first.issue_credential("User:team-a", 3600)
    assert why == ""
    revoked_id, why = first.revoke_credential(credential)
    assert why == "" and first.ray_auth_if_changed(token)[3] == {revoked_id}
    again = registry(tmp_path, store.restarted(), clock)
    _, _, secret_again, revoked_again = again.ray_auth_if_changed(None)
    assert (secret_again, revoked_again) == (secret, {revoked_id})
    assert again.issue_credential("alice", 3600) == ("", "could not parse the principal 'alice': "
                                                        "not of the form Type:name")
    assert again.issue_credential("User:x", 0)[1].startswith("the ttl must be")
    assert again.revoke_credential("nonsense")[1].startswith("malformed credential")


def settings(tmp_path: os.PathLike[str]) -> ServiceSettings:
    listener = KafkaListenerSettings(super_users=("User:admin",))
    return replace(ServiceSettings(data_dir=str(tmp_path)), ray_credentials=True, kafka_listener=listener)


def guard_with(tmp_path: os.PathLike[str], reg: TopicRegistry, clock: Clock) -> RayGuard:
    def unreachable() -> Any:
        raise RuntimeError("no Ray in this test")
    guard = RayGuard(settings(tmp_path), unreachable, clock.now_ms)
    guard.watch.apply(reg.ray_auth_if_changed(None))
    return guard


def commit(group: str) -> OffsetCommitRequest:
    return OffsetCommitRequest(group, (OffsetCommitPartition("t", 0, 1),))


def test_the_guard_refuses_bad_credentials_and_checks_each_request(tmp_path: os.PathLike[str]) -> None:
    store, clock = ShardStore(), Clock()
    reg = registry(tmp_path, store, clock)
    reg.create_acls([read_group("User:team-a", "a-group")])
    guard = guard_with(tmp_path, reg, clock)
    team_a, _ = reg.issue_credential("User:team-a", 60)
    admin, _ = reg.issue_credential("User:admin", 60)
    other = TopicRegistry(ServiceSettings(data_dir=str(tmp_path)), clock=clock, store=ShardStore())
    forged, _ = other.issue_credential("User:team-a", 60)
    heartbeats = [HeartbeatRequest("a-group", 1, "m"), HeartbeatRequest("b-group", 1, "m")]

    async def run() -> None:
        for bad, why in ((None, "no credential"), (forged, "forged"), ("rgc1.x.y", "malformed")):
            decisions = await decisions_for(guard, bad, heartbeats)
            assert all(isinstance(d.answer, CredentialError) and why in str(d.answer) for d in decisions)
            assert all(d.send is None for d in decisions), "nothing reaches the runtime"
        allowed, denied = await decisions_for(guard, team_a, heartbeats)
        assert allowed.send == heartbeats[0]
        assert denied.send is None and denied.answer == HeartbeatResponse(Errors.GROUP_AUTHORIZATION_FAILED)
        assert [d.send for d in await decisions_for(guard, admin, heartbeats)] == heartbeats, "super user"
        (refused,) = await decisions_for(guard, team_a, [object()])
        assert refused.send is None and isinstance(refused.answer, ValueError), "malformed: refused alone"
        (refused,) = await decisions_for(guard, admin, [object()])
        assert isinstance(refused.answer, ValueError), "a super user's requests are validated too"
        # An ACL change and a revocation apply from the next view on.
        reg.create_acls([read_group("User:team-a", "b-group")])
        guard.watch.apply(reg.ray_auth_if_changed(guard.watch.token))
        assert [d.send for d in await decisions_for(guard, team_a, heartbeats)] == heartbeats
        (topic_denied,) = await decisions_for(guard, team_a, [commit("b-group")])
        assert topic_denied.answer.partitions[0].error is Errors.TOPIC_AUTHORIZATION_FAILED, "no Read on t"
        reg.revoke_credential(team_a)
        guard.watch.apply(reg.ray_auth_if_changed(guard.watch.token))
        (revoked,) = await decisions_for(guard, team_a, [commit("a-group")])
        assert "revoked" in str(revoked.answer)
        clock.ms += 60_000
        (expired,) = await decisions_for(guard, admin, [commit("a-group")])
        assert "expired" in str(expired.answer), "a remembered credential still expires"
        guard.close()

    asyncio.run(run())


def test_before_the_first_view_requests_are_answered_retriable(tmp_path: os.PathLike[str]) -> None:
    def unreachable() -> Any:
        raise RuntimeError("registry down")
    guard = RayGuard(settings(tmp_path), unreachable, Clock().now_ms)

    async def run() -> None:
        import actors.partition.ray_guard as ray_guard
        ray_guard.FIRST_VIEW_S, saved = 0.05, ray_guard.FIRST_VIEW_S
        try:
            (decision,) = await decisions_for(guard, "anything", [HeartbeatRequest("g", 1, "m")])
        finally:
            ray_guard.FIRST_VIEW_S = saved
            guard.close()
        assert decision.send is None
        assert decision.answer == HeartbeatResponse(Errors.COORDINATOR_NOT_AVAILABLE)

    asyncio.run(run())


@pytest.mark.parametrize("text, seconds", [("30d", 30 * 86400), ("12h", 43200), ("90m", 5400), ("5s", 5)])
def test_ttl_units(text: str, seconds: float) -> None:
    from actors.cli.credentials import ttl_seconds
    assert ttl_seconds(text) == seconds


class _Method:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    async def _call(self, token: Any) -> Any:
        return self.answer(token)

    def remote(self, token: Any) -> Any:
        return self._call(token)


def test_a_nudge_reads_the_acls_at_once_not_at_the_next_interval(tmp_path: os.PathLike[str]) -> None:
    """The registry's push after an ACL change (`topics_changed`): the watch reads at once, so
    the interval (here an hour) only bounds a lost push."""
    store, clock = ShardStore(), Clock()
    reg = registry(tmp_path, store, clock)
    fake = type("Registry", (), {})()
    fake.ray_auth_if_changed = _Method(reg.ray_auth_if_changed)
    guard = RayGuard(settings(tmp_path), lambda: fake, clock.now_ms)
    guard.watch.interval_s = 3600.0
    team_a, _ = reg.issue_credential("User:team-a", 60)
    beat = [HeartbeatRequest("a-group", 1, "m")]

    async def run() -> None:
        try:
            (before,) = await decisions_for(guard, team_a, beat)
            assert before.answer == HeartbeatResponse(Errors.GROUP_AUTHORIZATION_FAILED)
            reg.create_acls([read_group("User:team-a", "a-group")])
            guard.nudge()
            for _ in range(200):  # bounded: 2 s, far below the hour
                (after,) = await decisions_for(guard, team_a, beat)
                if after.send is not None:
                    break
                await asyncio.sleep(0.01)
            assert after.send == beat[0]
        finally:
            guard.close()

    asyncio.run(run())


def test_a_partly_refused_commit_is_answered_whole() -> None:
    from actors.partition.ray_guard import RAY_HOST, completing
    from coordinator.acl import Authorizer
    from coordinator.authz import check
    from coordinator.checks import InvalidRequestError
    from coordinator.messages import OffsetCommitResponse, PartitionResult

    topic = AclBinding(ResourceType.TOPIC, "ok", PatternType.LITERAL, "User:a", "*", Operation.READ,
                       Permission.ALLOW)
    request = OffsetCommitRequest("g", (OffsetCommitPartition("ok", 0, 1), OffsetCommitPartition("no", 0, 1)))
    decision = check(Authorizer([read_group("User:a", "g"), topic]), "User:a", RAY_HOST, request)
    assert decision.send.partitions == request.partitions[:1], "only the allowed part reaches the runtime"
    answered: list[Any] = []
    completing(decision, answered.append)(OffsetCommitResponse((PartitionResult("ok", 0, Errors.NONE),)))
    assert answered == [OffsetCommitResponse((PartitionResult("ok", 0, Errors.NONE),
                                              PartitionResult("no", 0, Errors.TOPIC_AUTHORIZATION_FAILED)))]
    failed = InvalidRequestError("the runtime refused it")
    completing(decision, answered.append)(failed)
    assert answered[-1] is failed
