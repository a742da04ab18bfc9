"""The topic registry actor: topic partition counts, ids, start and end offsets, end-offset history.

Kafka's group leader reads partition counts from the cluster metadata; here
`TopicRegistry`, a small named detached actor in the service's namespace,
holds them, plus per topic partition the end offset and the log start
offset that producers or adapters report (raygroups holds no topic data),
and every end offset it is told in a bounded history
(`actors/client/end_history.py`) for lag over time and time-based resets.

Where its state lives: in offsets partition 0's replicated log, as service
state entries (`coordinator/service_state.py`, through
`actors/client/service_store.py`), never on the disk of the node Ray put it
on. So it survives the loss of any one node with its disk and a full
restart, exactly as the offsets do, and Ray may restart the actor anywhere:
the new one claims the store (fencing the old one, should it still run),
then reads it whole before it answers anything. A registry that finds the
store empty imports the files a registry of an older raygroups kept
in `<data_dir>` (`topics.json`, `end-offsets.jsonl`) if this node has them.

Rules, as Kafka's admin API:
- `create_topic` answers TOPIC_ALREADY_EXISTS for a known name and
  INVALID_PARTITIONS for fewer than one partition; `create_partitions` only
  grows a topic (INVALID_PARTITIONS otherwise), UNKNOWN_TOPIC_OR_PARTITION for
  an unknown one. Names follow Kafka's rule (`valid_topic_name`), else
  INVALID_TOPIC_EXCEPTION (the client refuses them before sending; any Ray
  caller can reach the actor).
- `describe` returns only the topics that exist; a consumer treats a missing
  topic as one without partitions, as Kafka's leader does.
- End and start offsets are set for existing partitions only, all or
  nothing, and refused with INVALID_REQUEST (naming the partition and why)
  for a non-int or negative offset, an end offset below the recorded one or
  a sample time before the last (see end_history), or a start offset above
  the partition's end. A partition never set has end offset 0 (an empty
  partition) and start offset 0.
- `set_end_offsets` records a sample at the registry's wall clock, or at the
  `at_ms` a reporter gives (a producer's time); a wall clock that stepped
  back records at the last sample's time, so history stays in order.
- A change is applied in memory only once the store acknowledged it. A write
  the store did not answer leaves the registry unsure of it: it reads the
  store again before its next answer.
- Every topic has a topic id (Kafka's Uuid): random, unique, never the zero
  or the metadata topic's id. A topic imported from a file written before
  ids existed gets the name-based id the core assumed for it
  (`coordinator.consumer.subscriptions.topic_id_for`), so consumer groups
  written before keep their assignments.
- Partition leaders read the topics with `topics_if_changed(token)`
  (actors/partition/topics_watch.py): the token names this incarnation of the
  registry and its change count, so an unchanged registry answers None and a
  restarted one the whole view. After a change the registry nudges every
  leader (`topics_changed`, from a thread, through the controller's routing)
  to read at once; a nudge that fails is only late.
- End offsets reach the leaders the same way, for live lag: after a report
  the registry nudges every leader, which reads the samples recorded since
  its cursor (`end_offsets_since`, `actors/client/end_feed.py`).
- The Ray path's credentials (`actors/client/credential_table.py`): the
  first load of a store without a secret writes one; `issue_credential`
  signs, `revoke_credential` records a revocation; the leaders read the
  secret, the revocations and the ACLs with `ray_auth_if_changed(token)`,
  nudged after every ACL change or revocation (`topics_changed`); the
  gateways attached to the service are nudged too (`acls_changed`,
  actors/core/attached.py). With `ray_credentials` on, the administrative
  methods need the caller's credential (actors/client/admin_guard.py).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import msgpack
import ray

from actors.client.acl_table import ACL_KIND, AclResult, AclsView, AclTable, entry
from actors.client.admin_guard import AdminGuard, guarded
from actors.client.credential_table import REVOKED_KIND, SECRET_KIND, CredentialTable
from actors.client.end_feed import EndOffsetFeed, FeedAnswer
from actors.client.end_history import EndOffsetHistory, HistoryLimits, Sample, read_legacy_file
from actors.client.service_store import ReplicatedStore, ServiceStore
from actors.client.settings_table import SETTING_KIND, SettingsTable, SettingsView
from actors.core.attached import nudge_attached
from actors.core.setting_keys import SettingError, rolling_overrides
from actors.core.settings import CONTROLLER_NAME, ServiceSettings, SystemClock
from coordinator.acl import AclBinding
from coordinator.consumer.subscriptions import topic_id_for
from coordinator.errors import Errors
from coordinator.service_state import ServiceEntry

logger = logging.getLogger(__name__)
NUDGE_TIMEOUT_S = 10.0
ROLLED_TIMEOUT_S = 5.0  # asking the controller for the rolled settings (`config set`'s check)
ROLLED_RETRY_MS = 10_000  # while unknown, the settings readers' polls ask again this often at most


def controller_rolled_settings(namespace: str) -> Callable[[], dict[str, Any] | None]:
    """The last rolling restart's settings as the controller of `namespace` holds them, or
    None when it does not answer (not started, restarting): `config set` checks over them."""
    def read() -> dict[str, Any] | None:
        if not ray.is_initialized():  # no service around it (unit tests): no roll either
            return {}
        try:
            controller = ray.get_actor(CONTROLLER_NAME, namespace=namespace)
            answer = ray.get(controller.roll_settings.remote(), timeout=ROLLED_TIMEOUT_S)
        except Exception as exc:  # absent, restarting, or an older one without the method
            logger.info("rolled settings not read from the controller: %r", exc)
            return None
        return answer if isinstance(answer, dict) else None

    return read
LEGACY_TOPICS_FILE = "topics.json"
TOPIC_KIND = "topic"  # name: the topic; data: [partitions, id bytes, {partition: start offset}]
SAMPLE_KIND = "end-sample"  # name: "topic/partition/at_ms"; data: the end offset
KINDS = (TOPIC_KIND, SAMPLE_KIND, ACL_KIND, SETTING_KIND, SECRET_KIND, REVOKED_KIND)
RayAuthView = tuple[str, tuple[AclBinding, ...], bytes, frozenset[str]]  # token, ACLs, secret, revoked
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
# Kafka's Uuid.ZERO_UUID and Uuid.METADATA_TOPIC_ID: never a topic's id.
RESERVED_TOPIC_IDS = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})

Refusal = tuple[Errors, str, str]  # error, where ("topic-partition"), why
OK: Refusal = (Errors.NONE, "", "")
TopicsView = tuple[str, dict[str, int], dict[str, uuid.UUID]]  # token, partition counts, ids


def valid_topic_name(name: object) -> bool:
    """Kafka's rule: 1-249 characters of [a-zA-Z0-9._-], not "." or ".."."""
    return isinstance(name, str) and TOPIC_NAME.fullmatch(name) is not None and name not in (".", "..")


