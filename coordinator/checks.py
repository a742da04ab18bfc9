"""Field checks of the group protocol messages: the one definition of a
well-formed request, applied when one is built and where one enters a
partition actor.

What a field of each type hint accepts:
- `str`: exactly a str that UTF-8 can encode (no lone surrogate), as every
  string on Kafka's wire; the log's encoder fails on anything else.
- `int`: exactly an int (not a bool) within int64, Kafka's widest integer
  and the log's.
- `bool`, `bytes`, `UUID` (a topic id): exactly those types.
- `X | None`: None or an X. `tuple[X, ...]`: exactly a tuple of Xs;
  `tuple[X, Y]`: exactly a tuple of two.
- a nested message (`MemberIdentity`, `OffsetCommitPartition`): exactly that
  class, every field set and valid.
Types are exact, not isinstance: a subclass can redefine hashing or
equality inside the shard, and Ray ships classes by value.

`check_fields(obj)` runs at construction and raises TypeError (wrong type)
or ValueError (a value the log cannot encode). `validate_request(obj)` runs
where a request enters a partition actor: a request rebuilt from the wire
form (actors/core/wire.py) or made with `object.__new__` skipped its
construction, so the actor trusts nothing. It accepts only the classes
coordinator.messages registers, by exact type, and raises
InvalidRequestError.

Each rule has a fast predicate, which checks whole columns in C loops
(`set(map(type, column))`, `min`/`max`, `str.isascii`), and a walk that
finds and names the first bad value; the walk runs only when the fast
predicate refuses, to word the error. A test holds the two to one verdict.
The checks run none of the sender's code: types are compared by identity,
and error messages show a value only when it is a str, bytes, int, bool or
None (repr of anything else is the sender's). A value whose type fails the
fast checks in an unforeseen way (a metaclass that cannot hash) is judged by
the walk alone.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Sequence
from dataclasses import fields, is_dataclass
from functools import partial
from operator import attrgetter, call, is_not
from typing import Any, Union, get_args, get_origin, get_type_hints
from uuid import UUID

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# A column of at most this many items is checked item by item: below it,
# building columns costs more than it saves (measured on commits: the two
# cost the same at 12 to 16 partitions).
ROW_CHECK_MAX = 12

# (exception class, message) of the first bad value found.
Problem = tuple[type[Exception], str]

_not_none = partial(is_not, None)


class InvalidRequestError(ValueError):
    """A request that is not a well-formed group protocol request; answered to its caller alone."""


def field_names(cls: type) -> tuple[str, ...]:
    """The fields of a message dataclass or NamedTuple, in order."""
    names: tuple[str, ...] = getattr(cls, "_fields", None) or tuple(f.name for f in fields(cls))
    return names


# ------------------------------------------------------------- wording


def _show(value: object) -> str:
    kind = type(value)  # compared by identity: `==` would run a metaclass's code
    if kind is str or kind is bytes:
        return repr(value[:80])  # type: ignore[index]
    if kind is int and abs(value) >= 10**30:  # type: ignore[arg-type]  # (repr refuses ints over 4,300 digits)
        return f"<int of {value.bit_length()} bits>"  # type: ignore[attr-defined]
    if kind is int or kind is bool or value is None:
        return repr(value)
    return f"<{type(value).__name__}>"


def _wrong_type(subject: str, tail: str, expected: str, value: object) -> Problem:
    item = f" (item {tail})" if tail else ""
    return TypeError, f"{subject} must be {expected}{item}, got {type(value).__name__}: {_show(value)}"


def _bad_value(subject: str, tail: str, reason: str, value: object) -> Problem:
    item = f" (item {tail})" if tail else ""
    return ValueError, f"{subject} must be {reason}{item}, got {_show(value)}"


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# ------------------------------------------------------------- rules


class Rule:
    """What one type hint accepts. `subject` names the innermost named field
    being checked, `tail` the tuple indexes below it ("[0][1]")."""

    name = ""

    def ok(self, value: object) -> bool:
        raise NotImplementedError

    def column_ok(self, values: Sequence[object]) -> bool:
        """`ok` for every value of a non-empty column."""
        return all(map(self.ok, values))

    def problem(self, value: object, subject: str, tail: str, expected: str) -> Problem | None:
        """The first bad value in `value`, worded with `expected` for its own type."""
        raise NotImplementedError


class _Str(Rule):
    name = "str"

    def ok(self, value: object) -> bool:
        return type(value) is str and (value.isascii() or _utf8(value))

    def column_ok(self, values: Sequence[object]) -> bool:
        if set(map(type, values)) != {str}:
            return False
        return all(map(str.isascii, values)) or all(map(_utf8, values))  # type: ignore[arg-type]

    def problem(self, value: object, subject: str, tail: str, expected: str) -> Problem | None:
        if type(value) is not str:
            return _wrong_type(subject, tail, expected, value)
        return None if _utf8(value) else _bad_value(subject, tail, "valid UTF-8", value)


class _Int(Rule):
    name = "int"

    def ok(self, value: object) -> bool:
        return type(value) is int and INT64_MIN <= value <= INT64_MAX

    def column_ok(self, values: Sequence[object]) -> bool:
        return set(map(type, values)) == {int} and INT64_MIN <= min(values) and max(values) <= INT64_MAX  # type: ignore[type-var, operator]

    def problem(self, value: object, subject: str, tail: str, expected: str) -> Problem | None:
        if type(value) is not int:
            return _wrong_type(subject, tail, expected, value)
        return None if INT64_MIN <= value <= INT64_MAX else _bad_value(subject, tail, "within int64", value)


class _Exact(Rule):
    """bool and bytes: the type is the whole check."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.name = cls.__name__

    def ok(self, value: object) -> bool:
        return type(value) is self.cls

    def column_ok(self, values: Sequence[object]) -> bool:
        return set(map(type, values)) == {self.cls}

    def problem(self, value: object, subject: str, tail: str, expected: str) -> Problem | None:
        return None if type(value) is self.cls else _wrong_type(subject, tail, expected, value)


