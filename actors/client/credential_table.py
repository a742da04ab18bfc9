"""The Ray path's service secret and revoked credentials, as the topic registry keeps them (issue 49).

Both are service state (DESIGN section 10), entries in offsets partition 0's
log written only by the topic registry (`actors/client/topic_registry.py`),
so they are replicated, fenced and survive any node and a full restart:
- `SECRET_KIND` (name ""): the secret credentials are signed with
  (`coordinator/credentials.py`), 32 random bytes generated the first time
  a registry loads a store without one, and never changed after (changing
  it would invalidate every credential issued).
- `REVOKED_KIND` (name: the credential's id; data: its expiry, ms): a
  revoked credential, refused by every partition leader until it expires
  anyway (then the entry could go; it is kept, a few bytes per revocation).

Readers (every partition leader, `actors/partition/ray_guard.py`) get the
secret, the revoked ids and the ACLs with one `TopicRegistry.ray_auth_if_changed`
call and a token, as the ACL watch does.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable

from coordinator.credentials import SECRET_KIND, CredentialError, decode, issue
from coordinator.service_state import ServiceEntry

logger = logging.getLogger(__name__)
REVOKED_KIND = "revoked-credential"  # name: the credential's id; data: its expiry (ms) in ASCII
SECRET_BYTES = 32
TTL_S_MAX = 10 * 365 * 86400
CredentialsView = tuple[bytes, frozenset[str]]  # the secret, the revoked ids


class CredentialTable:
    def __init__(self) -> None:
        self.secret = b""
        self.revoked: dict[str, int] = {}  # id -> expiry (ms)
        self.changes = 0

    def load(self, entries: Iterable[tuple[str, str, bytes]]) -> None:
        self.secret, self.revoked = b"", {}
        for kind, name, data in entries:
            if kind == SECRET_KIND:
                self.secret = data
            elif kind == REVOKED_KIND:
                try:
                    self.revoked[name] = int(data)
                except ValueError:  # its id is what counts: refused for good
                    logger.warning("revoked credential %s: unreadable expiry %r, kept revoked", name, data)
                    self.revoked[name] = 2**63 - 1
        self.changes += 1

    def new_secret(self) -> ServiceEntry | None:
        """The entry of a new secret when the store holds none (first start); None otherwise."""
        if self.secret:
            return None
        return ServiceEntry(SECRET_KIND, "", secrets.token_bytes(SECRET_BYTES))

    def issue(self, principal: str, ttl_s: float, now_ms: int) -> str:
        """A credential of `principal` valid `ttl_s` from `now_ms`; ValueError why not."""
        if isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)) or not 0 < ttl_s <= TTL_S_MAX:
            raise ValueError(f"the ttl must be a number of seconds from 1 to {TTL_S_MAX}, got {ttl_s!r}")
        return issue(self.secret, principal, now_ms + int(ttl_s * 1000), secrets.token_hex(8))

    def revocation(self, credential: str) -> ServiceEntry:
        """The entry revoking `credential` (the credential itself: its id and expiry are read
        from it, so only a credential someone holds can be revoked); ValueError why not."""
        try:
            parsed = decode(credential)
        except CredentialError as exc:
            raise ValueError(str(exc)) from None
        return ServiceEntry(REVOKED_KIND, parsed.id, str(parsed.expires_ms).encode("ascii"))

    def revoked_now(self, entry: ServiceEntry) -> None:
        self.revoked[entry.name] = int(entry.data or b"0")
        self.changes += 1

    def view(self) -> CredentialsView:
        return self.secret, frozenset(self.revoked)
