"""Who a Kafka connection is (gateway/authorize.py): SASL users, TLS subjects and Kafka's
ssl.principal.mapping.rules; and that the authorizer is on exactly when SASL or TLS is."""

from __future__ import annotations

import asyncio

import pytest

from actors.client.credential_file import DEFAULT_SUPER_USER
from actors.core.acl_watch import AclWatch
from coordinator.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from gateway.authorize import ANONYMOUS, PrincipalMapper, principal_of, subject_name
from gateway.security import SecurityConfig

CERT = {"subject": ((("countryName", "US"),), (("organizationName", "Corp, Inc"),),
                    (("organizationalUnitName", "eng"),), (("commonName", "alice"),))}


def test_a_tls_subject_reads_as_rfc_2253_most_specific_first_with_escapes() -> None:
    assert subject_name(CERT) == "CN=alice,OU=eng,O=Corp\\, Inc,C=US"
    assert subject_name(None) is None and subject_name({}) is None


def test_principals_sasl_first_then_the_mapped_subject_else_anonymous() -> None:
    default = PrincipalMapper()
    assert principal_of("bob", CERT, default) == "User:bob"
    assert principal_of(None, CERT, default) == "User:CN=alice,OU=eng,O=Corp\\, Inc,C=US"
    assert principal_of(None, None, default) == ANONYMOUS


def test_no_kafka_client_is_the_default_super_user() -> None:
    # The service's bootstrap super user (no --super-users) is of a type no login maps to.
    admin_cert = {"subject": ((("commonName", "admin"),),)}
    for sasl_user, cert in (("admin", None), ("RayGroups:admin", None), (None, admin_cert)):
        for mapper in (PrincipalMapper(), PrincipalMapper("RULE:^CN=(.*)$/$1/, DEFAULT")):
            assert principal_of(sasl_user, cert, mapper) != DEFAULT_SUPER_USER


def test_kafka_mapping_rules_first_match_wins_with_case() -> None:
    mapper = PrincipalMapper("RULE:^CN=([a-z]+),OU=ops,.*$/$1-ops/U, RULE:^CN=(.*?),.*$/$1/L, DEFAULT")
    assert mapper.name("CN=carol,OU=ops,O=x") == "CAROL-OPS"
    assert mapper.name("CN=Alice,OU=eng,O=x") == "alice"
    assert mapper.name("O=no-cn") == "O=no-cn", "DEFAULT: the subject itself"
    with pytest.raises(ValueError, match="mapping.rules"):
        PrincipalMapper("RULE:missing-slashes")


def test_the_authorizer_is_on_exactly_when_sasl_or_tls_is_unless_forced() -> None:
    assert not SecurityConfig().authorizer_on
    assert SecurityConfig(plain_users={"u": "p"}).authorizer_on
    assert SecurityConfig(tls_cert="c", tls_key="k").authorizer_on
    assert SecurityConfig(authorizer=True).authorizer_on
    assert not SecurityConfig(plain_users={"u": "p"}, authorizer=False).authorizer_on


class FakeRegistry:
    """`acls_if_changed.remote(token)` as the registry answers it, or raising while `down`."""

    def __init__(self) -> None:
        self.view: tuple[str, tuple[AclBinding, ...]] = ("r:1", ())
        self.down = False
        self.acls_if_changed = self

    async def remote(self, token: str | None) -> tuple[str, tuple[AclBinding, ...]] | None:
        if self.down:
            raise RuntimeError("registry down")
        return None if token == self.view[0] else self.view


def test_the_watch_refuses_before_its_first_view_and_keeps_the_last_one_when_the_registry_is_down() -> None:
    registry = FakeRegistry()
    registry.down = True
    watch = AclWatch(lambda: registry, super_users=["User:admin"])
    binding = AclBinding(ResourceType.GROUP, "g", PatternType.LITERAL, "User:alice", "*", Operation.READ,
                         Permission.ALLOW)

    async def scenario() -> None:
        assert await watch.ready(0.05) is None, "no view: no authorizer, nothing allowed"
        registry.down = False
        registry.view = ("r:2", (binding,))
        await watch.poll()
        authorizer = await watch.ready(0.05)
        assert authorizer is not None and authorizer.authorize("User:alice", "h", Operation.READ,
                                                               ResourceType.GROUP, "g")
        assert watch.current() is authorizer, "the fast path: the view in force while the watch runs"
        registry.down = True
        await watch.poll()
        assert watch.authorizer is authorizer, "a registry that is down leaves the last view in force"
        watch.close()
        task = watch._task
        assert task is not None
        await asyncio.gather(task, return_exceptions=True)  # the cancelled watch's end
        assert watch.current() is None, "a watch that ended is not trusted: `ready` starts it again"

    asyncio.run(scenario())