class _Optional(Rule):
    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.name = f"{rule.name} | None"

    def ok(self, value: object) -> bool:
        return value is None or self.rule.ok(value)

    def column_ok(self, values: Sequence[object]) -> bool:
        present = tuple(filter(_not_none, values))
        return not present or self.rule.column_ok(present)

    def problem(self, value: object, subject: str, tail: str, expected: str) -> Problem | None:
        return None if value is None else self.rule.problem(value, subject, tail, expected)


class _TupleOf(Rule):
    """tuple[X, ...]"""

    def __init__(self, item: Rule) -> None:
        self.item = item
        self.name = f"tuple[{item.name}, ...]"

    def ok(self, value: object) -> bool:
        return type(value) is tuple and (not value or self.item.column_ok(value))

    def problem(self, value: object, subject: str, tail: str, expected: str) -> Problem | None:
        if type(value) is not tuple:
            return _wrong_type(subject, tail, expected, value)
        item = self.item
        for i, x in enumerate(value):
            found = item.problem(x, subject, f"{tail}[{i}]", item.name)
            if found is not None:
                return found
        return None


class _Row(Rule):
    """tuple[X, Y]: a fixed number of items."""

    def __init__(self, items: Sequence[Rule]) -> None:
        self.items = tuple(items)
        self.oks = tuple(r.ok for r in self.items)
        self.name = f"tuple[{', '.join(r.name for r in self.items)}]"

    def ok(self, value: object) -> bool:
        return type(value) is tuple and len(value) == len(self.oks) and all(map(call, self.oks, value))

    def column_ok(self, values: Sequence[object]) -> bool:
        if len(values) <= ROW_CHECK_MAX:
            return all(map(self.ok, values))
        if set(map(type, values)) != {tuple} or set(map(len, values)) != {len(self.items)}:  # type: ignore[arg-type]
            return False
        return all(rule.column_ok(column) for rule, column in zip(self.items, zip(*values)))

    def problem(self, value: object, subject: str, tail: str, expected: str) -> Problem | None:
        if type(value) is not tuple or len(value) != len(self.items):
            return _wrong_type(subject, tail, expected, value)
        for i, (rule, x) in enumerate(zip(self.items, value)):
            found = rule.problem(x, subject, f"{tail}[{i}]", rule.name)
            if found is not None:
                return found
        return None


