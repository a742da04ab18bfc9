"""Which settings change while the service runs, and the one way a changed value is checked.

`raygroups config get/set` (issue 48, `actors/client/settings_table.py`) names a
setting by its field name in snake case: a field of `ServiceSettings`, of its
`coordinator` (`CoordinatorConfig`, Kafka's broker configs) or of its `log`
(`LogConfig`); `kafka_listener` is one key. `CHANGES` classifies every one:

- online: running leaders (and new ones, at their first read of the registry)
  and the controller apply it within a second; `config set` stores it as
  service state.
- rolling: read when an actor starts (the controller, a log opened, a port
  bound, a value copied at load): it needs `raygroups rolling-restart
  --settings`, so `config set` refuses it and says so (no pending value is
  kept: what is stored is what is in force).
- fixed: the service's identity or its logs' layout; never changes (the
  partition count changes only through `raygroups repartition`).

A value is checked by building the settings with it (`with_overrides`):
the types of the fields' defaults, then `ServiceSettings.__post_init__` and
`CoordinatorConfig.__post_init__`, the same rules as at start. Pure: no Ray.

What is in force is one composition, everywhere (`in_force`): the start settings, then
the last rolling restart's `--settings` (the controller's plan, which every actor it
creates starts with), then the online changes (the registry's service state), which
every actor applies over its start settings. `describe` answers `config get` from it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from actors.core.settings import ServiceSettings
from coordinator.config import CoordinatorConfig
from log.config import LogConfig

ONLINE, ROLLING, FIXED = "online", "rolling", "fixed"
SECTIONS = {"coordinator": CoordinatorConfig, "log": LogConfig}  # flattened into the key space

_CONTROLLER = "read by the controller when it starts its loops"
_LOAD = "read when a leader loads its partition"
# Every key, its change class and why; tests check that every field is here.
CHANGES: dict[str, tuple[str, str]] = {
    # ServiceSettings
    "data_dir": (FIXED, "where the logs live"),
    "num_partitions": (FIXED, "changed by `raygroups repartition`"),
    "namespace": (FIXED, "names every actor of the service"),
    "replication_factor": (FIXED, "the logs are laid out for it"),
    "shared_data_dir": (FIXED, "the logs are laid out for it"),
    "min_insync_replicas": (ROLLING, "read by the controller's ISR decisions and each leader at start"),
    "replica_lag_time_max_ms": (ROLLING, "read by each leader's replication state at start"),
    "replication_max_bytes": (ROLLING, "read by each leader's replication state at start"),
    "commit_timeout_ms": (ROLLING, "read by each leader's runtime at start"),
    "replication_link": (ROLLING, "connections are set up when replicas start"),
    "confirm_reads": (ROLLING, "read by each leader's runtime at start"),
    "partition_max_concurrency": (ROLLING, "a Ray actor option, set when the actor is created"),
    "auto_repartition": (ROLLING, _CONTROLLER),
    "auto_repartition_after_s": (ROLLING, _CONTROLLER),
    "max_partitions": (ROLLING, _CONTROLLER),
    "kafka_listener": (ROLLING, "ports and security are bound when a listener starts"),
    "ray_credentials": (ROLLING, "read by each partition actor at start; Ray clients then need a credential"),
    # read at each use by the controller (`actors.controller.plane.settings_once`)
    "probe_interval_s": (ONLINE, ""),
    "probe_timeout_s": (ONLINE, ""),
    "standby_actors": (ONLINE, ""),
    "load_stall_timeout_s": (ONLINE, ""),
    "actor_start_timeout_s": (ONLINE, ""),
    "kill_wait_s": (ONLINE, ""),
    "reap_interval_s": (ONLINE, ""),
    "standby_backoff_max_s": (ONLINE, ""),
    "replica_reassign_delay_s": (ONLINE, ""),
    "disk_failure_move_delay_s": (ONLINE, ""),
    "balance_interval_s": (ONLINE, ""),
    "precopy_min_groups": (ONLINE, ""),
    # read at each use by the partition leaders (`actors.partition.serving.apply_settings`)
    "mailbox_ttl_s": (ONLINE, ""),
    "maintenance_interval_s": (ONLINE, ""),
    "snapshot_every_records": (ONLINE, ""),
    "compaction_interval_s": (ONLINE, ""),
    "topics_refresh_interval_s": (ONLINE, ""),
    "lag_metrics_interval_s": (ONLINE, ""),
    "lag_metrics_partitions_max": (ONLINE, ""),
    "lag_metrics_groups_max": (ONLINE, ""),
    # CoordinatorConfig (read by the shard at each use)
    "group_min_session_timeout_ms": (ONLINE, ""),
    "group_max_session_timeout_ms": (ONLINE, ""),
    "group_initial_rebalance_delay_ms": (ONLINE, ""),
    "group_max_size": (ONLINE, ""),
    "group_new_member_join_timeout_ms": (ONLINE, ""),
    "offset_metadata_max_bytes": (ONLINE, ""),
    "offsets_retention_minutes": (ONLINE, ""),
    "offsets_retention_check_interval_ms": (ONLINE, ""),
    "offsets_topic_num_partitions": (FIXED, "changed by `raygroups repartition`"),
    "offsets_max_commit_bytes": (ONLINE, ""),
    "group_consumer_session_timeout_ms": (ONLINE, ""),
    "group_consumer_heartbeat_interval_ms": (ONLINE, ""),
    "group_consumer_max_size": (ONLINE, ""),
    "group_consumer_assignment_interval_ms": (ONLINE, ""),
    "group_consumer_migration_policy": (ONLINE, ""),
    "lag_window_ms": (ROLLING, _LOAD),
    # LogConfig
    "offsets_segment_bytes": (ROLLING, "read when a log is opened"),
    "offsets_load_buffer_size": (ROLLING, "read when a log is opened"),
    "offsets_delete_retention_ms": (ROLLING, "read when a log is opened"),
    "fsync": (ROLLING, "read when a log is opened"),
    "snapshot_batch_records": (ROLLING, "read when a log is opened"),
}


class SettingError(ValueError):
    """A setting refused: unknown, not changeable online, or out of range (the reason)."""


def section_of(key: str) -> str | None:
    """The `ServiceSettings` field holding `key` ("coordinator", "log"), None for a top-level one."""
    for section, cls in SECTIONS.items():
        if key in {f.name for f in dataclasses.fields(cls)}:
            return section
    return None


def value_of(settings: ServiceSettings, key: str) -> Any:
    """`key`'s value in `settings`, as JSON takes it (tuples as lists, a dataclass as a dict)."""
    section = section_of(key)
    value = getattr(getattr(settings, section) if section else settings, key)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.loads(json.dumps(value))


