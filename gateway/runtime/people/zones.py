"""Whose time is whose: each person's time zone and quiet hours.

A person's zone is, first to last: ``[people."<channel>:<id>"].timezone`` in config, the
zone they set by asking (the ``timezone`` tool, stored after they confirmed it), the
gateway's ``user.timezone``. It sets the clock of their turns (the "[HH:MM]" on their
messages, "Today" in the prompt), the default zone of the jobs they schedule, and when their
quiet hours are. A zone put to a person for confirmation is kept (key-value store) for
:data:`PROPOSAL_SECONDS`; only a later turn of theirs, their answer, can confirm it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from gateway.config.people import PersonSettings
from gateway.core.clock import Clock
from gateway.core.schedule_spec import zone
from gateway.store import KeyValue, People

PROPOSAL_SECONDS = 3_600


class Zones:
    """The gateway's :class:`gateway.core.services.TimeZoneService`."""

    def __init__(
        self,
        kv: KeyValue,
        asked: People,
        *,
        people: Mapping[str, PersonSettings],
        default: str,
        clock: Clock,
    ) -> None:
        self._kv = kv
        self._stored = asked  # zones people set by asking
        self._people = people
        self.default = default
        self._clock = clock
        self._asked: dict[str, str | None] = {}  # zones set by asking, as read from the store
        self.heard = asyncio.Event()  # another node stored someone's zone (tests wait on it)

    def fixed_zone(self, person: str) -> str | None:
        configured = self._people.get(person)
        return None if configured is None else configured.timezone

    async def zone_of(self, person: str) -> str:
        fixed = self.fixed_zone(person)
        if fixed is not None:
            return fixed
        if person not in self._asked:
            self._asked[person] = await self._stored.zone(person)
        return self._asked[person] or self.default

    def forget(self, person: str) -> None:
        """Another node stored ``person``'s zone: read it again when next needed (``""``:
        every person's, after a lost connection to the other nodes)."""
        if person:
            self._asked.pop(person, None)
            self.heard.set()
        else:
            self._asked.clear()

    async def clock_zone(self, person: str | None) -> ZoneInfo:
        """``person``'s zone as their turns' clock reads it (``None``: the gateway's)."""
        return zone(self.default if person is None else await self.zone_of(person))

    def quiet_hours(self, person: str) -> str:
        configured = self._people.get(person)
        return "" if configured is None else configured.quiet_hours

    async def quiet_until(self, person: str, now: datetime) -> datetime | None:
        """When ``person``'s quiet hours end, if ``now`` is inside them (else ``None``)."""
        spec = self.quiet_hours(person)
        if not spec:
            return None
        local = now.astimezone(await self.clock_zone(person))
        return quiet_end(spec, local)

    async def propose_zone(self, person: str, zone_name: str, turn_id: str) -> None:
        zone(zone_name)  # refuses what is not a zone
        proposal = {"zone": zone_name, "turn": turn_id, "at": self._clock.now().timestamp()}
        await self._kv.set(f"zone-proposal:{person}", proposal)

    async def confirm_zone(self, person: str, zone_name: str, turn_id: str) -> bool:
        key = f"zone-proposal:{person}"
        proposal = await self._kv.get(key)
        if not isinstance(proposal, dict):
            return False
        fresh = self._clock.now().timestamp() - float(proposal.get("at", 0)) <= PROPOSAL_SECONDS
        if proposal.get("zone") != zone_name or proposal.get("turn") == turn_id or not fresh:
            return False
        await self._stored.set_zone(person, zone_name)
        await self._kv.set(key, None)
        self._asked[person] = zone_name
        return True


def quiet_end(spec: str, local: datetime) -> datetime | None:
    """The end of the quiet hours ``spec`` ("22:00-07:00") that ``local`` is in, or ``None``
    when it is not in them."""
    start_text, end_text = spec.split("-")
    start, end = time.fromisoformat(start_text.zfill(5)), time.fromisoformat(end_text.zfill(5))
    now = local.time().replace(tzinfo=None)
    inside = start <= now < end if start <= end else (now >= start or now < end)
    if not inside:
        return None
    ends = datetime.combine(local.date(), end, tzinfo=local.tzinfo)
    return ends if ends > local else ends + timedelta(days=1)
