"""The ACL bindings the topic registry keeps as service state, and Kafka's Admin answers on them.

ACLs are service state (DESIGN section 10): each binding is one entry of
kind `ACL_KIND` in offsets partition 0's log, written only by the topic
registry (the single service-state writer, `actors/client/topic_registry.py`),
so they are replicated, fenced and survive any node and a full restart as
the topics do. The entry's name is the binding itself (its seven fields as
JSON), so creating a binding twice is one entry, and its data is empty.

What CreateAcls, DescribeAcls and DeleteAcls answer (Kafka's `AclApis` and
`AclControlManager`): each binding or filter is checked where it enters
(`coordinator.acl.binding_from` / `filter_from`), and a bad one is answered
INVALID_REQUEST with the reason, alone: the others of the same request are
applied. An entry that cannot be read back (a corrupt store) is never
taken as an ALLOW: while one is held, `view_if_changed` raises
AclStoreCorrupt with the reason, so no listener takes a new ACL set (they
keep the one they had, or refuse everything before their first), and
DescribeAcls answers the reason too; the registry's topics serve on. A
DeleteAcls whose filter matches every binding removes the corrupt entries
with the rest: the way back for an operator.

Readers (every partition leader and gateway, `actors/core/acl_watch.py`)
get the set with `view_if_changed(token)`: the token names the registry's
incarnation and its count of ACL changes, so an unchanged set costs one
small answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from coordinator.acl import AclBinding, AclFilter, binding_from, filter_from
from coordinator.errors import Errors
from coordinator.service_state import ServiceEntry

ACL_KIND = "acl"  # name: the binding's fields as JSON; data: empty
AclResult = tuple[Errors, str]  # error, message
AclsView = tuple[str, tuple[AclBinding, ...]]  # token, every binding


class AclStoreCorrupt(RuntimeError):
    """An ACL entry of the store is unreadable: refuse to serve rather than guess."""


def entry_name(acl: AclBinding) -> str:
    return json.dumps([int(acl.resource_type), acl.name, int(acl.pattern_type), acl.principal, acl.host,
                       int(acl.operation), int(acl.permission)])


def entry(acl: AclBinding, present: bool = True) -> ServiceEntry:
    return ServiceEntry(ACL_KIND, entry_name(acl), b"" if present else None)


def _order(acl: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    """Answers list bindings by resource, then entry: the same order before and after a restart."""
    return (acl.resource_type, acl.name, acl.pattern_type, acl.principal, acl.host, acl.operation,
            acl.permission)


def binding_of(name: str) -> AclBinding:
    """The binding an entry's name holds; AclStoreCorrupt when it holds none."""
    try:
        parsed = binding_from(json.loads(name))
    except ValueError as exc:
        raise AclStoreCorrupt(f"ACL entry {name!r} is not JSON: {exc}") from exc
    if isinstance(parsed, str):
        raise AclStoreCorrupt(f"ACL entry {name!r} is no valid binding: {parsed}")
    return parsed


class AclTable:
    """The bindings in force, as the registry holds them (in memory after its store acknowledged)."""

    def __init__(self) -> None:
        self.acls: dict[AclBinding, None] = {}  # a set; answers list them in `_order`
        self.corrupt: dict[str, str] = {}  # entry name -> why it is no binding
        self.changes = 0

    def load(self, names: Iterable[str]) -> None:
        self.acls, self.corrupt = {}, {}
        for name in names:
            try:
                self.acls[binding_of(name)] = None
            except AclStoreCorrupt as exc:
                self.corrupt[name] = str(exc)
        self.changes += 1

    def check_readable(self) -> None:
        """AclStoreCorrupt naming the first unreadable entry, if any."""
        if self.corrupt:
            why = next(iter(self.corrupt.values()))
            raise AclStoreCorrupt(f"{len(self.corrupt)} ACL entries unreadable, none applied: {why}; "
                                  "delete every ACL (a filter matching all) to clear them")

    def check_creations(self, creations: Any) -> tuple[list[AclResult], list[AclBinding]]:
        """Per creation its result, and the valid bindings not yet held (to write)."""
        if not isinstance(creations, (list, tuple)):
            return [], []
        results: list[AclResult] = []
        new: dict[AclBinding, None] = {}
        for fields in creations:
            parsed = binding_from(fields)
            if isinstance(parsed, str):
                results.append((Errors.INVALID_REQUEST, parsed))
                continue
            results.append((Errors.NONE, ""))
            if parsed not in self.acls:
                new[parsed] = None
        return results, list(new)

    def created(self, acls: Iterable[AclBinding]) -> None:
        self.acls.update(dict.fromkeys(acls))
        self.changes += 1

    def describe(self, fields: Any) -> tuple[Errors, str, list[AclBinding]]:
        if self.corrupt:
            return Errors.KAFKA_STORAGE_ERROR, next(iter(self.corrupt.values())), []
        return self._matching(fields)

    def _matching(self, fields: Any) -> tuple[Errors, str, list[AclBinding]]:
        parsed = filter_from(fields)
        if isinstance(parsed, str):
            return Errors.INVALID_REQUEST, parsed, []
        return Errors.NONE, "", sorted((acl for acl in self.acls if parsed.matches(acl)), key=_order)

    def match_deletions(self, filters: Any) -> list[tuple[Errors, str, list[AclBinding]]]:
        """Per filter: its error and message, and the bindings it deletes (Kafka answers each
        binding under every filter that matched it)."""
        if not isinstance(filters, (list, tuple)):
            return []
        return [self._matching(fields) for fields in filters]

    def corrupt_matched(self, filters: Any) -> list[str]:
        """The corrupt entries a DeleteAcls removes: all of them, when a filter matches everything."""
        every = any(filter_from(fields) == AclFilter() for fields in filters or ())
        return list(self.corrupt) if every else []

    def deleted(self, acls: Iterable[AclBinding], corrupt: Iterable[str] = ()) -> None:
        for acl in acls:
            self.acls.pop(acl, None)
        for name in corrupt:
            self.corrupt.pop(name, None)
        self.changes += 1

    def view(self, writer: str) -> AclsView:
        self.check_readable()
        return f"{writer}:{self.changes}", tuple(self.acls)