def new_topic_id(taken: Iterable[uuid.UUID] = ()) -> uuid.UUID:
    """A random topic id, neither reserved nor in `taken` (Kafka's Uuid.randomUuid)."""
    used = set(taken)
    while True:
        topic_id = uuid.uuid4()
        if topic_id not in RESERVED_TOPIC_IDS and topic_id not in used:
            return topic_id


class TopicRegistry:
    """The actor. A sync actor with one thread: requests apply one at a time."""

    def __init__(
        self,
        settings: ServiceSettings,
        clock: Any = None,
        limits: HistoryLimits | None = None,
        store: ServiceStore | None = None,
        rolled_settings: Callable[[], dict[str, Any] | None] | None = None,
    ) -> None:
        self.namespace = settings.namespace
        # The last rolling restart's settings, read from the controller (None: unknown now).
        self.rolled_settings = rolled_settings or controller_rolled_settings(settings.namespace)
        self._rolled_known = False
        self._rolled_asked_ms = 0
        self.data_dir = settings.data_dir
        self.clock = clock or SystemClock()
        self.limits = limits
        self.store = store if store is not None else ReplicatedStore(settings.namespace)
        # This incarnation: the store's writer, and the first half of the topics token.
        self.writer = uuid.uuid4().hex
        self._changes = 0
        self._loaded = False
        self.partitions: dict[str, int] = {}
        self.ids: dict[str, uuid.UUID] = {}
        self.start: dict[str, dict[int, int]] = {}
        self.history = EndOffsetHistory(limits)
        self.acls = AclTable()  # the ACL bindings (actors/client/acl_table.py)
        self.credentials = CredentialTable()  # the Ray path's (actors/client/credential_table.py)
        self.settings = SettingsTable(settings)  # settings changed online (actors/client/settings_table.py)
        self.feed = EndOffsetFeed()  # new samples, for the leaders' live lag
        self.guard = AdminGuard(settings, self.acls, self.credentials, self.clock)  # admin_guard.py
        # One nudging thread at a time; changes meanwhile make it nudge once more.
        self._nudge_lock = threading.Lock()
        self._nudging = self._nudge_again = False

    # ------------------------------------------------------------- loading

    def _ready(self) -> None:
        """Claim the store and read it: once, and again after a write it is unsure of."""
        if self._loaded:
            return
        self.store.write(self.writer, (), claim=True)  # first: no older registry writes after our read
        entries, _ = self.store.read(KINDS)
        if not entries:
            entries = self._import_legacy_files()
        self._apply_entries(entries)
        self._read_rolled()
        secret = self.credentials.new_secret()
        if secret is not None:  # the first start: the Ray path's secret, once and for good
            self._write([secret])
            self.credentials.load([(secret.kind, secret.name, secret.data or b"")])
        self._loaded = True
        self._changes += 1  # a reload may change the view

    def _read_rolled(self) -> bool:
        """Take the controller's rolled settings (the settings table checks over them);
        whether it answered. Unknown, the last ones read stay (none at first)."""
        self._rolled_asked_ms = self.clock.now_ms()
        rolled = self.rolled_settings()
        self._rolled_known = rolled is not None
        if rolled is not None:
            self.settings.use_rolled(rolled)
            self._guard_as_rolled(rolled)
        return self._rolled_known

    def _guard_as_rolled(self, rolled: dict[str, Any]) -> None:
        """The administrative check as the roll says: a rolling restart that turned
        `ray_credentials` on restarts this registry with its start settings."""
        try:
            self.guard.follow(rolling_overrides(self.settings.base, rolled))
        except SettingError as exc:  # checked otherwise than the roll's: the start settings kept
            logger.warning("topic registry: the rolled settings refused here (%s); start settings kept", exc)

    def _apply_entries(self, entries: dict[tuple[str, str], bytes]) -> None:
        self.partitions, self.ids, self.start = {}, {}, {}
        self.acls.load(name for kind, name in entries if kind == ACL_KIND)  # corrupt ones: kept apart
        self.settings.load((name, data) for (kind, name), data in entries.items() if kind == SETTING_KIND)
        self.credentials.load((kind, name, data) for (kind, name), data in entries.items()
                              if kind in (SECRET_KIND, REVOKED_KIND))
        samples: list[Sample] = []
        for (kind, name), data in entries.items():
            try:
                if kind == TOPIC_KIND:
                    count, topic_id, start = msgpack.unpackb(data, strict_map_key=False)
                    self.partitions[name], self.ids[name] = int(count), uuid.UUID(bytes=topic_id)
                    self.start[name] = {int(p): int(o) for p, o in start.items()}
                elif kind == SAMPLE_KIND:
                    topic, partition, at_ms = name.rsplit("/", 2)
                    samples.append((topic, int(partition), int(at_ms), int(msgpack.unpackb(data))))
            except (ValueError, TypeError) as exc:  # never fatal: say which entry and go on
                logger.warning("topic registry: entry %s/%s unreadable, skipped: %r", kind, name, exc)
        self.history = EndOffsetHistory(self.limits)
        self.feed.reset()
        dropped = self.history.load([s for s in samples if s[0] in self.partitions], self.clock.now_ms())
        if dropped:
            self._write([_sample_entry(s, None) for s in dropped])

    def _import_legacy_files(self) -> dict[tuple[str, str], bytes]:
        """The entries of an older registry's files on this node, written to the store."""
        path = os.path.join(self.data_dir, LEGACY_TOPICS_FILE)
        if not os.path.exists(path):
            return {}
        with open(path, encoding="utf-8") as f:
            topics = json.load(f)["topics"]
        entries = [
            _topic_entry(name, t["partitions"], uuid.UUID(t["id"]) if "id" in t else topic_id_for(name),
                         {int(p): o for p, o in t.get("start_offsets", {}).items()})
            for name, t in topics.items()
        ]
        samples = _legacy_samples(topics, read_legacy_file(self.data_dir))
        entries += [_sample_entry(s, s[3]) for s in samples]
        self._write(entries)
        logger.warning("topic registry: imported %d topics from %s into the log", len(topics), path)
        return {(e.kind, e.name): e.data for e in entries if e.data is not None}

    def _write(self, entries: list[ServiceEntry]) -> None:
        """Make `entries` durable; on any doubt, read the store again before the next answer."""
        try:
            self.store.write(self.writer, entries)
        except BaseException:
            self._loaded = False
            raise

    def node_id(self) -> str:
        """The Ray node this registry runs on (it keeps nothing there)."""
        return str(ray.get_runtime_context().get_node_id())

    # ------------------------------------------------------------- topics

    @guarded
    def create_topic(self, name: str, partitions: int) -> Errors:
        self._ready()
        if not valid_topic_name(name):
            return Errors.INVALID_TOPIC_EXCEPTION
        if name in self.partitions:
            return Errors.TOPIC_ALREADY_EXISTS
        if not _is_int(partitions) or partitions < 1:
            return Errors.INVALID_PARTITIONS
        topic_id = new_topic_id(self.ids.values())
        self._write([_topic_entry(name, partitions, topic_id, {})])
        self.partitions[name], self.ids[name], self.start[name] = partitions, topic_id, {}
        self._changed()
        return Errors.NONE

    @guarded
    def create_partitions(self, name: str, total: int) -> Errors:
        """Kafka's CreatePartitions: grow `name` to `total` partitions."""
        self._ready()
        if name not in self.partitions:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        if not _is_int(total) or total <= self.partitions[name]:
            return Errors.INVALID_PARTITIONS
        self._write([_topic_entry(name, total, self.ids[name], self.start[name])])
        self.partitions[name] = total
        self._changed()
        return Errors.NONE

    def _changed(self) -> None:
        self._changes += 1
        self._nudge_soon()

    def _nudge_soon(self) -> None:
        with self._nudge_lock:
            if self._nudging:
                self._nudge_again = True
                return
            self._nudging = True
        threading.Thread(target=self._nudge, daemon=True).start()

    def _nudge(self) -> None:
        while True:
            nudge_leaders(self.namespace)
            if ray.is_initialized():  # the gateways deployed with the service (actors/core/attached.py)
                nudge_attached(self.namespace)
            with self._nudge_lock:
                if not self._nudge_again:
                    self._nudging = False
                    return
                self._nudge_again = False

    def describe(self, names: list[str] | None) -> dict[str, int]:
        self._ready()
        if names is None:
            return dict(self.partitions)
        return {n: self.partitions[n] for n in names if n in self.partitions}

    def topic_ids(self, names: list[str] | None) -> dict[str, uuid.UUID]:
        """Topic id per existing topic (of `names`, or every topic)."""
        self._ready()
        if names is None:
            return dict(self.ids)
        return {n: self.ids[n] for n in names if n in self.ids}

    def topics_if_changed(self, token: str | None) -> TopicsView | None:
        """None when `token` is the current one; else (token, counts, ids) of every topic."""
        self._ready()
        current = f"{self.writer}:{self._changes}"
        if token == current:
            return None
        return current, dict(self.partitions), dict(self.ids)

    # ------------------------------------------------------------- ACLs (acl_table.py)

    @guarded
    def create_acls(self, creations: list[Any]) -> list[AclResult]:
        """Kafka's CreateAcls: per binding (an AclBinding or its seven fields) its result."""
        self._ready()
        results, new = self.acls.check_creations(creations)
        if new:
            self._write([entry(acl) for acl in new])
            self.acls.created(new)
            self._nudge_soon()
        return results

    @guarded
    def describe_acls(self, acl_filter: Any) -> tuple[Errors, str, list[AclBinding]]:
        """Kafka's DescribeAcls: the bindings `acl_filter` matches."""
        self._ready()
        return self.acls.describe(acl_filter)

    @guarded
    def delete_acls(self, filters: list[Any]) -> list[tuple[Errors, str, list[AclBinding]]]:
        """Kafka's DeleteAcls: per filter its result and the bindings it deleted."""
        self._ready()
        results = self.acls.match_deletions(filters)
        gone = list(dict.fromkeys(acl for _, _, acls in results for acl in acls))
        corrupt = self.acls.corrupt_matched(filters)
        if gone or corrupt:
            tombstones = [ServiceEntry(ACL_KIND, name, None) for name in corrupt]
            self._write([entry(acl, present=False) for acl in gone] + tombstones)
            self.acls.deleted(gone, corrupt)
            self._nudge_soon()
        return results

    def acls_if_changed(self, token: str | None) -> AclsView | None:
        """None when `token` is the current one; else (token, every binding)."""
        self._ready()
        view = self.acls.view(self.writer)
        return None if view[0] == token else view

    # ------------------------------------------------------------- Ray-path credentials

    @guarded
    def issue_credential(self, principal: str, ttl_s: float) -> tuple[str, str]:
        """(a credential of `principal` for `ttl_s` seconds, "") (coordinator/credentials.py),
        or ("", why not): a malformed principal, a ttl out of range."""
        self._ready()
        try:
            return self.credentials.issue(principal, ttl_s, self.clock.now_ms()), ""
        except ValueError as exc:
            return "", str(exc)

    @guarded
    def revoke_credential(self, credential: str) -> tuple[str, str]:
        """Revoke `credential` everywhere (service state; the leaders are nudged):
        (its id, ""), or ("", why not: not a credential)."""
        self._ready()
        try:
            revocation = self.credentials.revocation(credential)
        except ValueError as exc:
            return "", str(exc)
        self._write([revocation])
        self.credentials.revoked_now(revocation)
        self._nudge_soon()
        return revocation.name, ""

    def authorize_admin(self, method: str, args: tuple[Any, ...], credential: str | None) -> None:
        """Raise CredentialError or AuthorizationError unless `credential` may call `method`
        (the controller's administrative methods ask here; admin_guard.py)."""
        self._ready()
        self.guard.check(method, tuple(args), credential)

    def serve(self, method: str, *args: Any) -> Any:
        """An administrative `method` called by a service component that authorized its own
        caller (a gateway's Kafka client), unchecked as the leaders' `serve_*`
        (docs/security.md, The Ray path)."""
        return self.guard.unchecked(self, method)(*args)

    def ray_auth_if_changed(self, token: str | None) -> RayAuthView | None:
        """What a leader checks Ray callers with: None when `token` is the current one; else
        (token, every ACL binding, the secret, the revoked ids). Raises as `acls_if_changed`
        while an ACL entry is unreadable: no leader takes a view that might allow by mistake."""
        self._ready()
        acls_token, acls = self.acls.view(self.writer)
        current = f"{acls_token}:{self.credentials.changes}"
        if current == token:
            return None
        secret, revoked = self.credentials.view()
        return current, acls, secret, revoked

    # ------------------------------------------------------------- settings (settings_table.py)

    @guarded
    def config_get(self, keys: list[str] | None) -> list[dict[str, Any]] | str:
        """Per key (every one when none): its value in force, its start value, how it changes;
        or why not (an unknown key)."""
        self._ready()
        try:
            return self.settings.describe(keys)
        except SettingError as exc:
            return str(exc)

    @guarded
    def config_set(self, values: dict[str, Any]) -> str:
        """Make `values` ({key: value}) the settings in force: all or none; "" or why not."""
        self._ready()
        if not self._read_rolled():  # a roll may have changed what is in force: check over it
            return ("the settings in force could not be read from the controller (starting or "
                    "restarting?); nothing changed: try again")
        try:
            entries = self.settings.check_set(values)
        except SettingError as exc:
            return str(exc)
        self._write(entries)
        self.settings.applied(values)
        self._nudge_soon()
        return ""

    def settings_if_changed(self, token: str | None) -> SettingsView | None:
        """None when `token` is the current one; else (token, every setting changed online)."""
        self._ready()
        if not self._rolled_known and self.clock.now_ms() - self._rolled_asked_ms >= ROLLED_RETRY_MS:
            self._read_rolled()  # the controller did not answer at the load: ask again, now and then
        view = self.settings.view(self.writer)
        return None if view[0] == token else view

    # ------------------------------------------------------------- offsets

    @guarded
    def set_end_offsets(self, offsets: dict[tuple[str, int], int], at_ms: int | None = None) -> Refusal:
        """Record end offsets (all or nothing) as one sample each, at `at_ms` or now."""
        self._ready()
        refused = self._refuse_offsets(offsets)
        if refused is None and at_ms is not None and not (_is_int(at_ms) and at_ms >= 0):
            refused = Errors.INVALID_REQUEST, "", f"at_ms must be an int >= 0 or None, got {at_ms!r}"
        if refused is not None:
            return refused
        samples = [(t, p, self._sample_time(t, p, at_ms), o) for (t, p), o in offsets.items()]
        for topic, partition, at, offset in samples:
            why = self.history.check(topic, partition, at, offset)
            if why:
                return Errors.INVALID_REQUEST, f"{topic}-{partition}", why
        kept, dropped = self.history.record(samples, self.clock.now_ms())
        self._write([_sample_entry(s, s[3]) for s in kept] + [_sample_entry(s, None) for s in dropped])
        if kept:
            self.feed.record(kept)
            self._nudge_soon()
        return OK

    def end_offsets_since(self, cursor: object) -> FeedAnswer | None:
        """The end-offset samples recorded after `cursor` (None: none), for a leader's live
        lag; a cursor of another incarnation, or too old, gets the whole history."""
        self._ready()
        return self.feed.since(cursor, lambda: self.history.rows(None, None))

    def _sample_time(self, topic: str, partition: int, at_ms: int | None) -> int:
        if at_ms is not None:
            return at_ms
        last = self.history.latest(topic, partition)
        return max(self.clock.now_ms(), last[0] if last else 0)

    @guarded
    def set_start_offsets(self, offsets: dict[tuple[str, int], int]) -> Refusal:
        """Record log start offsets (all or nothing): what --to-earliest resets to."""
        self._ready()
        refused = self._refuse_offsets(offsets)
        if refused is not None:
            return refused
        ends = self.end_offsets(None)
        for (topic, partition), offset in offsets.items():
            if offset > ends[(topic, partition)]:
                why = f"start offset {offset} is above the end offset {ends[(topic, partition)]}"
                return Errors.INVALID_REQUEST, f"{topic}-{partition}", why
        changed = {topic: dict(self.start[topic]) for topic, _ in offsets}
        for (topic, partition), offset in offsets.items():
            changed[topic][partition] = offset
        self._write([_topic_entry(t, self.partitions[t], self.ids[t], start) for t, start in changed.items()])
        self.start.update(changed)
        return OK

    def _refuse_offsets(self, offsets: Any) -> Refusal | None:
        """Why `offsets` is no {(topic, partition): offset >= 0} of existing partitions."""
        if not isinstance(offsets, dict):
            return Errors.INVALID_REQUEST, "", "offsets must be a dict {(topic, partition): offset}"
        for key, offset in offsets.items():
            if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str) and _is_int(key[1])):
                return Errors.INVALID_REQUEST, str(key), "keys must be (topic, partition)"
            topic, partition = key
            if not 0 <= partition < self.partitions.get(topic, 0):
                return Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}", ""
            if not _is_int(offset) or offset < 0:
                why = f"offset must be an int >= 0, got {offset!r}"
                return Errors.INVALID_REQUEST, f"{topic}-{partition}", why
        return None

    def end_offsets(self, topics: list[str] | None) -> dict[tuple[str, int], int]:
        self._ready()
        latest = self.history.latest
        return {(t, p): (latest(t, p) or (0, 0))[1] for t, p in self._partitions_of(topics)}

    def start_offsets(self, topics: list[str] | None) -> dict[tuple[str, int], int]:
        self._ready()
        return {(t, p): self.start[t].get(p, 0) for t, p in self._partitions_of(topics)}

    def _partitions_of(self, topics: list[str] | None) -> list[tuple[str, int]]:
        names = self.partitions if topics is None else [t for t in topics if t in self.partitions]
        return [(t, p) for t in names for p in range(self.partitions[t])]

    def end_offset_history(self, topics: list[str] | None, since_ms: int | None) -> list[Sample]:
        """Rows (topic, partition, at_ms, end_offset) sorted by topic, partition,
        at_ms; see EndOffsetHistory.rows for `since_ms`."""
        self._ready()
        return self.history.rows(topics, since_ms)


