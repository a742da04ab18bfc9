"""The topic registry's administrative methods with `ray_credentials` on (actors/client/admin_guard.py),
the bootstrap credential's file (actors/client/credential_file.py) and `--credential-file` (no Ray)."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from actors.cli.main import present_credential_file
from actors.client.acl_table import ACL_KIND
from actors.client.connect import CREDENTIAL_ENV
from actors.client.credential_file import (
    DEFAULT_SUPER_USER,
    bootstrap_principal,
    read_credential_file,
    with_super_user,
    write_credential_file,
)
from actors.client.topic_registry import TopicRegistry
from actors.core.settings import KafkaListenerSettings, ServiceSettings
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
from coordinator.checks import InvalidRequestError
from coordinator.credentials import CredentialError, issue
from coordinator.errors import Errors
from coordinator.service_state import ServiceEntry

from tests.actors.service_store_support import ShardStore

ADMIN, TEAM = "User:admin", "User:team-a"


def allow(resource: ResourceType, name: str, operation: Operation, pattern: PatternType = PatternType.LITERAL
          ) -> AclBinding:
    return AclBinding(resource, name, pattern, TEAM, "*", operation, Permission.ALLOW)


def guarded_settings(tmp_path: Path) -> ServiceSettings:
    return ServiceSettings(data_dir=str(tmp_path), ray_credentials=True,
                           kafka_listener=KafkaListenerSettings(enabled=False, super_users=(ADMIN,)))


def guarded_registry(tmp_path: Path, store: ShardStore | None = None) -> TopicRegistry:
    return TopicRegistry(guarded_settings(tmp_path), store=store if store is not None else ShardStore())


def credentials(registry: TopicRegistry) -> tuple[str, str]:
    """The admin's credential, as `actors.start` gets it (unchecked `serve`), and a team's."""
    admin, _ = registry.serve("issue_credential", ADMIN, 3600)
    team, _ = registry.serve("issue_credential", TEAM, 3600)
    return admin, team


def test_without_a_super_users_credential_nothing_administrative_is_done(tmp_path: Path) -> None:
    registry = guarded_registry(tmp_path)
    admin, team = credentials(registry)
    cluster_alter = AclBinding(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL, TEAM, "*",
                               Operation.ALTER, Permission.ALLOW)
    with pytest.raises(CredentialError, match="no credential"):
        registry.create_acls([cluster_alter])
    forged = issue(b"y" * 32, ADMIN, 2**62, "f")
    with pytest.raises(CredentialError, match="forged credential for User:admin"):
        registry.create_acls([cluster_alter], credential=forged)
    refusals = [
        ("create_acls", ([cluster_alter],)), ("delete_acls", ([AclFilter()],)),
        ("describe_acls", (AclFilter(),)),
        ("issue_credential", (ADMIN, 60)), ("revoke_credential", (admin,)),
        ("config_set", ({"group_max_size": 5},)), ("config_get", (None,)),
    ]
    for method, args in refusals:
        with pytest.raises(AuthorizationError) as refused:
            getattr(registry, method)(*args, credential=team)
        assert refused.value.error is Errors.CLUSTER_AUTHORIZATION_FAILED, method
    with pytest.raises(AuthorizationError) as refused:
        registry.create_topic("orders", 3, credential=team)
    assert refused.value.error is Errors.TOPIC_AUTHORIZATION_FAILED
    # Nothing changed: no ACL, no revocation, no setting, no topic (read unchecked).
    assert registry.serve("describe_acls", AclFilter())[2] == []
    assert registry.credentials.revoked == {}
    assert registry.settings.describe(["group_max_size"])[0]["value"] != 5
    assert registry.describe(None) == {}

    assert registry.create_acls([cluster_alter], credential=admin) == [(Errors.NONE, "")]
    assert registry.config_set({"group_max_size": 5}, credential=admin) == ""  # refused above: not as invalid
    another, why = registry.issue_credential("User:team-b", 60, credential=team)  # ALTER on the cluster now
    assert why == "" and another.startswith("rgc1.")
    assert registry.revoke_credential(another, credential=team)[1] == ""
    registry.create_acls([allow(ResourceType.TOPIC, "team-a.", Operation.CREATE, PatternType.PREFIXED)],
                         credential=admin)
    assert registry.create_topic("team-a.orders", 2, credential=team) is Errors.NONE
    with pytest.raises(AuthorizationError):
        registry.create_topic("team-b.orders", 2, credential=team)
    registry.revoke_credential(team, credential=admin)
    with pytest.raises(CredentialError, match="revoked"):
        registry.describe_acls(AclFilter(), credential=team)


def test_an_argument_passed_by_name_is_checked_as_by_position(tmp_path: Path) -> None:
    registry = guarded_registry(tmp_path)
    admin, team = credentials(registry)
    assert registry.create_topic("orders", 1, credential=admin) is Errors.NONE
    for call in (lambda: registry.set_end_offsets(offsets={("orders", 0): 5}, credential=team),
                 lambda: registry.create_topic(name="orders2", partitions=1, credential=team)):
        with pytest.raises(AuthorizationError) as refused:
            call()
        assert refused.value.error is Errors.TOPIC_AUTHORIZATION_FAILED
    assert registry.set_end_offsets(offsets={("orders", 0): 5}, at_ms=1, credential=admin) is not None
    with pytest.raises(InvalidRequestError, match="set_end_offsets"):
        registry.set_end_offsets({}, nonsense=1, credential=admin)


def test_the_controllers_methods_ask_the_registry_and_serve_is_for_admin_methods_only(tmp_path: Path) -> None:
    registry = guarded_registry(tmp_path)
    admin, team = credentials(registry)
    for method in ("repartition", "rolling_restart", "reassign", "elect_leader"):
        registry.authorize_admin(method, (), admin)
        with pytest.raises(AuthorizationError):
            registry.authorize_admin(method, (), team)
        with pytest.raises(CredentialError):
            registry.authorize_admin(method, (), None)
    with pytest.raises(ValueError, match="not an administrative method"):
        registry.serve("ray_auth_if_changed", None)
    with pytest.raises(ValueError, match="not an administrative method"):
        registry.serve("repartition", 8)


def test_unreadable_acls_let_only_super_users_administer(tmp_path: Path) -> None:
    store = ShardStore()
    registry = guarded_registry(tmp_path, store)
    admin, team = credentials(registry)
    registry.create_acls([allow(ResourceType.CLUSTER, CLUSTER_NAME, Operation.ALTER)], credential=admin)
    store.write(registry.writer, [ServiceEntry(ACL_KIND, "garbage", b"")])
    again = guarded_registry(tmp_path, store.restarted())
    with pytest.raises(AuthorizationError, match="unreadable"):
        again.issue_credential("User:x", 60, credential=team)
    assert again.delete_acls([AclFilter()], credential=admin)[0][0] is Errors.NONE


def test_off_by_default_no_credential_is_needed(tmp_path: Path) -> None:
    registry = TopicRegistry(ServiceSettings(data_dir=str(tmp_path)), store=ShardStore())
    assert registry.create_topic("orders", 1) is Errors.NONE
    assert registry.config_set({"group_max_size": 7}) == ""


def test_a_registry_started_off_follows_the_settings_in_force(tmp_path: Path) -> None:
    """A rolling restart that turns it on restarts the registry with its start settings:
    it then checks as the controller's settings in force say."""
    start = replace(guarded_settings(tmp_path), ray_credentials=False)
    registry = TopicRegistry(start, store=ShardStore(), rolled_settings=lambda: {"ray_credentials": True})
    admin, _ = credentials(registry)  # its first call loads the store and reads the roll's settings
    with pytest.raises(CredentialError, match="no credential"):
        registry.create_topic("orders", 1)
    assert registry.create_topic("orders", 1, credential=admin) is Errors.NONE


