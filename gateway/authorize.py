"""Kafka's authorizer on the Kafka paths: who a connection is, and what it may do (issue 49).

Where the check runs: in the process that serves the connection, the
gateway or the partition leader's own listener (`gateway.direct`), before
a request reaches the coordinator, through `coordinator.authz.check` (the
operations and errors per API). The principal is the connection's own
(authenticated by this process: SASL/PLAIN, or the TLS client certificate)
and never travels over Ray, so no Ray caller can put another in its place
(docs/security.md). A denied request, or its denied part, is never sent:
it changes nothing.

- Principal: `User:<name>` after a SASL/PLAIN login; else, on TLS with a
  client certificate, `User:` and the certificate subject in RFC 2253 form
  (`CN=alice,OU=eng,O=corp`, as Kafka's X500Principal.getName()) mapped by
  Kafka's `ssl.principal.mapping.rules` (`RULE:pattern/replacement/[LU]`,
  `DEFAULT`); else `User:ANONYMOUS`.
- On when the listener has SASL or TLS (a listener reachable beyond
  loopback); off on a loopback listener without either, as a Kafka broker
  without `authorizer.class.name`. `SecurityConfig.authorizer` forces it.
- The ACLs are the service's (`actors/core/acl_watch.py`): a request
  that arrives before the first view waits for it up to `FIRST_VIEW_S`, then
  is answered COORDINATOR_NOT_AVAILABLE (retriable), never allowed. A super
  user's requests pass without the view.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from actors.client.fanout import Plan
from actors.client.retry import CoordinatorUnavailableError
from actors.core.acl_watch import AclWatch
from coordinator.acl import Authorizer, Operation, ResourceType
from coordinator.authz import check
from coordinator.messages import JoinGroupRequest, Request, SyncGroupRequest

ANONYMOUS = "User:ANONYMOUS"
FIRST_VIEW_S = 10.0
# OpenSSL's long attribute names -> RFC 2253's keywords (others keep their long name, as OIDs would).
_RDN_KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}
_RULE = re.compile(r"RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?)")


def subject_name(peercert: dict[str, Any] | None) -> str | None:
    """A certificate's subject (ssl's `getpeercert()`) in RFC 2253 form, None without one."""
    if not peercert or not peercert.get("subject"):
        return None
    rdns = []
    for rdn in reversed(peercert["subject"]):  # RFC 2253 lists the most specific first
        rdns.append("+".join(f"{_RDN_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    return out[:-1] + "\\ " if out.endswith(" ") else out


class PrincipalMapper:
    """Kafka's `ssl.principal.mapping.rules`: the first rule whose pattern matches the whole
    subject gives the name (its replacement, lower- or upper-cased with L or U); DEFAULT the
    subject itself; no rule matching: the subject, as Kafka falls back."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[tuple[re.Pattern[str], str, str] | None] = []
        for rule in _split_rules(rules):
            if rule == "DEFAULT":
                self.rules.append(None)
                continue
            matched = _RULE.fullmatch(rule)
            if matched is None:
                raise ValueError(f"invalid ssl.principal.mapping.rules entry {rule!r}")
            pattern, replacement, case = matched.groups()
            replacement = re.sub(r"\$(\d)", r"\\\1", replacement.replace("\\/", "/"))
            self.rules.append((re.compile(pattern.replace("\\/", "/")), replacement, case))

    def name(self, subject: str) -> str:
        for rule in self.rules:
            if rule is None:
                return subject
            pattern, replacement, case = rule
            if pattern.fullmatch(subject):
                name = pattern.sub(replacement, subject)
                return name.lower() if case == "L" else name.upper() if case == "U" else name
        return subject


def _split_rules(rules: str) -> list[str]:
    return [r.strip() for r in re.split(r",(?=\s*(?:RULE:|DEFAULT))", rules) if r.strip()]


def principal_of(sasl_user: str | None, peercert: dict[str, Any] | None, mapper: PrincipalMapper) -> str:
    """The Kafka principal of a connection (module docstring)."""
    if sasl_user is not None:
        return f"User:{sasl_user}"
    subject = subject_name(peercert)
    return ANONYMOUS if subject is None else f"User:{mapper.name(subject)}"


class AclGuard:
    """One server's authorizer: the service's ACLs (an AclWatch) and the settings."""

    def __init__(self, watch: AclWatch, mapper: PrincipalMapper | None = None) -> None:
        self.watch = watch
        self.mapper = mapper or PrincipalMapper()

    async def authorizer(self) -> Authorizer:
        authorizer = await self.watch.ready(FIRST_VIEW_S)
        if authorizer is None:
            raise CoordinatorUnavailableError("the service's ACLs are not read yet")
        return authorizer

    def client_for(self, client: Any, principal: str, host: str) -> AuthorizedClient:
        return AuthorizedClient(client, self, principal, host)

    def close(self) -> None:
        self.watch.close()


def guard_for(security: Any, lookup: Callable[[], Any]) -> AclGuard | None:
    """The guard of a server with `security` (gateway.security.SecurityConfig); None: authorizer off.
    `lookup` finds the topic registry (blocking)."""
    if not security.authorizer_on:
        return None
    watch = AclWatch(lookup, security.super_users, security.allow_everyone_if_no_acl_found)
    return AclGuard(watch, PrincipalMapper(security.ssl_principal_mapping_rules))


class AuthorizedClient:
    """The service client as one connection's principal may use it: every coordinator request
    is checked (`coordinator.authz.check`) before it is sent; everything else passes through."""

    def __init__(self, inner: Any, guard: AclGuard, principal: str, host: str) -> None:
        self.inner, self.guard, self.principal, self.host = inner, guard, principal, host

    async def send_async(self, request: Request, partition: int | None = None) -> Any:
        return await self._checked(request, lambda r: self.inner.send_async(r, partition))

    async def fan_out_async(self, plan: Plan) -> list[Any]:
        """The inner client's fan-out (actors/client/fanout.py), each request checked."""
        return await self.inner.fan_out_async(plan, self._checked)  # type: ignore[no-any-return]

    async def join_group_async(self, request: JoinGroupRequest) -> Any:
        return await self._checked(request, self.inner.join_group_async)

    async def sync_group_async(self, request: SyncGroupRequest) -> Any:
        return await self._checked(request, self.inner.sync_group_async)

    async def _checked(self, request: Request, send: Callable[[Any], Any]) -> Any:
        watch = self.guard.watch
        if self.principal in watch.super_users:  # allowed everything, ACLs read or not
            return await send(request)
        authorizer = watch.current() or await self.guard.authorizer()
        decision = check(authorizer, self.principal, self.host, request)
        if decision.send is None:
            return decision.answer
        return decision.finish(await send(decision.send))

    async def may(self, operation: Any, resource_type: Any, name: str) -> bool:
        """Whether the principal may; CoordinatorUnavailableError while the ACLs are not read."""
        if self.principal in self.guard.watch.super_users:
            return True
        authorizer = await self.guard.authorizer()
        return authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def undescribable_topics(client: Any, names: Iterable[str]) -> set[str]:
    """The topics of `names` the connection's principal may not DESCRIBE (none without an
    authorizer): Metadata and ListOffsets answer them TOPIC_AUTHORIZATION_FAILED, as Kafka."""
    may = getattr(client, "may", None)
    if may is None:
        return set()
    return {name for name in set(names) if not await may(Operation.DESCRIBE, ResourceType.TOPIC, name)}

