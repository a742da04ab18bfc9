"""The Ray path's authorizer on a running service (issue 49, docs/security.md): a caller
without a credential or with a forged one is refused alone, with the reason; one with a
valid credential and the right ACLs works, without Read on a group it gets
GROUP_AUTHORIZATION_FAILED; an ACL change applies to its next requests. Administering
(ACLs, credentials, repartition) needs the bootstrap super user's credential, or ALTER on
the cluster; refused, it changes nothing."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

import actors
from actors import Client, GroupMember
from actors.cli.main import main
from actors.client.credential_file import read_credential_file
from actors.core.settings import KafkaListenerSettings
from coordinator import CoordinatorConfig
from coordinator.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from coordinator.admin_authz import AuthorizationError
from coordinator.credentials import CredentialError, issue
from coordinator.errors import Errors

from tests.ray.member_support import FAST, wait_until

pytestmark = pytest.mark.ray
NAMESPACE = "raygroups-creds-test"
TOPIC = "creds-orders"
SECURED_DIR: list[str] = []  # the secured service's data directory, for its admin.credential


def allow(principal: str, resource: ResourceType, name: str, operation: Operation) -> AclBinding:
    return AclBinding(resource, name, PatternType.LITERAL, principal, "*", operation, Permission.ALLOW)


@pytest.fixture(scope="module")
def secured(ray_session: None) -> Iterator[Client]:
    """A second service on the session's cluster, its Ray path authorized; the admin's client."""
    path = tempfile.mkdtemp(prefix="raygroups-creds-")
    SECURED_DIR[:] = [path]
    listener = KafkaListenerSettings(enabled=False, super_users=("User:admin",))
    fast = CoordinatorConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=500)
    started = actors.start(path, num_partitions=1, namespace=NAMESPACE, kafka_listener=listener,
                           ray_credentials=True, coordinator_config=fast)
    try:
        # The first super user's credential, as `raygroups start --ray-credentials` leaves it.
        bootstrap = read_credential_file(os.path.join(path, "admin.credential"))
        assert bootstrap == started.credential
        yield Client(started.controller, credential=bootstrap)
    finally:
        actors.stop(NAMESPACE)
        shutil.rmtree(path, ignore_errors=True)


def test_credentials_refuse_the_caller_alone_and_acls_apply(secured: Client) -> None:
    admin = secured
    admin.create_topic(TOPIC, 2)
    team_a = admin.issue_credential("User:team-a", 600)
    assert admin.create_acls([
        allow("User:team-a", ResourceType.GROUP, "creds-ok", Operation.READ),
        allow("User:team-a", ResourceType.TOPIC, TOPIC, Operation.READ),
    ]) == [(Errors.NONE, "")] * 2
    member = GroupMember("creds-ok", [TOPIC], client=Client(admin.controller, credential=team_a), **FAST)
    try:
        assert len(member.start().wait_for_assignment(timeout=20)) == 2
        member.commit({(TOPIC, 0): 5})

        nobody = Client(admin.controller, timeout_s=5)
        with pytest.raises(CredentialError, match="no credential"):
            nobody.fetch_offsets("creds-ok")
        forged = Client(admin.controller, credential=issue(b"x" * 32, "User:admin", 2**62, "f"))
        with pytest.raises(CredentialError, match="forged credential for User:admin"):
            forged.commit_offsets("creds-ok", {(TOPIC, 0): 0})

        stranger = GroupMember("creds-ok", [TOPIC], client=Client(admin.controller, timeout_s=5), **FAST)
        try:
            with pytest.raises(CredentialError, match="no credential"):
                stranger.start().wait_for_assignment(timeout=20)
        finally:
            stranger.close(timeout_s=5)
        member.commit({(TOPIC, 1): 7})  # the partition serves everyone else on
        committed = {(p.partition, p.offset) for p in admin.fetch_offsets("creds-ok").partitions}
        assert committed == {(0, 5), (1, 7)}, "the refused commit changed nothing"

        second = admin.issue_credential("User:team-a", 600)  # to revoke; the member keeps its own
        client_a = Client(admin.controller, credential=second)
        assert client_a.heartbeat("creds-no", 1, "m").error is Errors.GROUP_AUTHORIZATION_FAILED
        admin.create_acls([allow("User:team-a", ResourceType.GROUP, "creds-no", Operation.READ)])
        error = wait_until(lambda: _let_in(client_a), timeout_s=10)
        # Let in: the coordinator answers (the group has no such member), no longer the authorizer.
        assert error is not Errors.GROUP_AUTHORIZATION_FAILED
        assert admin.revoke_credential(second)
        wait_until(lambda: _refused(client_a), timeout_s=10)
        member.commit({(TOPIC, 1): 8})  # its credential is another
    finally:
        member.close(timeout_s=5)


def _refused(client: Client) -> bool:
    try:
        client.heartbeat("creds-no", 1, "m")
    except CredentialError as exc:
        return "revoked" in str(exc)
    return False


def _let_in(client: Client) -> Errors | None:
    error = client.heartbeat("creds-no", 1, "m").error
    return None if error is Errors.GROUP_AUTHORIZATION_FAILED else error


def test_administration_needs_the_super_users_credential(
    secured: Client, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = secured
    bootstrap_file = os.path.join(SECURED_DIR[0], "admin.credential")
    team = Client(admin.controller, credential=admin.issue_credential("User:team-x", 600), timeout_s=5)
    nobody = Client(admin.controller, timeout_s=5)
    grant = AclBinding(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL, "User:team-x", "*",
                       Operation.ALTER, Permission.ALLOW)
    with pytest.raises(CredentialError, match="no credential"):
        nobody.create_acls([grant])
    with pytest.raises(CredentialError, match="no credential"):
        nobody.issue_credential("User:admin", 60)
    for refused_call in (lambda: team.create_acls([grant]), lambda: team.issue_credential("User:admin", 60),
                         lambda: team.repartition(2, wait=False)):
        with pytest.raises(AuthorizationError) as refused:
            refused_call()
        assert refused.value.error is Errors.CLUSTER_AUTHORIZATION_FAILED
    assert admin.describe_acls(AclFilter(principal="User:team-x")) == [], "the refusals changed nothing"
    assert admin.repartition_status()["running"] is False

    # The commands: refused without a credential; with the bootstrap file, done.
    monkeypatch.delenv("RAYGROUPS_CREDENTIAL", raising=False)
    grant_cli = ["acls", "--namespace", NAMESPACE, "--add", "--allow-principal", "User:team-x",
                 "--operation", "Alter", "--cluster"]
    assert main(grant_cli) == 1
    assert "no credential" in capsys.readouterr().err
    assert admin.describe_acls(AclFilter(principal="User:team-x")) == [], "the refused command: nothing"
    assert main([*grant_cli, "--credential-file", bootstrap_file]) == 0
    admin.delete_acls([AclFilter(principal="User:team-x")])

    assert admin.create_acls([grant]) == [(Errors.NONE, "")]  # the bootstrap credential may
    assert team.issue_credential("User:team-y", 60).startswith("rgc1.")  # and now the team may
    admin.delete_acls([AclFilter(principal="User:team-x")])


def test_a_gateway_without_an_authorizer_is_refused_unless_loopback_only(secured: Client) -> None:
    """It would forward its Kafka clients over the leaders' unchecked serve_* methods."""
    from gateway import deploy

    with pytest.raises(Exception, match="without an authorizer.*--loopback-only"):
        deploy.start_gateways(deploy.GatewaySpec(port=0), NAMESPACE)
    assert deploy.gateway_actors(NAMESPACE) == [], "nothing left half started"
    try:
        addresses = deploy.start_gateways(deploy.GatewaySpec(port=0, loopback_only=True), NAMESPACE)
        assert addresses and {host for _, host, _ in addresses} == {"127.0.0.1"}
    finally:
        deploy.stop_gateways(NAMESPACE)
