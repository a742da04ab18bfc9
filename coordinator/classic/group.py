"""One classic group: its members, generation, protocol and offsets.

This is Kafka's GroupMetadata/ClassicGroup: membership bookkeeping only. It
never answers requests or schedules timers; the handlers in `rebalance.py`,
`join.py` and `offsets.py` do that. Parked requests are held as opaque
tokens (`join_token`, `sync_token`) that the handlers answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterator

from coordinator.classic.state import GroupState, check_transition
from coordinator.consumer_protocol import decode_subscription
from coordinator.messages import JoinGroupMember
from coordinator.records import GroupMetadataValue, MemberRecord, OffsetCommitKey, OffsetCommitValue

CONSUMER_PROTOCOL_TYPE = "consumer"
Token = Hashable


class Member:
    __slots__ = (
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "protocol_type",
        "protocols",
        "assignment",
        "join_token",
        "sync_token",
        "is_new",
        "heartbeat_deadline_ms",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: tuple[tuple[str, bytes], ...],
        assignment: bytes = b"",
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = assignment
        self.join_token: Token | None = None
        self.sync_token: Token | None = None
        # A member that has not completed a join phase yet is expired by the
        # new-member join timeout, not by its session timeout.
        self.is_new = False
        self.heartbeat_deadline_ms = 0

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_token is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_token is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return bytes(metadata)
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return len(protocols) == len(self.protocols) and all(
            name == own_name and bytes(meta) == bytes(own_meta)
            for (name, meta), (own_name, own_meta) in zip(protocols, self.protocols)
        )

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


class Group:
    """Membership and offsets of one group. Mutated only by the shard's handlers."""

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.num_awaiting_join = 0
        self.new_member_added = False
        self.initial_join_delay = False
        self.supported_protocols: Counter[str] = Counter()
        self.subscribed_topics: frozenset[str] | None = None
        # Keyed by the record key: replaying a record is one dict store.
        self.offsets: dict[OffsetCommitKey, OffsetCommitValue] = {}

    # -------------------------------------------------------------- queries

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        current = self.static_member_id(group_instance_id)
        return current is not None and current != member_id

    @property
    def size(self) -> int:
        return len(self.members)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Kafka's supportsProtocols, and the names must be distinct.

        `supported_protocols` counts one vote per name and member; a name
        listed twice would count twice, no protocol would reach the member
        count and `select_protocol` would find no candidate. Kafka counts the
        same way (its request collection keeps duplicates) and fails the
        same way, so there is no Kafka answer to copy: such a member is
        refused with INCONSISTENT_GROUP_PROTOCOL, Kafka's error for a member
        whose protocols the group cannot agree on.
        """
        if len(set(names)) != len(names):
            return False
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        size = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == size for name in names
        )

    def candidate_protocols(self) -> set[str]:
        size = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == size}

    def select_protocol(self) -> str:
        """Plurality vote over the protocols every member supports.

        Ties go to the protocol the leader ranks highest, so the choice is
        deterministic (Kafka leaves it to hash order).
        """
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id!r}")
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        tied = {name for name, count in votes.items() if count == best}
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        return next(name for name in leader.protocol_names() if name in tied)

    def current_member_metadata(self) -> tuple[JoinGroupMember, ...]:
        protocol = self.protocol_name
        if protocol is None:
            raise ValueError(f"no protocol selected for group {self.group_id!r}")
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in self.members.values()
        )

    def all_tokens(self) -> Iterator[tuple[Member, Token]]:
        for member in self.members.values():
            if member.join_token is not None:
                yield member, member.join_token
            if member.sync_token is not None:
                yield member, member.sync_token

    # ------------------------------------------------------------ mutations

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        check_transition(self.group_id, self.state, target)
        self.state = target
        self.state_timestamp_ms = now_ms

    def add(self, member: Member, join_token: Token | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.join_token = join_token
        if join_token is not None:
            self.num_awaiting_join += 1
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names())
            self.supported_protocols += Counter()  # drop zero counts
            if member.is_awaiting_join:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member(
        self,
        member: Member,
        protocols: tuple[tuple[str, bytes], ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_token: Token | None,
    ) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        self.supported_protocols += Counter()
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self.supported_protocols.update(member.protocol_names())
        self.set_join_token(member, join_token)

    def set_join_token(self, member: Member, token: Token | None) -> None:
        if member.join_token is None and token is not None:
            self.num_awaiting_join += 1
        elif member.join_token is not None and token is None:
            self.num_awaiting_join -= 1
        member.join_token = token

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.static_members[group_instance_id] = new_member_id
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members[self.leader_id]
        if leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Topics the members subscribe to, known only for the consumer protocol."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        seen: set[bytes] = set()  # members mostly share one subscription: decode it once
        try:
            for member in self.members.values():
                metadata = member.metadata(self.protocol_name)
                if metadata not in seen:
                    seen.add(metadata)
                    topics.update(decode_subscription(metadata).topics)
        except ValueError:
            return None
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # ---------------------------------------------------------- persistence

    def to_record_value(self) -> GroupMetadataValue:
        protocol = self.protocol_name
        members = tuple(
            MemberRecord(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(protocol) if protocol is not None else b"",
                m.assignment,
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            self.protocol_type or "",
            self.generation_id,
            protocol,
            self.leader_id,
            self.state_timestamp_ms,
            members,
        )

    def load_record_value(self, value: GroupMetadataValue) -> None:
        """Replace the membership with a stored group record (Empty or Stable)."""
        self.members.clear()
        self.static_members.clear()
        self.supported_protocols.clear()
        self.pending_members.clear()
        self.pending_sync_members.clear()
        self.num_awaiting_join = 0
        self.protocol_type = value.protocol_type or None
        self.generation_id = value.generation
        self.protocol_name = value.protocol
        self.leader_id = value.leader
        self.state_timestamp_ms = value.current_state_timestamp_ms
        for rec in value.members:
            protocols = ((value.protocol or "", bytes(rec.subscription)),)
            member = Member(
                rec.member_id,
                rec.group_instance_id,
                rec.client_id,
                rec.client_host,
                rec.rebalance_timeout_ms,
                rec.session_timeout_ms,
                value.protocol_type,
                protocols,
                bytes(rec.assignment),
            )
            self.add(member, None)
        self.leader_id = value.leader if value.members else None
        self.state = GroupState.STABLE if value.members else GroupState.EMPTY
        self.subscribed_topics = self.compute_subscribed_topics()
