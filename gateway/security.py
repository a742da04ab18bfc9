"""Who may connect to the gateway: loopback by default, SASL/PLAIN and TLS to listen elsewhere.

Rules:
- With neither SASL nor TLS the gateway listens on a loopback address only;
  any other address is refused at start (`check_listen_address`).
- In front of a service that authorizes Ray callers (`ray_credentials`), a
  gateway without an authorizer is refused at start unless the operator says
  it is loopback-only (`loopback_only`, `--loopback-only`) and its address is
  (`check_ray_path`): it forwards over the leaders' unchecked `serve_*`.
- SASL/PLAIN credentials come from a file of `user:password` lines
  (`--sasl-plain-users FILE`) or from `RAYGROUPS_GATEWAY_SASL_USERS`
  (entries separated by newlines or commas), never from the command line.
- TLS is an `ssl.SSLContext` from a certificate and key file; with a client
  CA file, clients must present a certificate it signed.
- A connection under SASL follows Kafka's SaslServerAuthenticator: before
  authentication only ApiVersions, SaslHandshake (v1: tokens then come as
  SaslAuthenticate requests) and, after a handshake for PLAIN,
  SaslAuthenticate are accepted; anything else closes the connection. A
  refused login is answered SASL_AUTHENTICATION_FAILED, then closed.
  SaslHandshake v0 (raw tokens outside Kafka frames) is not offered.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v0.response import SaslAuthenticateResponse as _AuthenticateV0
from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse as _AuthenticateV1
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse as _AuthenticateV2
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from actors.core.settings import SASL_USERS_ENV as USERS_ENV  # one name: actors.start reads it too
from gateway.codec import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE

PLAIN = "PLAIN"
# What ApiVersions advertises when SASL is on (see the module docstring for v0 of the handshake).
SASL_VERSIONS = {SASL_HANDSHAKE: (1, 1), SASL_AUTHENTICATE: (0, 2)}
# Kafka's message for a refused PLAIN login (PlainSaslServer).
AUTHENTICATION_FAILED = "Authentication failed: Invalid username or password"
_AUTHENTICATE_RESPONSES = {0: _AuthenticateV0, 1: _AuthenticateV1, 2: _AuthenticateV2}


class SecurityError(ValueError):
    """A gateway configuration that would expose it, or unreadable credentials."""


@dataclass(frozen=True)
class SecurityConfig:
    """`plain_users` (user -> password) turns SASL/PLAIN on; `tls_cert` and
    `tls_key` turn TLS on. Passwords are never shown in a repr."""

    plain_users: Mapping[str, str] | None = field(default=None, repr=False)
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    # The authorizer (gateway/authorize.py): None: on exactly when SASL or TLS is; Kafka's
    # super.users, allow.everyone.if.no.acl.found and ssl.principal.mapping.rules.
    authorizer: bool | None = None
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    ssl_principal_mapping_rules: str = "DEFAULT"
    # The operator's word that this gateway, without an authorizer, serves loopback only
    # (`--loopback-only`): allowed in front of a service that authorizes Ray callers.
    loopback_only: bool = False

    @classmethod
    def read(cls, options: Any, **more: Any) -> SecurityConfig:
        """The security `options` name (a gateway's or a leader's listener settings: the same
        field names), its users file read on this node; `more` fields besides."""
        return cls(
            plain_users=load_plain_users(options.sasl_users_file),
            tls_cert=options.tls_cert,
            tls_key=options.tls_key,
            tls_client_ca=options.tls_client_ca,
            super_users=frozenset(options.super_users),
            allow_everyone_if_no_acl_found=options.allow_everyone_if_no_acl_found,
            ssl_principal_mapping_rules=options.ssl_principal_mapping_rules,
            **more,
        )

    def __post_init__(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise SecurityError("TLS needs both a certificate and a key file")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise SecurityError("a TLS client CA needs a TLS certificate and key")
        if self.plain_users is not None and not self.plain_users:
            raise SecurityError("SASL/PLAIN is configured with no users")

    @property
    def sasl(self) -> bool:
        return self.plain_users is not None

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def authorizer_on(self) -> bool:
        return self.sasl or self.tls if self.authorizer is None else self.authorizer

    def ssl_context(self) -> ssl.SSLContext | None:
        if self.tls_cert is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=self.tls_client_ca)
        context.load_cert_chain(self.tls_cert, self.tls_key)
        if self.tls_client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    def extra_versions(self) -> dict[int, tuple[int, int]]:
        """The SASL APIs ApiVersions advertises, when SASL is on."""
        return dict(SASL_VERSIONS) if self.sasl else {}

    @property
    def protocol(self) -> str:
        """Kafka's name for the listener's security protocol."""
        return {(False, False): "PLAINTEXT", (False, True): "SSL", (True, False): "SASL_PLAINTEXT"}.get(
            (self.sasl, self.tls), "SASL_SSL"
        )


def load_plain_users(path: str | None, environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """Users from the `path` file, else from `USERS_ENV`, else None (SASL off)."""
    if path is not None:
        try:
            with open(path, encoding="utf-8") as lines:
                return parse_users(lines.read(), source=path, separators="\n")
        except OSError as exc:
            raise SecurityError(f"cannot read SASL users file {path}: {exc.strerror}") from None
    text = (os.environ if environ is None else environ).get(USERS_ENV)
    return None if text is None else parse_users(text, source=USERS_ENV, separators="\n,")


def parse_users(text: str, source: str, separators: str) -> dict[str, str]:
    """`user:password` entries; blank entries and `#` comment lines are skipped."""
    for separator in separators[1:]:
        text = text.replace(separator, separators[0])
    users: dict[str, str] = {}
    for number, entry in enumerate(text.split(separators[0]), start=1):
        entry = entry.strip()
        if not entry or entry.startswith("#"):
            continue
        user, colon, password = entry.partition(":")
        if not colon or not user or not password:
            # Never echo the entry: it may hold a password.
            raise SecurityError(f"{source}: entry {number} is not user:password")
        users[user] = password
    if not users:
        raise SecurityError(f"{source}: no user:password entries")
    return users


def is_loopback(host: str) -> bool:
    """True when every address `host` resolves to is a loopback one."""
    if host in ("", "0.0.0.0", "::"):
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def check_listen_address(host: str, config: SecurityConfig) -> None:
    """Refuse a non-loopback listener without SASL or TLS."""
    if not (config.sasl or config.tls) and not is_loopback(host):
        raise SecurityError(
            f"refusing to listen on {host or 'every address'} without authentication or encryption: "
            f"configure SASL/PLAIN (--sasl-plain-users FILE or {USERS_ENV}) or TLS (--tls-cert/--tls-key)"
        )


def check_ray_path(host: str, config: SecurityConfig, ray_credentials: bool) -> None:
    """Refuse a gateway without an authorizer in front of a service that authorizes Ray
    callers (`ray_credentials`): it forwards over the leaders' unchecked `serve_*`, so its
    Kafka clients would get in unchecked. Allowed with SASL or TLS (the authorizer on), or
    when the operator says it is loopback-only (`--loopback-only`) and it is."""
    if not ray_credentials or config.authorizer_on:
        return
    if config.loopback_only and is_loopback(host):
        return
    where = f" (--loopback-only, but {host or 'every address'} is not loopback)" * config.loopback_only
    raise SecurityError(
        f"refusing to start a gateway without an authorizer{where} in front of a service that authorizes "
        "Ray callers (--ray-credentials): its Kafka clients would reach the partition leaders unchecked. "
        f"Configure SASL/PLAIN (--sasl-plain-users FILE or {USERS_ENV}) or TLS (--tls-cert/--tls-key), "
        "or pass --loopback-only to serve this host's processes only, unauthorized"
    )


@dataclass(frozen=True, slots=True)
class SaslReply:
    """The response to a SASL request, and whether the connection closes after it."""

    response: Any
    close: bool


class SaslSession:
    """One connection's authentication state (Kafka's SaslServerAuthenticator, PLAIN only)."""

    def __init__(self, plain_users: Mapping[str, str] | None):
        self._users = plain_users
        self._handshake_done = False
        self.principal: str | None = None

    @property
    def authenticated(self) -> bool:
        return self._users is None or self.principal is not None

    def permits(self, api_key: int) -> bool:
        """Whether a request of `api_key` may be handled in the current state."""
        if self.authenticated:
            # No re-authentication (KIP-368): the session never expires.
            return api_key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE)
        if api_key == SASL_AUTHENTICATE:
            return self._handshake_done
        return api_key in (API_VERSIONS, SASL_HANDSHAKE) and not self._handshake_done

    def on_handshake(self, request: Any) -> SaslReply:
        if request.mechanism != PLAIN:
            # Kafka answers an unknown mechanism with the enabled list, then closes.
            return SaslReply(SaslHandshakeResponse(error_code=ErrorCode.unsupported_sasl_mechanism,
                                                   mechanisms=(PLAIN,)), close=True)
        self._handshake_done = True
        return SaslReply(SaslHandshakeResponse(error_code=ErrorCode.none, mechanisms=(PLAIN,)), close=False)

    def on_authenticate(self, request: Any, version: int) -> SaslReply:
        response = _AUTHENTICATE_RESPONSES[version]
        user = self._check_plain(request.auth_bytes)
        if user is None:
            return SaslReply(
                response(error_code=ErrorCode.sasl_authentication_failed, error_message=AUTHENTICATION_FAILED,
                         auth_bytes=b""),
                close=True,
            )
        self.principal = user
        return SaslReply(response(error_code=ErrorCode.none, error_message=None, auth_bytes=b""), close=False)

    def _check_plain(self, token: bytes) -> str | None:
        """The user of a valid PLAIN token `authzid NUL user NUL password` (RFC 4616), else None."""
        parts = token.split(b"\0")
        if self._users is None or len(parts) != 3:
            return None
        try:
            authzid, user, password = (part.decode("utf-8") for part in parts)
        except UnicodeDecodeError:
            return None
        if not user or not password or (authzid and authzid != user):
            return None
        expected = self._users.get(user)
        # Compare against something even for an unknown user, so timing does not tell users apart.
        matched = hmac.compare_digest(password.encode(), (expected or "\0" + password).encode())
        return user if matched and expected is not None else None