def parse_assignment(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` -> (key, value): VALUE as JSON (`6000`, `true`, `1.5`), else as a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise SettingError(f"{text!r} is not KEY=VALUE")
    try:
        return key.strip(), json.loads(raw)
    except ValueError:
        return key.strip(), raw


def check_key(key: str, online_only: bool = True) -> None:
    if key not in CHANGES:
        raise SettingError(f"unknown setting {key!r}")
    change, why = CHANGES[key]
    if online_only and change != ONLINE:
        how = "a rolling restart (`raygroups rolling-restart --settings`)" if change == ROLLING else "never"
        raise SettingError(f"{key} cannot change online ({why}): it changes by {how}")


def rolling_overrides(base: ServiceSettings, overrides: Mapping[str, Any]) -> ServiceSettings:
    """`base` with `overrides` applied by a rolling restart: online and rolling keys, never a
    fixed one; SettingError with the reason."""
    for key in overrides:
        if key in CHANGES and CHANGES[key][0] == FIXED:
            raise SettingError(f"{key} never changes ({CHANGES[key][1]})")
    return with_overrides(base, overrides, online_only=False)


def in_force(
    start: ServiceSettings, rolled: Mapping[str, Any], online: Mapping[str, Any]
) -> ServiceSettings:
    """The settings in force: `start`, the rolls' settings over it, the online changes over
    those (module docstring); SettingError when they do not check together."""
    return with_overrides(rolling_overrides(start, rolled), online)


def describe(
    start: ServiceSettings, rolled: Mapping[str, Any], online: Mapping[str, Any],
    keys: Any = (), roll: str = "rolling-restart",
) -> list[dict[str, Any]]:
    """`config get`: per key (every one when `keys` is empty) its value in force, its start
    value, what set it ("start", "online", or `roll`: the roll that did), how it changes and
    why. SettingError for an unknown key. Online changes that no longer check over the
    rolled settings are left out, as every actor leaves them out (`SettingsWatch`)."""
    wanted = list(keys) if keys else sorted(CHANGES)
    for key in wanted:
        check_key(key, online_only=False)
    try:
        now = in_force(start, rolled, online)
    except SettingError:
        online, now = {}, rolling_overrides(start, rolled)
    return [
        {"key": key, "value": value_of(now, key), "start": value_of(start, key),
         "set_by": "online" if key in online else roll if key in rolled else "start",
         "change": CHANGES[key][0], "why": CHANGES[key][1]}
        for key in wanted
    ]


def _typed(key: str, value: Any, default: Any) -> Any:
    """`value` if it has the type of the field's default (an int is a float); else SettingError."""
    if isinstance(default, bool) or isinstance(value, bool):
        ok = isinstance(default, bool) and isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float))
        value = float(value) if ok else value
    else:
        ok = type(value) is type(default)
    if not ok:
        raise SettingError(f"{key} must be a {type(default).__name__}, got {value!r}")
    return value


def with_overrides(
    base: ServiceSettings, overrides: Mapping[str, Any], online_only: bool = True
) -> ServiceSettings:
    """`base` with every `overrides` key set, checked as at start; SettingError with the reason.
    Online keys only, unless `online_only` is False (a rolling restart: `rolling_overrides`)."""
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {section: {} for section in SECTIONS}
    for key, value in overrides.items():
        check_key(key, online_only)
        section = section_of(key)
        holder = getattr(base, section) if section else base
        typed = _typed(key, value, getattr(holder, key))
        (nested[section] if section else top)[key] = typed
    for section, values in nested.items():
        if values:
            top[section] = _built(getattr(base, section), values)
    return _built(base, top) if top else base


def _built(holder: Any, values: dict[str, Any]) -> Any:
    try:
        return dataclasses.replace(holder, **values)
    except (TypeError, ValueError) as exc:
        raise SettingError(str(exc)) from exc