class _Message(Rule):
    """A message dataclass or NamedTuple, by exact class, and its fields."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.name = cls.__name__
        self.names = field_names(cls)
        hints = get_type_hints(cls)
        self.fields = tuple(_compile(hints[name]) for name in self.names)
        self.oks = tuple(rule.ok for rule in self.fields)
        self.is_tuple = issubclass(cls, tuple)
        self._getter = attrgetter(*self.names)

    def values(self, obj: Any) -> tuple[Any, ...]:
        """The field values of an instance of the class; AttributeError if one is not set."""
        if self.is_tuple:
            return obj  # type: ignore[no-any-return]
        return (self._getter(obj),) if len(self.names) == 1 else self._getter(obj)

    def fields_ok(self, obj: Any) -> bool:
        """The fast verdict on an instance of the class (checked by the caller)."""
        if self.is_tuple and len(obj) != len(self.names):
            return False
        try:
            return all(map(call, self.oks, self.values(obj)))
        except AttributeError:  # a field never set (object.__new__)
            return False

    def ok(self, value: object) -> bool:
        return type(value) is self.cls and self.fields_ok(value)

    def column_ok(self, values: Sequence[object]) -> bool:
        if len(values) <= ROW_CHECK_MAX:
            return all(map(self.ok, values))
        if set(map(type, values)) != {self.cls}:
            return False
        if self.is_tuple:
            if set(map(len, values)) != {len(self.names)}:  # type: ignore[arg-type]
                return False
            rows: Iterable[Any] = values
        elif len(self.names) == 1:
            rows = zip(map(self._getter, values))
        else:
            rows = map(self._getter, values)
        try:
            columns = tuple(zip(*rows))
        except AttributeError:  # a field never set
            return False
        return all(rule.column_ok(column) for rule, column in zip(self.fields, columns))

    def problem(self, value: object, subject: str, tail: str, expected: str) -> Problem | None:
        if type(value) is not self.cls:
            return _wrong_type(subject, tail, expected, value)
        return self.fields_problem(value, f"{subject}{tail}")

    def fields_problem(self, obj: Any, subject: str) -> Problem | None:
        """The first bad field of an instance of the class, named under `subject`."""
        size = len(self.names)
        if self.is_tuple and len(obj) != size:
            return TypeError, f"{subject} must be a {self.name} of {size} fields, got {len(obj)}"
        for i, (name, rule) in enumerate(zip(self.names, self.fields)):
            where = f"{subject}.{name}"
            value = obj[i] if self.is_tuple else getattr(obj, name, _UNSET)
            if value is _UNSET:
                return TypeError, f"{where} is not set"
            found = rule.problem(value, where, "", rule.name)
            if found is not None:
                return found
        return None


_UNSET = object()
_SCALARS: dict[Any, Rule] = {
    str: _Str(), int: _Int(), bool: _Exact(bool), bytes: _Exact(bytes), UUID: _Exact(UUID),
}
_MESSAGES: dict[type, _Message] = {}


def _compile(hint: Any) -> Rule:
    """The rule of a field's type hint; only the shapes messages use."""
    origin, args = get_origin(hint), get_args(hint)
    if hint in _SCALARS:
        return _SCALARS[hint]
    if origin in (Union, types.UnionType) and len(args) == 2 and type(None) in args:
        (present,) = (arg for arg in args if arg is not type(None))
        return _Optional(_compile(present))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _TupleOf(_compile(args[0]))
    if origin is tuple:
        return _Row([_compile(arg) for arg in args])
    if isinstance(hint, type) and (is_dataclass(hint) or hasattr(hint, "_fields")):
        return message_rule(hint)
    raise TypeError(f"no field check for type hint {hint!r}")


def message_rule(cls: type) -> _Message:
    """The compiled checks of a message class (compiled once)."""
    rule = _MESSAGES.get(cls)
    if rule is None:
        rule = _MESSAGES[cls] = _Message(cls)
    return rule


# ------------------------------------------------------------- entry points


def check_fields(obj: object) -> None:
    """At construction: raise TypeError naming the first field whose value has
    the wrong type, or ValueError for a str that is not valid UTF-8 or an int
    beyond int64."""
    found = _problem(message_rule(type(obj)), obj)
    if found is not None:
        kind, message = found
        raise kind(message)


# Keyed by id(class): hashing a class runs its metaclass's code.
_REQUESTS: dict[int, _Message] = {}


class Checked:
    """Base of the request classes: their fields are checked when one is built."""

    __slots__ = ()

    def __post_init__(self) -> None:
        check_fields(self)


def register_requests(classes: Iterable[type]) -> None:
    """Declare the request classes `validate_request` accepts (coordinator.messages does)."""
    for cls in classes:
        _REQUESTS[id(cls)] = message_rule(cls)


def validate_request(obj: object) -> None:
    """Raise InvalidRequestError unless `obj` is exactly one of the request
    classes with every field valid, nested ones included."""
    cls = type(obj)
    rule = _REQUESTS.get(id(cls))
    if rule is None or rule.cls is not cls:
        raise InvalidRequestError(f"not a group protocol request: {cls.__qualname__}")
    found = _problem(rule, obj)
    if found is not None:
        raise InvalidRequestError(found[1])


def _problem(rule: _Message, obj: object) -> Problem | None:
    """None if every field of `obj` is valid (the fast verdict), else the
    first bad one, worded by the walk."""
    try:
        if rule.fields_ok(obj):
            return None
    except Exception:  # a type whose metaclass fails hashing; the walk compares by identity only
        pass
    return rule.fields_problem(obj, rule.name) or (TypeError, f"{rule.name} is malformed")
