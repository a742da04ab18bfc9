"""What a consumer group subscribes to: topic metadata, regexes, and topic changes.

Follows Kafka's `ModernGroup.computeSubscriptionMetadata`, the regex
resolution of `GroupMetadataManager` (Kafka 4.0: `maybeUpdateRegularExpressions`,
`refreshRegularExpressions`, `resolveRegularExpressions`) and its
`onNewMetadataImage` refresh, on the topics the shard's driver gives
(`Shard.update_topics`), a name -> partition count mapping standing in for
Kafka's metadata image.

Rules, as Kafka: a regex is matched with RE2 semantics (the `google-re2`
binding; Kafka uses RE2/J), as a full match, against every topic name; a
pattern that does not compile is INVALID_REGULAR_EXPRESSION. The subscription
metadata holds every subscribed topic that exists, by name, with its id and
partition count; a change of it bumps the group epoch.

Departures:
- Kafka resolves a new regex asynchronously and bumps the epoch once the
  ConsumerGroupRegularExpression record is written; here it is resolved in
  the heartbeat that brings it, in the same batch (the core does no
  background work).
- A topic change refreshes every subscribed group at once (Kafka marks them
  and refreshes on their next heartbeat), writing its records in the Result
  of `update_topics`.
- A regex record's Version counts the `update_topics` calls since the shard
  was loaded (Kafka: the metadata image's offset); only informative.
- A pattern is compiled with RE2's memory budget set to
  `REGEX_MAX_MEM_BYTES` (1 MiB; RE2's default is 8 MiB and RE2/J has none):
  a pattern whose program would exceed it is INVALID_REGULAR_EXPRESSION
  ("pattern too large"). Compiling grows faster than linearly with such
  patterns (6,400 bytes of `[a-z0-9-]{1,200}` took 6.9 s of CPU with the
  default budget, 0.01 s to refuse with this one), and Kafka compiles off its
  coordinator thread while this core runs on the partition's only one.
  Compiled patterns are cached (`REGEX_CACHE_SIZE`), so refreshing a group's
  regexes on every topic change does not compile them again; a stored regex
  that no longer compiles (written before the budget) matches no topic.
- Topic ids: the driver may give them; otherwise a topic's id is the
  name-based UUID `uuid5(TOPIC_ID_NAMESPACE, name)`, the same in every shard
  (Kafka assigns a random id at creation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING
from uuid import UUID, uuid5

from coordinator.consumer import records as helpers
from coordinator.consumer.assignors.spec import TopicMetadata
from coordinator.consumer.group import ConsumerGroup, ResolvedRegularExpression, SubscriptionCount
from coordinator.errors import Errors

if TYPE_CHECKING:
    from coordinator.shard import Shard

TOPIC_ID_NAMESPACE = UUID("6f1b6a2e-5a53-4f0e-9c39-7261796772f0")
REGEX_MAX_MEM_BYTES = 1 << 20
# At most this many patterns of up to REGEX_MAX_MEM_BYTES each stay compiled (64 MiB at worst).
REGEX_CACHE_SIZE = 64


class InvalidRegularExpression(Exception):
    error = Errors.INVALID_REGULAR_EXPRESSION


def topic_id_for(name: str) -> UUID:
    return uuid5(TOPIC_ID_NAMESPACE, name)


def topics_from_counts(
    counts: Mapping[str, int], topic_ids: Mapping[str, UUID] | None, old: Mapping[str, TopicMetadata]
) -> dict[str, TopicMetadata]:
    """The shard's topics: a known topic keeps its id unless the driver gives one."""
    given = topic_ids or {}
    topics = {}
    for name in sorted(counts):
        known = old.get(name)
        topic_id = given.get(name) or (known.topic_id if known is not None else topic_id_for(name))
        topics[name] = TopicMetadata(topic_id, name, counts[name])
    return topics


@lru_cache(maxsize=REGEX_CACHE_SIZE)
def _fullmatch(regex: str) -> Callable[[str], object] | str:
    """The compiled pattern's fullmatch, or why it does not compile (cached too: a refused
    pattern can take a good part of a second to refuse, and a client may send it again).
    RE2 is imported here, at the first regex: 1 MiB of every partition actor that no group
    subscribing by regex needs (docs/capacity.md)."""
    import re2

    options = re2.Options()
    options.log_errors = False
    options.max_mem = REGEX_MAX_MEM_BYTES
    try:
        return re2.compile(regex, options=options).fullmatch  # type: ignore[no-any-return]
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and type(exc.args[0]) is bytes else exc
        return f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {reason}."


def resolve_regex(regex: str, topic_names: Iterable[str]) -> frozenset[str]:
    """The topics `regex` fully matches, with RE2 semantics; raises InvalidRegularExpression."""
    fullmatch = _fullmatch(regex)
    if isinstance(fullmatch, str):
        raise InvalidRegularExpression(fullmatch)
    return frozenset(name for name in topic_names if fullmatch(name) is not None)


def subscription_metadata(
    subscribed: Mapping[str, SubscriptionCount], topics: Mapping[str, TopicMetadata]
) -> dict[str, TopicMetadata]:
    """Kafka's `computeSubscriptionMetadata`: the subscribed topics that exist, by name (sorted)."""
    return {name: topics[name] for name in sorted(subscribed) if name in topics}


def refresh_group(shard: Shard, group: ConsumerGroup, version: int) -> None:
    """Re-resolve the group's regexes and its subscription metadata on the shard's topics.

    Writes a regex record for each regex whose topics changed, then the
    subscription metadata and a bumped group epoch if anything changed.
    """
    group_id = group.group_id
    changed = False
    for regex, resolved in list(group.resolved_regular_expressions.items()):
        try:
            topics = resolve_regex(regex, shard.topics)
        except InvalidRegularExpression:
            topics = frozenset()
        if topics != resolved.topics:
            new = ResolvedRegularExpression(topics, version, shard.now_ms)
            shard.write(helpers.regular_expression_record(group_id, regex, new))
            changed = True
    metadata = subscription_metadata(group.subscribed_topic_names, shard.topics)
    if metadata != group.subscription_metadata:
        shard.write(helpers.subscription_metadata_record(group_id, metadata))
        changed = True
    if changed:
        shard.write(helpers.epoch_record(group_id, group.group_epoch + 1))
