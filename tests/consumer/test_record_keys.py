"""Record keys of different types never meet, even with the same fields."""

from __future__ import annotations

import pickle

from coordinator.records import (
    CONSUMER_GROUP_KEY_TYPES,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    GroupMetadataKey,
    OffsetCommitKey,
)

ONE_FIELD = [
    GroupMetadataKey("g"),
    ConsumerGroupMetadataKey("g"),
    ConsumerGroupPartitionMetadataKey("g"),
    ConsumerGroupTargetAssignmentMetadataKey("g"),
]
TWO_FIELDS = [
    ConsumerGroupMemberMetadataKey("g", "m"),
    ConsumerGroupTargetAssignmentMemberKey("g", "m"),
    ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
    ConsumerGroupRegularExpressionKey("g", "m"),
]


def test_keys_with_the_same_fields_are_distinct_dict_keys() -> None:
    keys = ONE_FIELD + TWO_FIELDS + [OffsetCommitKey("g", "m", 0)]
    index = {key: position for position, key in enumerate(keys)}

    assert len(index) == len(keys)
    for position, key in enumerate(keys):
        assert index[type(key)(*key)] == position
        assert [other for other in keys if other == key] == [key]
        assert [other for other in keys if other != key] == [k for k in keys if k is not key]


def test_typed_keys_are_not_plain_tuples_either() -> None:
    assert ConsumerGroupMetadataKey("g") != ("g",) and ("g",) != ConsumerGroupMetadataKey("g")
    assert ("g",) not in {GroupMetadataKey("g"): 1}


def test_keys_survive_pickling_with_their_identity() -> None:
    for key in ONE_FIELD + TWO_FIELDS:
        copy = pickle.loads(pickle.dumps(key))
        assert copy == key and type(copy) is type(key) and hash(copy) == hash(key)


def test_every_consumer_group_key_type_is_listed() -> None:
    assert set(CONSUMER_GROUP_KEY_TYPES) == {type(k) for k in ONE_FIELD[1:] + TWO_FIELDS}
