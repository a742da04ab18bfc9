"""The gateway's security: loopback unless SASL/PLAIN or TLS is configured,
Kafka's SASL sequence (with kafka-python's own SASL client and on raw
sockets), unauthenticated frames capped, TLS with a self-signed certificate."""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kafka import KafkaAdminClient
from kafka.errors import KafkaTimeoutError
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from gateway.security import (
    USERS_ENV,
    SecurityConfig,
    SecurityError,
    check_listen_address,
    load_plain_users,
)
from gateway.server import Limits

from tests.gateway import stub_apis
from tests.gateway.gateway_support import (
    GatewayThread,
    assert_served,
    closed_without_answer,
    connect,
    read_response,
    request_frame,
)

USERS = {"alice": "s3cret:with-colon", "bob": "hunter2"}


@pytest.fixture
def sasl_gateway() -> Iterator[GatewayThread]:
    running = GatewayThread(None, dispatch=stub_apis, security=SecurityConfig(plain_users=USERS))
    yield running
    running.close()


def kafka_admin(bootstrap: str, **security: object) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000, **security)


def test_kafka_python_logs_in_with_sasl_plain(sasl_gateway: GatewayThread) -> None:
    stub_apis.seen.clear()
    admin = kafka_admin(sasl_gateway.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                        sasl_plain_username="alice", sasl_plain_password=USERS["alice"])
    try:
        # Bootstrapping asked for Metadata, which the gateway served only after the login.
        principals = [ctx.principal for ctx, _ in stub_apis.seen]
        assert principals and set(principals) == {"alice"}
    finally:
        admin.close()


def test_kafka_python_with_a_wrong_password_reads_kafkas_refusal(
    sasl_gateway: GatewayThread, caplog: pytest.LogCaptureFixture
) -> None:
    stub_apis.seen.clear()
    # kafka-python retries a refused bootstrap until its timeout, logging the broker's error each time.
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaTimeoutError):
        kafka_admin(sasl_gateway.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                    sasl_plain_username="alice", sasl_plain_password="wrong", bootstrap_timeout_ms=1000)
    refusals = [r.getMessage() for r in caplog.records if "SaslAuthenticationFailedError" in r.getMessage()]
    assert refusals and all("Invalid username or password" in line for line in refusals)
    assert stub_apis.seen == []


def sasl_login(port: int, token: bytes) -> tuple[object, object]:
    sock = connect(port)
    sock.sendall(request_frame(SaslHandshakeRequest(mechanism="PLAIN"), 1))
    _, handshake = read_response(sock, 17, 1)
    sock.sendall(request_frame(SaslAuthenticateRequest(auth_bytes=token), 2))
    _, authenticate = read_response(sock, 36, 2)
    return sock, (handshake, authenticate)


@pytest.mark.parametrize(
    "token",
    [b"\0alice\0wrong", b"\0carol\0hunter2", b"\0alice\0", b"\0\0hunter2",
     b"bob\0alice\0" + USERS["alice"].encode(), b"alice-without-nul"],
    ids=["wrong-password", "unknown-user", "empty-password", "empty-user", "other-authzid", "malformed"],
)
def test_a_refused_login_gets_sasl_authentication_failed_then_close(sasl_gateway: GatewayThread,
                                                                      token: bytes) -> None:
    sock, (handshake, authenticate) = sasl_login(sasl_gateway.port, token)
    with sock:
        assert handshake.error_code == ErrorCode.none and handshake.mechanisms == ("PLAIN",)
        assert authenticate.error_code == ErrorCode.sasl_authentication_failed
        assert authenticate.error_message == "Authentication failed: Invalid username or password"
        assert closed_without_answer(sock)
    assert_served(sasl_gateway.port)  # ApiVersions is allowed before a login


def test_after_a_raw_login_requests_are_served_with_the_principal(sasl_gateway: GatewayThread) -> None:
    stub_apis.seen.clear()
    sock, (_, authenticate) = sasl_login(sasl_gateway.port, b"bob\0bob\0hunter2")
    with sock:
        assert authenticate.error_code == ErrorCode.none
        sock.sendall(request_frame(heartbeat(), 3))
        assert read_response(sock, 12, 4)[0] == 3
    assert stub_apis.seen[-1][0].principal == "bob"


def heartbeat(group: str = "g") -> HeartbeatRequest:
    return HeartbeatRequest(group_id=group, generation_id=1, member_id="m", group_instance_id=None)


def test_requests_before_the_login_close_the_connection(sasl_gateway: GatewayThread) -> None:
    with connect(sasl_gateway.port) as sock:
        sock.sendall(request_frame(heartbeat(), 1))
        assert closed_without_answer(sock)
    with connect(sasl_gateway.port) as sock:  # SaslAuthenticate needs a handshake first
        sock.sendall(request_frame(SaslAuthenticateRequest(auth_bytes=b"\0bob\0hunter2"), 1))
        assert closed_without_answer(sock)


def test_an_unsupported_mechanism_gets_the_enabled_list_then_close(sasl_gateway: GatewayThread) -> None:
    with connect(sasl_gateway.port) as sock:
        sock.sendall(request_frame(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1))
        _, response = read_response(sock, 17, 1)
        assert response.error_code == ErrorCode.unsupported_sasl_mechanism
        assert response.mechanisms == ("PLAIN",)
        assert closed_without_answer(sock)


