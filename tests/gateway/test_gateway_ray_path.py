"""A gateway in front of a service that authorizes Ray callers needs an authorizer of its own,
or the operator's word that it serves loopback only (gateway.security.check_ray_path; no Ray)."""

from __future__ import annotations

import pytest

from actors.cli.main import build_parser
from gateway.cli import _limits, _spec
from gateway.security import SecurityConfig, SecurityError, check_ray_path


def test_without_an_authorizer_a_gateway_is_refused_before_a_ray_credentials_service() -> None:
    plain = SecurityConfig()
    check_ray_path("127.0.0.1", plain, ray_credentials=False)  # as before: loopback, no authorizer
    with pytest.raises(SecurityError, match="without an authorizer.*--ray-credentials.*--loopback-only"):
        check_ray_path("127.0.0.1", plain, ray_credentials=True)
    check_ray_path("127.0.0.1", SecurityConfig(loopback_only=True), ray_credentials=True)
    check_ray_path("::1", SecurityConfig(loopback_only=True), ray_credentials=True)
    with pytest.raises(SecurityError, match="--loopback-only, but 10.1.2.3 is not loopback"):
        check_ray_path("10.1.2.3", SecurityConfig(loopback_only=True), ray_credentials=True)
    with pytest.raises(SecurityError, match="but 0.0.0.0 is not loopback"):
        check_ray_path("0.0.0.0", SecurityConfig(loopback_only=True), ray_credentials=True)
    sasl = SecurityConfig(plain_users={"alice": "pw"})
    check_ray_path("10.1.2.3", sasl, ray_credentials=True)  # its own authorizer: allowed anywhere
    check_ray_path("127.0.0.1", SecurityConfig(authorizer=True), ray_credentials=True)  # forced on
    with pytest.raises(SecurityError):  # SASL with the authorizer forced off is no authorizer
        check_ray_path("127.0.0.1", SecurityConfig(plain_users={"a": "b"}, authorizer=False),
                       ray_credentials=True)


def test_the_loopback_only_option_reaches_the_gateways_security() -> None:
    args = build_parser().parse_args(["gateway", "--loopback-only"])
    assert _spec(args, 9092, _limits(args)).security().loopback_only is True
    args = build_parser().parse_args(["gateway"])
    assert _spec(args, 9092, _limits(args)).security().loopback_only is False