def _topic_entry(name: str, partitions: int, topic_id: uuid.UUID, start: dict[int, int]) -> ServiceEntry:
    return ServiceEntry(TOPIC_KIND, name, msgpack.packb([partitions, topic_id.bytes, start]))


def _sample_entry(sample: Sample, end_offset: int | None) -> ServiceEntry:
    """The entry of one history sample; None: its tombstone."""
    topic, partition, at_ms, _ = sample
    data = None if end_offset is None else msgpack.packb(end_offset)
    return ServiceEntry(SAMPLE_KIND, f"{topic}/{partition}/{at_ms}", data)


def _legacy_samples(topics: dict[str, Any], samples: list[Sample]) -> list[Sample]:
    """An older registry's history, plus each end offset of its topics.json the history missed
    (a crash between the two files' writes), of the topics that file names."""
    last: dict[tuple[str, int], Sample] = {}
    for sample in sorted(samples):
        last[(sample[0], sample[1])] = sample
    out = [s for s in samples if s[0] in topics]
    for name, topic in topics.items():
        for p, end in topic["end_offsets"].items():
            seen = last.get((name, int(p)))
            if seen is None or seen[3] < end:
                out.append((name, int(p), seen[2] if seen else 0, end))
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def nudge_leaders(namespace: str) -> None:
    """Tell every partition leader of the service that the topics changed (best effort)."""
    if not ray.is_initialized():  # the registry class used without Ray (tests)
        return
    try:
        controller = ray.get_actor(CONTROLLER_NAME, namespace=namespace)
        routing: Any = ray.get(controller.routing.remote(), timeout=NUDGE_TIMEOUT_S)
        for leader in routing[1]:
            if leader is not None:
                leader.topics_changed.remote()
    except Exception as exc:  # the leaders' own reads catch up
        logger.info("topic change not pushed to the partition leaders: %r", exc)
