"""A calendar's events over a time range, as the ``calendar`` tool lists them and the
morning briefing and the heartbeat read them (:mod:`gateway.runtime.schedule.agenda`).

What events say comes from whoever sent the invitation: a listing is outside content,
always marked as data (:func:`agent.untrusted.wrap_untrusted`) by whoever shows it.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, tzinfo

from agent.calendar.caldav import CalDav, Calendar
from agent.calendar.events import Occurrence, as_moment, describe, occurrences
from gateway.core.schedule_spec import zone as zone_named

MAX_LISTED = 100
MAX_NOTES_CHARS = 300


async def agenda(
    client: CalDav, calendars: tuple[Calendar, ...], start: datetime, end: datetime
) -> list[Occurrence]:
    """Every occurrence between ``start`` and ``end`` in ``calendars``, soonest first."""
    stored = await asyncio.gather(
        *(client.events(c, start.timestamp(), end.timestamp()) for c in calendars)
    )
    found = [o for objects in stored for s in objects for o in occurrences(s, start, end)]
    zone = start.tzinfo or zone_named("UTC")
    return sorted(found, key=lambda o: (as_moment(o.start, zone), o.title))


def listed(occurrence: Occurrence, zone: tzinfo) -> str:
    """One event of a listing: when, what, its id; where, who and notes below."""
    line = f"- {describe(occurrence, zone)}  {occurrence.title}  [id {occurrence.uid}"
    line += f", calendar {occurrence.calendar}]"
    details = []
    if occurrence.location:
        details.append(f"where: {occurrence.location}")
    if occurrence.organizer:
        details.append(f"organiser: {occurrence.organizer}")
    if occurrence.attendees:
        details.append(f"invited: {', '.join(occurrence.attendees)}")
    if occurrence.recurring:
        details.append("repeats")
    if details:
        line += "\n  " + "; ".join(details)
    if occurrence.notes:
        notes = " ".join(occurrence.notes.split())
        if len(notes) > MAX_NOTES_CHARS:
            notes = notes[:MAX_NOTES_CHARS].rsplit(" ", 1)[0] + " …"
        line += f"\n  notes: {notes}"
    return line


def describe_moment(moment: datetime) -> str:
    return f"{moment:%a} {moment.day} {moment:%b %Y %H:%M}"


def listing(found: list[Occurrence], zone: tzinfo) -> str:
    """The events of :func:`agenda` one after the other, at most :data:`MAX_LISTED`."""
    lines = [listed(o, zone) for o in found[:MAX_LISTED]]
    if len(found) > MAX_LISTED:
        lines.append(f"(and {len(found) - MAX_LISTED} more: ask for a shorter range)")
    return "\n".join(lines)
