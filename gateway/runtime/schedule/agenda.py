"""The owner's calendar as scheduled turns read it: the events of a stretch of the day, in
the owner's own zone, ready to go into a prompt (the morning briefing, the heartbeat).

The owner is whoever last wrote in the home chat (:class:`gateway.store.HomeChat`); their
zone is the one :class:`gateway.runtime.people.zones.Zones` gives them, else the gateway's.
The events are outside content (anyone can send an invitation): they are marked as data
here, and the run that carries them is tainted.
"""

from __future__ import annotations

import logging
from datetime import datetime
from zoneinfo import ZoneInfo

from agent.calendar.agenda import agenda, listing
from agent.calendar.caldav import CalDav, CalendarError
from agent.untrusted import wrap_untrusted
from gateway.runtime.people.zones import Zones
from gateway.store import HomeChat

log = logging.getLogger(__name__)


class OwnersAgenda:
    def __init__(self, client: CalDav, zones: Zones) -> None:
        self._client = client
        self._zones = zones

    async def zone_of(self, home: HomeChat | None) -> ZoneInfo:
        return await self._zones.clock_zone(None if home is None else home.person)

    async def events(self, start: datetime, end: datetime) -> str | None:
        """The events between ``start`` and ``end`` (shown in ``start``'s zone), marked as
        outside content; ``None`` when there are none or the calendar cannot be read (a
        scheduled turn goes on without them; the log says why)."""
        try:
            account = await self._client.account()
            found = await agenda(self._client, account.calendars, start, end)
        except CalendarError as exc:
            log.warning("calendar: the day's events could not be read: %s", exc)
            return None
        if not found:
            return None
        assert start.tzinfo is not None
        return wrap_untrusted("calendar events", listing(found, start.tzinfo))
