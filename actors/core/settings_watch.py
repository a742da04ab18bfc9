"""The settings an actor runs with: its start settings plus those changed online.

`raygroups config set` (issue 48) stores a change in the topic registry
(`actors/client/settings_table.py`). Two kinds of reader hold a
`SettingsWatch` and ask `settings_if_changed(token)`:
- each partition leader, in its topics loop (`actors.partition.serving`),
  when the registry nudges it and every `topics_refresh_interval_s`, through
  the registry handle the topics watch holds; it applies a newer set to the
  host's `settings` (read at each use by the loops and the next load), the
  shard's `config` (read by the handlers at each use) and the listeners the
  actor registers (the mailboxes' TTL). A new actor reads them at its first
  round, right after its load.
- the controller, every `SETTINGS_POLL_S` (`actors.controller.plane`): its
  probe, standby, reaper and move settings, read at each use.
Only online keys ever reach here (`actors.core.setting_keys`).

Rules: a registry that does not answer keeps the settings in force (tried
again at the next round); a set that no longer checks against this actor's
start settings is logged and skipped, never applied in part.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from actors.core.setting_keys import SettingError, with_overrides
from actors.core.settings import ServiceSettings

logger = logging.getLogger(__name__)
CALL_TIMEOUT_S = 5.0


class SettingsWatch:
    def __init__(self, base: ServiceSettings) -> None:
        self.base = base  # the settings this actor was created with
        self.token: str | None = None
        self.overrides: dict[str, Any] = {}

    async def poll(self, registry: Any) -> ServiceSettings | None:
        """The settings in force when the registry answered a newer set, else None."""
        if registry is None:  # the topics watch found no registry this round
            return None
        try:
            answer = await asyncio.wait_for(registry.settings_if_changed.remote(self.token), CALL_TIMEOUT_S)
        except Exception as exc:  # down or restarting: the topics watch logs it; try next round
            logger.debug("settings not read from the topic registry: %r", exc)
            return None
        if answer is None:
            return None
        token, overrides = answer
        self.token = token
        try:
            settings = with_overrides(self.base, overrides)
        except SettingError as exc:
            logger.warning("settings changed online not applied: %s", exc)
            return None
        self.overrides = dict(overrides)
        return settings
