"""The error codes KIP-848 adds are Kafka's, by name and number (checked against kio's table)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator.consumer import FencedMemberEpochError
from coordinator.errors import Errors


@pytest.mark.parametrize("error", list(Errors), ids=lambda error: error.name)
def test_every_code_has_kafkas_name_and_number(error: Errors) -> None:
    assert ErrorCode[error.name.lower()].value == error.code


def test_the_consumer_group_protocol_codes() -> None:
    assert [
        Errors.FENCED_MEMBER_EPOCH, Errors.UNRELEASED_INSTANCE_ID, Errors.UNSUPPORTED_ASSIGNOR,
        Errors.STALE_MEMBER_EPOCH, Errors.INVALID_REGULAR_EXPRESSION,
    ] == [110, 111, 112, 113, 128]


def test_a_fenced_member_is_answered_with_the_enum_member() -> None:
    assert FencedMemberEpochError.error_code is Errors.FENCED_MEMBER_EPOCH
