"""Ray-path credentials by default on a running service (issue 49, docs/security.md, The
default): a new service started with SASL configured authorizes its Ray callers and leaves
the super user's credential for the operator; a service started without keeps that setting
when it is restarted with SASL configured (its Ray clients keep working). The operator's
flags over both, and a recorded "on" kept: tests/actors/test_ray_credentials_default.py."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

import actors
import actors.cli.main as cli_main
from actors import Client
from actors.client.connect import CREDENTIAL_ENV
from actors.client.credential_file import read_credential_file
from actors.core.settings import KafkaListenerSettings, ServiceSettings
from coordinator.acl import AclFilter
from coordinator.credentials import CredentialError

pytestmark = pytest.mark.ray
NAMESPACE = "raygroups-creds-default-test"


@pytest.fixture
def data_dir(ray_session: None) -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="raygroups-creds-default-")
    try:
        yield path
    finally:
        actors.stop(NAMESPACE)
        shutil.rmtree(path, ignore_errors=True)


def _sasl(data_dir: str) -> KafkaListenerSettings:
    """SASL configured; no listener opened (the setting is what counts, not a port)."""
    users = os.path.join(data_dir, "users")
    with open(users, "w") as f:
        f.write("alice:alice-secret\n")
    return KafkaListenerSettings(enabled=False, sasl_users_file=users)


def _start(data_dir: str, listener: KafkaListenerSettings) -> Client:
    """Settings given whole (no standby: fewer processes to start), its `ray_credentials`
    left at the field's default: not said, so the default rule decides."""
    return actors.start(settings=ServiceSettings(data_dir, num_partitions=1, namespace=NAMESPACE,
                                                 standby_actors=0, kafka_listener=listener))


def test_a_new_service_with_sasl_authorizes_its_ray_callers(
    data_dir: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = _start(data_dir, _sasl(data_dir))
    assert admin.credential is not None, "on by default: the returned client is the super user's"
    assert read_credential_file(os.path.join(data_dir, "admin.credential")) == admin.credential
    assert admin.fetch_offsets("default-on").error.name == "NONE"
    with pytest.raises(CredentialError, match="no credential"):
        Client(admin.controller, timeout_s=5).fetch_offsets("default-on")
    # The operator's commands, run with this data directory, work at once: no option given.
    monkeypatch.setenv(CREDENTIAL_ENV, "")  # none given (and the one `main` sets is undone after)
    monkeypatch.setattr(cli_main, "DEFAULT_DATA_DIR", data_dir)  # RAYGROUPS_DATA_DIR's
    grant = ["acls", "--namespace", NAMESPACE, "--add", "--allow-principal", "User:alice",
             "--operation", "Read", "--group", "default-on"]
    assert cli_main.main(grant) == 0, capsys.readouterr().err
    assert [b.principal for b in admin.describe_acls(AclFilter())] == ["User:alice"]


def test_a_service_started_without_keeps_it_off_across_a_restart_until_told(data_dir: str) -> None:
    first = _start(data_dir, KafkaListenerSettings(enabled=False))  # loopback only: off
    assert first.credential is None
    first.commit_offsets("default-off", {("t", 0): 3})
    actors.stop(NAMESPACE)

    # Restarted with SASL now configured: the recorded setting stays, its Ray clients work on.
    again = _start(data_dir, _sasl(data_dir))
    assert again.credential is None and not os.path.exists(os.path.join(data_dir, "admin.credential"))
    anyone = Client(again.controller, timeout_s=5)
    assert {p.offset for p in anyone.fetch_offsets("default-off").partitions} == {3}
