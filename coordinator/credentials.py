"""Ray-path credentials: a principal the caller's code cannot forge without the service secret (issue 49).

A Ray handle carries no identity, so a caller of a partition actor presents a
credential: `rgc1.<payload>.<signature>`, where the payload is the base64url
of the JSON `{"p": principal, "e": expiry (ms since the epoch), "i": id}` and
the signature the hex HMAC-SHA256 of `rgc1.<payload>` with the service's
secret (kept as service state, `actors/client/credential_table.py`). The id
names the credential in the revocation list.

Pure: the secret, the time and the revoked ids are inputs; no clock, no
randomness (the caller gives the id). `verify` compares signatures in
constant time (`hmac.compare_digest`) and answers why a credential is refused,
in words its holder can act on; it never says what the right signature is.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Container
from dataclasses import dataclass

from coordinator.acl import principal_error
from coordinator.checks import InvalidRequestError

# The service state entry holding the secret credentials are signed with (kept in
# offsets partition 0's log); readers of the log outside the service never see its
# data (spark_bridge/rows.py).
SECRET_KIND = "ray-secret"

PREFIX = "rgc1"
SECRET_BYTES_MIN = 16
CREDENTIAL_CHARS_MAX = 4096  # far above any real one; bounds the work a caller can ask for


class CredentialError(InvalidRequestError):
    """A Ray-path credential refused: missing, malformed, forged, expired or revoked.
    Answered to its caller alone (the partition serves everyone else on), never
    retried by the client (it would be refused again), as a malformed request."""


@dataclass(frozen=True, slots=True)
class Credential:
    principal: str
    expires_ms: int
    id: str


def _sign(secret: bytes, signed: str) -> str:
    return hmac.new(secret, signed.encode("ascii"), hashlib.sha256).hexdigest()


def issue(secret: bytes, principal: str, expires_ms: int, credential_id: str) -> str:
    """The credential of `principal` until `expires_ms`; ValueError on a bad principal or secret."""
    if len(secret) < SECRET_BYTES_MIN:
        raise ValueError(f"the service secret must be at least {SECRET_BYTES_MIN} bytes")
    why = principal_error(principal)
    if why:
        raise ValueError(why)
    if type(expires_ms) is not int or not credential_id:
        raise ValueError("a credential needs an int expiry and an id")
    payload = json.dumps({"p": principal, "e": expires_ms, "i": credential_id}, separators=(",", ":"))
    signed = f"{PREFIX}.{base64.urlsafe_b64encode(payload.encode('utf-8')).decode('ascii').rstrip('=')}"
    return f"{signed}.{_sign(secret, signed)}"


def decode(credential: object) -> Credential:
    """What a credential says, signature unchecked (for `--revoke` and messages); CredentialError."""
    if credential is None:
        raise CredentialError("no credential: this service authorizes Ray callers; pass "
                              "credential=... (issued by `raygroups credentials --principal User:<name>`)")
    if not isinstance(credential, str) or len(credential) > CREDENTIAL_CHARS_MAX:
        raise CredentialError("malformed credential: not a raygroups credential string")
    parts = credential.split(".")
    if len(parts) != 3 or parts[0] != PREFIX:
        raise CredentialError(f"malformed credential: expected {PREFIX}.<payload>.<signature>")
    try:
        raw = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        fields = json.loads(raw)
        principal, expires_ms, credential_id = fields["p"], fields["e"], fields["i"]
    except (binascii.Error, ValueError, TypeError, KeyError) as exc:
        raise CredentialError(f"malformed credential: unreadable payload ({type(exc).__name__})") from None
    if not isinstance(principal, str) or type(expires_ms) is not int or not isinstance(credential_id, str):
        raise CredentialError("malformed credential: payload fields of the wrong types")
    return Credential(principal, expires_ms, credential_id)


def verify(secret: bytes, credential: object, now_ms: int, revoked: Container[str] = ()) -> Credential:
    """The credential's content if it is the service's, unexpired and not revoked; else
    CredentialError saying which."""
    parsed = decode(credential)
    assert isinstance(credential, str)  # decode refused anything else
    signed, _, signature = credential.rpartition(".")
    if not hmac.compare_digest(_sign(secret, signed), signature):
        raise CredentialError(f"forged credential for {parsed.principal}: its signature is not this "
                              "service's (issued by another service, or altered)")
    if now_ms >= parsed.expires_ms:
        raise CredentialError(f"expired credential for {parsed.principal} (expired at "
                              f"{parsed.expires_ms} ms since the epoch); issue a new one")
    if parsed.id in revoked:
        raise CredentialError(f"revoked credential {parsed.id} for {parsed.principal}")
    return parsed
