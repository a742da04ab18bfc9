"""Ray-path credentials (coordinator/credentials.py): issued with the secret, verified with a given clock."""

import base64
import json

import pytest

from coordinator.credentials import CredentialError, decode, issue, verify

SECRET = b"s" * 32
OTHER = b"o" * 32
NOW = 1_700_000_000_000


def test_a_credential_verifies_to_its_principal_until_it_expires() -> None:
    credential = issue(SECRET, "User:team-a", NOW + 1000, "id1")
    parsed = verify(SECRET, credential, NOW)
    assert (parsed.principal, parsed.expires_ms, parsed.id) == ("User:team-a", NOW + 1000, "id1")
    assert verify(SECRET, credential, NOW + 999).principal == "User:team-a"
    with pytest.raises(CredentialError, match="expired credential for User:team-a"):
        verify(SECRET, credential, NOW + 1000)


def test_a_credential_of_another_secret_is_forged() -> None:
    with pytest.raises(CredentialError, match="forged credential for User:team-a"):
        verify(SECRET, issue(OTHER, "User:team-a", NOW + 1000, "id1"), NOW)


def test_a_changed_principal_or_expiry_breaks_the_signature() -> None:
    credential = issue(SECRET, "User:team-a", NOW + 1000, "id1")
    prefix, payload, signature = credential.split(".")
    for change in ({"p": "User:admin"}, {"e": NOW + 10**12}):
        fields = {**json.loads(base64.urlsafe_b64decode(payload + "==")), **change}
        altered = base64.urlsafe_b64encode(json.dumps(fields).encode()).decode().rstrip("=")
        with pytest.raises(CredentialError, match="forged"):
            verify(SECRET, f"{prefix}.{altered}.{signature}", NOW)
    with pytest.raises(CredentialError, match="forged"):
        verify(SECRET, credential[:-1] + ("0" if credential[-1] != "0" else "1"), NOW)


def test_a_revoked_credential_is_refused() -> None:
    credential = issue(SECRET, "User:team-a", NOW + 1000, "id1")
    with pytest.raises(CredentialError, match="revoked credential id1"):
        verify(SECRET, credential, NOW, revoked={"id1"})
    assert verify(SECRET, credential, NOW, revoked={"id2"}).id == "id1"


@pytest.mark.parametrize("credential, why", [
    (None, "no credential"),
    (42, "malformed"),
    ("", "malformed"),
    ("rgc1.x", "malformed"),
    ("rgc2.e30.00", "malformed"),
    ("rgc1.!!!.00", "malformed"),
    ("rgc1.e30.00", "malformed"),  # {}: no fields
    ("rgc1." + base64.urlsafe_b64encode(b'{"p":1,"e":"x","i":2}').decode() + ".00", "wrong types"),
    ("rgc1." + "A" * 5000 + ".00", "malformed"),
])
def test_malformed_credentials_are_refused_with_the_reason(credential: object, why: str) -> None:
    with pytest.raises(CredentialError, match=why):
        verify(SECRET, credential, NOW)


def test_decode_reads_without_the_secret_and_issue_refuses_bad_input() -> None:
    assert decode(issue(SECRET, "User:x", NOW, "i")).principal == "User:x"
    with pytest.raises(ValueError, match="Type:name"):
        issue(SECRET, "alice", NOW, "i")
    with pytest.raises(ValueError, match="at least"):
        issue(b"short", "User:x", NOW, "i")