def test_unauthenticated_frames_are_capped_and_authenticated_ones_are_not(
    sasl_gateway: GatewayThread,
) -> None:
    huge = request_frame(heartbeat("g" * 600_000), 6)
    assert len(huge) > 524_288
    with connect(sasl_gateway.port) as sock:
        sock.sendall(huge)
        assert closed_without_answer(sock)
    sock, _ = sasl_login(sasl_gateway.port, b"\0bob\0hunter2")
    with sock:
        sock.sendall(huge)
        assert read_response(sock, 12, 4)[0] == 6


def test_sasl_apis_are_advertised_only_with_sasl(sasl_gateway: GatewayThread) -> None:
    from tests.gateway.gateway_support import api_versions_request

    with connect(sasl_gateway.port) as sock:
        sock.sendall(request_frame(api_versions_request(3), 1))
        _, body = read_response(sock, 18, 3)
    advertised = {entry.api_key: (entry.min_version, entry.max_version) for entry in body.api_keys}
    assert advertised == {**stub_apis.SUPPORTED, 17: (1, 1), 18: (0, 4), 36: (0, 2)}


# ------------------------------------------------------------------ config


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "10.1.2.3", "example.com"])
def test_listening_off_loopback_needs_sasl_or_tls(host: str) -> None:
    with pytest.raises(SecurityError, match="refusing to listen"):
        check_listen_address(host, SecurityConfig())
    check_listen_address(host, SecurityConfig(plain_users={"u": "p"}))
    check_listen_address(host, SecurityConfig(tls_cert="cert.pem", tls_key="key.pem"))


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_needs_nothing(host: str) -> None:
    check_listen_address(host, SecurityConfig())


def test_the_gateway_refuses_to_start_off_loopback_without_security() -> None:
    with pytest.raises(SecurityError):
        GatewayThread(None, dispatch=stub_apis, host="0.0.0.0")


def test_with_sasl_it_listens_on_every_address(tmp_path: Path) -> None:
    running = GatewayThread(None, dispatch=stub_apis, host="0.0.0.0",
                            security=SecurityConfig(plain_users=USERS))
    try:
        sock, (_, authenticate) = sasl_login(running.port, b"\0bob\0hunter2")
        sock.close()
        assert authenticate.error_code == ErrorCode.none
    finally:
        running.close()


def test_users_come_from_a_file_or_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text("# gateway users\nalice:s3cret:with-colon\n\nbob:hunter2\n")
    assert load_plain_users(str(path), environ={}) == USERS
    assert load_plain_users(None, environ={USERS_ENV: "alice:s3cret:with-colon,bob:hunter2"}) == USERS
    assert load_plain_users(None, environ={}) is None


def test_a_bad_users_entry_is_refused_without_echoing_it(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text("alice:ok\nbob-has-no-password-hunter2\n")
    with pytest.raises(SecurityError, match="entry 2 is not user:password") as raised:
        load_plain_users(str(path))
    assert "hunter2" not in str(raised.value)
    with pytest.raises(SecurityError, match="cannot read"):
        load_plain_users(str(tmp_path / "missing"))


def test_a_repr_never_shows_passwords() -> None:
    assert "hunter2" not in repr(SecurityConfig(plain_users=USERS))


# ------------------------------------------------------------------ TLS


@pytest.fixture
def self_signed(tmp_path: Path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and localhost, and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    os.chmod(key_path, 0o600)
    return str(cert_path), str(key_path)


def test_tls_serves_a_kafka_client_and_refuses_plaintext(self_signed: tuple[str, str]) -> None:
    cert, key = self_signed
    stub_apis.seen.clear()
    running = GatewayThread(None, dispatch=stub_apis, security=SecurityConfig(tls_cert=cert, tls_key=key))
    try:
        admin = kafka_admin(running.bootstrap, security_protocol="SSL", ssl_cafile=cert)
        admin.close()
        assert stub_apis.seen, "kafka-python bootstrapped over TLS"
        context = ssl.create_default_context(cafile=cert)
        with context.wrap_socket(connect(running.port), server_hostname="127.0.0.1") as tls:
            assert_served(running.port, tls)
        with connect(running.port) as plain:
            plain.sendall(request_frame(heartbeat(), 1))
            assert closed_without_answer(plain)
    finally:
        running.close()


def test_tls_needs_both_files() -> None:
    with pytest.raises(SecurityError, match="both"):
        SecurityConfig(tls_cert="cert.pem")


def test_limits_apply_under_tls_too(self_signed: tuple[str, str]) -> None:
    cert, key = self_signed
    running = GatewayThread(None, dispatch=stub_apis, security=SecurityConfig(tls_cert=cert, tls_key=key),
                            limits=Limits(max_request_bytes=1024))
    try:
        context = ssl.create_default_context(cafile=cert)
        with context.wrap_socket(connect(running.port), server_hostname="localhost") as tls:
            tls.sendall((2048).to_bytes(4, "big"))
            assert closed_without_answer(tls)
        with context.wrap_socket(connect(running.port), server_hostname="localhost") as tls:
            assert_served(running.port, tls)
    finally:
        running.close()
