"""Whether a service runs with Ray-path credentials when not told (issue 49, docs/security.md,
The default): the rule (`actors.core.settings.ray_credentials_default`), what counts as
reachable beyond loopback, the setting a service records for its next start (the
controller's metadata), and the operator's commands presenting the super user's file
without being told. Pure: no Ray."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import actors.cli.main as cli_main
from actors.cli.main import build_parser, present_credential_file
from actors.client.connect import CREDENTIAL_ENV
from actors.client.credential_file import write_credential_file
from actors.controller.state import ControlState, recorded_ray_credentials
from actors.core.settings import (
    SASL_USERS_ENV,
    KafkaListenerSettings,
    ray_credentials_default,
    reachable_beyond_loopback,
)

from tests.controller.fake import FakeCluster, MemoryStore
from tests.controller.helpers import make_plane, run


@pytest.mark.parametrize(("explicit", "recorded", "exposed", "on"), [
    # a new service: on exactly when reachable beyond loopback
    (None, None, False, False),
    (None, None, True, True),
    # a service started before keeps what it recorded, whatever its exposure now
    (None, False, True, False),
    (None, True, False, True),
    # the operator's word wins over both
    (True, False, False, True),
    (False, True, True, False),
    (False, None, True, False),
    (True, None, False, True),
])
def test_the_operator_then_the_record_then_the_exposure_decide(
    explicit: bool | None, recorded: bool | None, exposed: bool, on: bool
) -> None:
    assert ray_credentials_default(explicit, recorded, exposed) is on


def test_sasl_or_tls_configured_is_reachable_beyond_loopback() -> None:
    assert not reachable_beyond_loopback(KafkaListenerSettings(), {})
    assert reachable_beyond_loopback(KafkaListenerSettings(sasl_users_file="/etc/users"), {})
    assert reachable_beyond_loopback(KafkaListenerSettings(tls_cert="c.pem", tls_key="k.pem"), {})
    # SASL users from the environment, as the gateways and listeners read them
    assert reachable_beyond_loopback(KafkaListenerSettings(), {SASL_USERS_ENV: "alice:pw"})
    # set but empty: SASL is configured (the gateway refuses to start for want of users), not off
    assert reachable_beyond_loopback(KafkaListenerSettings(), {SASL_USERS_ENV: ""})
    # no leaders' listeners (--no-direct), the gateways keep the security options
    assert reachable_beyond_loopback(KafkaListenerSettings(enabled=False, sasl_users_file="/etc/users"), {})
    # the authorizer's own options alone open nothing
    assert not reachable_beyond_loopback(KafkaListenerSettings(super_users=("User:ops",)), {})


def test_the_record_of_saved_metadata() -> None:
    assert recorded_ray_credentials(None) is None  # a new service
    # metadata of a service started before the setting was recorded: it ran without it
    assert recorded_ray_credentials({"num_partitions": 4, "epochs": {}}) is False
    assert recorded_ray_credentials({"ray_credentials": True}) is True
    assert recorded_ray_credentials({"ray_credentials": False}) is False
    assert recorded_ray_credentials({"ray_credentials": "yes"}) is False  # never on by mistake of a value


def test_the_metadata_keeps_the_setting_through_json() -> None:
    state = ControlState.fresh(2)
    assert "ray_credentials" not in state.to_json()
    state.ray_credentials = True
    again = ControlState.from_json(state.to_json(), 2)
    assert again.ray_credentials is True
    assert recorded_ray_credentials(again.to_json()) is True


@pytest.mark.parametrize("on", [False, True])
def test_a_started_controller_records_what_the_service_runs_with(on: bool) -> None:
    async def scenario() -> None:
        store = MemoryStore()
        store.save({**ControlState.fresh(3).to_json()})  # a service of before: nothing recorded
        assert recorded_ray_credentials(store.load()) is False
        plane = make_plane(FakeCluster(), store, ray_credentials=on)
        await plane.start()
        assert recorded_ray_credentials(store.load()) is on

    run(scenario())


def _args(*argv: str) -> object:
    return build_parser().parse_args(list(argv))


def test_the_commands_present_the_super_users_file_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "data"
    monkeypatch.setenv(CREDENTIAL_ENV, "")  # none given (and what the test sets is undone after)
    monkeypatch.setattr(cli_main, "DEFAULT_DATA_DIR", str(data_dir))  # RAYGROUPS_DATA_DIR's
    present_credential_file(_args("status"))  # no file there: nothing presented
    assert not os.environ[CREDENTIAL_ENV]

    write_credential_file(str(data_dir), "rgc1.super.user")
    present_credential_file(_args("status"))
    assert os.environ[CREDENTIAL_ENV] == "rgc1.super.user"

    monkeypatch.setenv(CREDENTIAL_ENV, "rgc1.given.one")  # the operator's own wins
    present_credential_file(_args("status"))
    assert os.environ[CREDENTIAL_ENV] == "rgc1.given.one"

    monkeypatch.setenv(CREDENTIAL_ENV, "")
    os.chmod(data_dir / "admin.credential", 0o644)  # readable by others: not presented, and said so
    present_credential_file(_args("status"))
    assert not os.environ[CREDENTIAL_ENV]
    assert "readable by others" in capsys.readouterr().err


def test_start_flags_say_on_off_or_nothing() -> None:
    assert _args("start").ray_credentials is None  # type: ignore[attr-defined]
    assert _args("start", "--ray-credentials").ray_credentials is True  # type: ignore[attr-defined]
    assert _args("start", "--no-ray-credentials").ray_credentials is False  # type: ignore[attr-defined]
