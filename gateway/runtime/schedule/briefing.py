"""The morning briefing (``calendar.briefing = "07:30"``, opt-in): each day at that time in
the owner's zone, the day's events go to the owner's chat (where the heartbeat reports), in
a few words the agent writes.

The events are read before any model call: a day without any sends nothing and costs
nothing. They are outside content, so the briefing's turn is tainted and nothing in an
invitation can make it act (its side effects would need the owner's own words, and a
scheduled turn has none). A briefing missed while the gateway was down is not sent late.

The owner's zone is looked at again at least every :data:`REPLAN` (they may have set a new
one, or written for the first time), so the briefing follows their clock. The day it went
out (on the owner's clock) is kept in the store: a zone moved west after it does not bring
a second one that day.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from agent.calendar.events import day_bounds
from gateway.config.integrations import CalendarSettings
from gateway.core.principal import Principal, Role
from gateway.core.turns import TurnKind
from gateway.runtime.schedule.agenda import OwnersAgenda
from gateway.runtime.schedule.heartbeat import OwnersChat, Skip
from gateway.runtime.schedule.runs import ScheduledRun
from gateway.store import KeyValue

SESSION = "briefing:main"
SENT_KEY = "briefing.day"  # kv: the owner's date (ISO) of the latest briefing
REPLAN = timedelta(hours=1)
GRACE = timedelta(minutes=10)  # a scheduler this late still sends the day's briefing
HISTORY_LIMIT = 2
PROMPT = """\
Morning briefing for {day}. The owner's calendar today (times in {zone}):

{events}

Write the owner a short briefing of their day: what is on and when, and anything to \
prepare or mind (overlaps, travel between places). No preamble."""


class Briefing:
    def __init__(
        self,
        settings: CalendarSettings,
        *,
        agenda: OwnersAgenda,
        chat: OwnersChat,
        kv: KeyValue,
    ) -> None:
        hours, minutes = settings.briefing.split(":")
        self.at = time(int(hours), int(minutes))
        self._agenda = agenda
        self._chat = chat  # where the briefing goes: where check-ins go
        self._kv = kv
        self.next_at: datetime | None = None  # the next briefing, as last planned

    async def wake_after(self, now: datetime) -> datetime:
        """When the scheduler looks again: the next briefing, or sooner to replan it."""
        self.next_at = await self.next_run(now)
        return min(self.next_at, now + REPLAN)

    async def due(self, now: datetime) -> bool:
        """Whether a briefing time (in the owner's zone as it is now) has just come, and
        the owner's today has had none yet."""
        today = now.astimezone(await self._zone()).date().isoformat()
        return await self.next_run(now - GRACE) <= now and await self._kv.get(SENT_KEY) != today

    async def next_run(self, now: datetime) -> datetime:
        """The first briefing time after ``now``, in the owner's zone."""
        zone = await self._zone()
        local = now.astimezone(zone)
        due = datetime.combine(local.date(), self.at, tzinfo=zone)
        return (
            due
            if due > local
            else datetime.combine(due.date() + timedelta(days=1), self.at, tzinfo=zone)
        )

    async def _zone(self) -> ZoneInfo:
        return await self._agenda.zone_of(await self._chat.get())

    async def plan(self, now: datetime) -> ScheduledRun | Skip:
        """Today's briefing, or why there is none; either way, today's is done."""
        home = await self._chat.get()
        zone = await self._agenda.zone_of(home)
        today = now.astimezone(zone).date()
        await self._kv.set(SENT_KEY, today.isoformat())
        if home is None:
            return Skip("no chat to deliver to yet (the owner has not written in a direct chat)")
        start, end = day_bounds(today, zone)
        events = await self._agenda.events(start, end)
        if events is None:
            return Skip("no events today")
        sender = home.person.split(":", 1)[1] if home.person else "briefing"
        principal = Principal(home.chat.channel, sender, "briefing", Role.OWNER, home.chat_type)
        return ScheduledRun(
            kind=TurnKind.CRON,
            session_key=SESSION,
            chat=home.chat,
            principal=principal,
            prompt=PROMPT.format(
                day=f"{today:%A} {today.day} {today:%B %Y}", zone=zone, events=events
            ),
            history_limit=HISTORY_LIMIT,
            tainted=True,  # the events are anyone's words: they authorise nothing
        )
