"""The settings changed online, as the topic registry keeps them in service state (issue 48).

Each changed setting is one entry of kind `SETTING_KIND` in offsets partition
0's log (DESIGN section 10), written only by the topic registry (the single
service-state writer, `actors/client/topic_registry.py`): name the key, data
its value as JSON. So a change is replicated, fenced, and survives a leader
failover and a full restart; the service's start settings stay the base and
the entries override them (`actors.core.setting_keys.with_overrides`, which
checks every value as `ServiceSettings` does at start).

`set` refuses the whole request with the reason (SettingError) if any key is
unknown, not changeable online, or out of range together with the values in
force: nothing is written. The values in force are what `config get` shows
(`actors.core.setting_keys.in_force`): the start settings, the last rolling
restart's settings over them (`rolled`, which the registry reads from the
controller: `use_rolled`), the online changes over those. An entry that does
not check over them (a key a newer or older version classifies otherwise, a
value a later roll put out of range) is logged and left out, never fatal,
and kept: it is checked again whenever the rolled settings change.

Readers (every partition leader and the controller, `actors/core/settings_watch.py`) get the
overrides with `view(writer)` and a token: the registry's incarnation and its
count of setting changes, so an unchanged table costs one small answer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from actors.core.setting_keys import SettingError, describe, in_force
from actors.core.settings import ServiceSettings
from coordinator.service_state import ServiceEntry

logger = logging.getLogger(__name__)
SETTING_KIND = "setting"  # name: the key; data: its value as JSON
SettingsView = tuple[str, dict[str, Any]]  # token, every override


class SettingsTable:
    def __init__(self, base: ServiceSettings) -> None:
        self.base = base
        self.rolled: dict[str, Any] = {}  # the last rolling restart's settings (the controller's)
        self.stored: dict[str, Any] = {}  # every readable entry, in force or not
        self.overrides: dict[str, Any] = {}  # those in force
        self.changes = 0

    def load(self, entries: Iterable[tuple[str, bytes]]) -> None:
        self.stored = {}
        for name, data in entries:
            try:
                self.stored[name] = json.loads(data)
            except ValueError as exc:
                logger.warning("setting entry %s left out: %s", name, exc)
        self._select()

    def use_rolled(self, rolled: Mapping[str, Any]) -> None:
        """The rolled settings in force now (the controller's); the entries checked again over them."""
        if dict(rolled) != self.rolled:
            self.rolled = dict(rolled)
            self._select()

    def _select(self) -> None:
        self.overrides = {}
        for name, value in self.stored.items():
            try:
                in_force(self.base, self.rolled, {**self.overrides, name: value})
            except SettingError as exc:
                logger.warning("setting entry %s left out: %s", name, exc)
                continue
            self.overrides[name] = value
        self.changes += 1

    def settings(self) -> ServiceSettings:
        return in_force(self.base, self.rolled, self.overrides)

    def check_set(self, values: Any) -> list[ServiceEntry]:
        """The entries that make `values` ({key: value}) the ones in force; SettingError if refused."""
        if not isinstance(values, Mapping) or not values:
            raise SettingError("give at least one KEY=VALUE")
        in_force(self.base, self.rolled, {**self.overrides, **values})
        return [ServiceEntry(SETTING_KIND, key, json.dumps(value).encode()) for key, value in values.items()]

    def applied(self, values: Mapping[str, Any]) -> None:
        self.stored.update(values)
        self.overrides.update(values)
        self.changes += 1

    def describe(self, keys: Any) -> list[dict[str, Any]]:
        """Per key (every one when `keys` is empty): its start value and that in force, as of
        the rolled settings last read. `config get` asks the controller
        (`ControlPlane.describe_settings`); this answers the previous release's
        `TopicRegistry.config_get`."""
        return describe(self.base, self.rolled, self.overrides, keys)

    def view(self, writer: str) -> SettingsView:
        return f"{writer}:{self.changes}", dict(self.overrides)