def test_the_bootstrap_credential_file_is_its_owners_alone(tmp_path: Path) -> None:
    assert with_super_user(KafkaListenerSettings()).super_users == (DEFAULT_SUPER_USER,)
    named = KafkaListenerSettings(super_users=("User:ops", "User:root"))
    assert with_super_user(named) is named and bootstrap_principal(named) == "User:ops"
    os.umask(0o022)
    path = write_credential_file(str(tmp_path / "data"), "rgc1.abc.def")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and path.endswith("data/admin.credential")
    assert read_credential_file(path) == "rgc1.abc.def"
    assert write_credential_file(str(tmp_path / "data"), "rgc1.new.one") == path  # a new start: replaced
    assert read_credential_file(path) == "rgc1.new.one"
    os.chmod(path, 0o644)
    with pytest.raises(ValueError, match="readable by others.*chmod 600"):
        read_credential_file(path)
    with pytest.raises(ValueError, match="No such file"):
        read_credential_file(str(tmp_path / "missing"))
    empty = tmp_path / "empty"
    empty.write_text("\n")
    empty.chmod(0o600)
    with pytest.raises(ValueError, match="is empty"):
        read_credential_file(str(empty))


def test_credential_file_option_becomes_the_processes_credential(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CREDENTIAL_ENV, raising=False)
    path = write_credential_file(str(tmp_path), "rgc1.abc.def")

    class Args:
        credential_file = path

    present_credential_file(Args())  # type: ignore[arg-type]
    assert os.environ[CREDENTIAL_ENV] == "rgc1.abc.def"
    monkeypatch.delenv(CREDENTIAL_ENV)
    Args.credential_file = None  # type: ignore[assignment]
    present_credential_file(Args())  # type: ignore[arg-type]
    assert CREDENTIAL_ENV not in os.environ
