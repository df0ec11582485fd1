"""Events as the ``calendar`` tool reads and writes them: iCalendar parsed (a recurring
event expanded into the occurrences of a range) and written, and times in a person's zone.

A time without an offset ("2026-05-04T15:00") is in the person's own zone, and so are the
times shown; a date alone ("2026-05-04") is a whole day. Events are written with the
person's zone as their TZID (the server then keeps daylight saving right for repeats) and
a VTIMEZONE for it, made again whenever the times change (one made for a December day says
nothing of June's daylight saving, and clients that go by it would be an hour off).

A repeating event keeps its days: a new start changes the time of day (and a new end the
length) of every occurrence, the series' first date stays, and so do its exceptions (the
dates taken out of it and the occurrences changed alone, moved to the new time of day).
Which days a series repeats on is not changed here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

import recurring_ical_events
from icalendar import Calendar as ICalendar
from icalendar import Event, Timezone, vCalAddress
from icalendar.error import InvalidCalendar

from agent.calendar.caldav import Stored

log = logging.getLogger(__name__)

PRODID = "-//Switchboard//calendar//EN"
DEFAULT_LENGTH = timedelta(hours=1)
SERIES_ZONE_YEARS = 20  # a series' VTIMEZONE covers this long from its first date (or its end)

When = datetime | date


class BadTime(ValueError):
    """A time the tool cannot read; the message says what is expected."""


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One occurrence of an event, as the server has it."""

    uid: str
    title: str
    start: When
    end: When | None
    location: str
    notes: str
    organizer: str  # an address, "" when none is named
    attendees: tuple[str, ...]
    recurring: bool
    calendar: str

    @property
    def all_day(self) -> bool:
        return not isinstance(self.start, datetime)


@dataclass(frozen=True, slots=True)
class Change:
    """What an update sets (``None``: unchanged); ``attendees`` are added to those invited."""

    title: str | None = None
    start: When | None = None
    end: When | None = None
    location: str | None = None
    notes: str | None = None
    attendees: tuple[str, ...] = ()


# -- times -------------------------------------------------------------------------------


def parse_time(text: str, zone: tzinfo) -> When:
    """``text`` as a date (a whole day) or a time in ``zone`` (unless it names an offset)."""
    value = text.strip().replace(" ", "T", 1)
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        if "T" not in value:
            return date.fromisoformat(value)
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise BadTime(
            f"cannot read the time {text!r}: use 2026-05-04T15:00 (in the person's own time "
            "zone), or 2026-05-04 for the whole day"
        ) from None
    return moment.replace(tzinfo=zone) if moment.tzinfo is None else moment.astimezone(zone)


def skipped(value: When) -> datetime | None:
    """The time ``value`` really is when its clock time does not exist in its zone (the hour
    skipped when the clocks go forward), else ``None``. Read as RFC 5545 (3.3.5) reads such
    a time, with the offset before the gap: 02:30 on the night New York goes from 02:00 to
    03:00 is 03:30."""
    if not isinstance(value, datetime) or value.tzinfo is None:
        return None
    real = value.astimezone(UTC).astimezone(value.tzinfo)
    return None if real.replace(tzinfo=None) == value.replace(tzinfo=None) else real


def day_bounds(day: date, zone: tzinfo) -> tuple[datetime, datetime]:
    start = datetime.combine(day, datetime.min.time(), tzinfo=zone)
    return start, datetime.combine(day + timedelta(days=1), datetime.min.time(), tzinfo=zone)


def as_moment(value: When, zone: tzinfo) -> datetime:
    """A date as its midnight in ``zone``; a time without a zone (floating) as in ``zone``."""
    if not isinstance(value, datetime):
        return datetime.combine(value, datetime.min.time(), tzinfo=zone)
    return value.replace(tzinfo=zone) if value.tzinfo is None else value.astimezone(zone)


def describe(occurrence: Occurrence, zone: tzinfo) -> str:
    """When it happens, in ``zone``: "Mon 4 May 15:00–16:00", "Mon 4 May (all day)"."""
    start, end = occurrence.start, occurrence.end
    if occurrence.all_day:
        last = end - timedelta(days=1) if isinstance(end, date) and end > start else start
        days = _day(start) if last == start else f"{_day(start)} – {_day(last)}"
        return f"{days} (all day)"
    begin = as_moment(start, zone)
    if end is None:
        return f"{_day(begin)} {begin:%H:%M}"
    finish = as_moment(end, zone)
    if finish.date() == begin.date():
        return f"{_day(begin)} {begin:%H:%M}–{finish:%H:%M}"
    return f"{_day(begin)} {begin:%H:%M} – {_day(finish)} {finish:%H:%M}"


def _day(value: date) -> str:
    return f"{value:%a} {value.day} {value:%b %Y}"


# -- reading -----------------------------------------------------------------------------


def occurrences(stored: Stored, start: datetime, end: datetime) -> list[Occurrence]:
    """The occurrences of ``stored``'s events between ``start`` and ``end``."""
    calendar = _parse(stored)
    if calendar is None:
        return []
    try:
        found = recurring_ical_events.of(calendar, skip_bad_series=True).between(start, end)
    except (InvalidCalendar, ValueError) as exc:
        log.info("calendar: skipping %s: %s", stored.url, exc)
        return []
    series = {str(e.get("UID", "")) for e in _events(calendar) if _repeats(e)}
    return [_occurrence(event, stored.calendar.name, series) for event in found]


def master(stored: Stored, uid: str) -> Event | None:
    """The event ``uid`` itself (a series' rule, not one of its exceptions)."""
    calendar = _parse(stored)
    return None if calendar is None else _master_in(calendar, uid)


def _master_in(calendar: ICalendar, uid: str) -> Event | None:
    events = [e for e in _events(calendar) if str(e.get("UID", "")) == uid]
    plain = [e for e in events if e.get("RECURRENCE-ID") is None]
    return next(iter(plain or events), None)


def people(event: Event) -> tuple[str, tuple[str, ...]]:
    """(organizer, attendees) of ``event``, as plain lower-case addresses."""
    return _address(event.get("ORGANIZER")), tuple(
        a for a in (_address(x) for x in _many(event.get("ATTENDEE"))) if a
    )


def occurrence_of(event: Event, calendar: str) -> Occurrence:
    """``event`` itself as an occurrence (a series: its first)."""
    return _occurrence(event, calendar, {str(event.get("UID", ""))} if _repeats(event) else set())


def _repeats(event: Event) -> bool:
    return event.get("RRULE") is not None or event.get("RDATE") is not None


def _parse(stored: Stored) -> ICalendar | None:
    try:
        return ICalendar.from_ical(stored.ical)
    except (ValueError, InvalidCalendar) as exc:
        log.info("calendar: %s is not iCalendar: %s", stored.url, exc)
        return None


def _events(calendar: ICalendar) -> list[Event]:
    return [c for c in calendar.walk("VEVENT") if isinstance(c, Event)]


def _occurrence(event: Any, calendar: str, series: set[str]) -> Occurrence:
    organizer, attendees = people(event)
    uid = str(event.get("UID", ""))
    return Occurrence(
        uid=uid,
        title=str(event.get("SUMMARY", "")).strip() or "(no title)",
        start=event.decoded("DTSTART"),
        end=_end_of(event),
        location=str(event.get("LOCATION", "")).strip(),
        notes=str(event.get("DESCRIPTION", "")).strip(),
        organizer=organizer,
        attendees=attendees,
        recurring=uid in series,
        calendar=calendar,
    )


def _many(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _address(value: Any) -> str:
    return str(value or "").strip().lower().removeprefix("mailto:")


# -- writing -----------------------------------------------------------------------------


def new_event(
    *,
    uid: str,
    title: str,
    start: When,
    end: When | None,
    location: str = "",
    notes: str = "",
    attendees: Iterable[str] = (),
    organizer: str = "",
    now: datetime,
) -> str:
    """A VCALENDAR holding one new event (with its zone's VTIMEZONE)."""
    event = Event.new(uid=uid, summary=title, stamp=now, created=now, last_modified=now)
    _set_times(event, start, end or default_end(start))
    if location:
        event.add("LOCATION", location)
    if notes:
        event.add("DESCRIPTION", notes)
    invited = list(attendees)
    if invited and organizer:
        event.add("ORGANIZER", vCalAddress(f"mailto:{organizer}"))
    for address in invited:
        event.add("ATTENDEE", _attendee(address))
    return _calendar_of([event])


def changed(stored: Stored, uid: str, change: Change, *, now: datetime) -> str:
    """``stored`` with the event ``uid`` changed: moved (a new start keeps the length; a
    series keeps its days, see the module's words), renamed, its place, notes or guests
    changed; the rest of the object (exceptions of a series, alarms, other zones) kept."""
    calendar = _parse(stored)
    event = None if calendar is None else _master_in(calendar, uid)
    if calendar is None or event is None:
        raise ValueError(f"the event {uid} is not in {stored.url}")
    if change.start is not None or change.end is not None:
        start: When
        end: When
        if _repeats(event):
            start, end = _series_times(event, change)
            _keep_exceptions(calendar, event, start)
        else:
            start = change.start if change.start is not None else event.decoded("DTSTART")
            end = change.end or _moved_end(event, start)
        _set_times(event, start, end)
        _drop_zones(calendar, event)  # made again below, for the new dates
    for key, value in (
        ("SUMMARY", change.title),
        ("LOCATION", change.location),
        ("DESCRIPTION", change.notes),
    ):
        if value is not None:
            event.pop(key, None)
            if value:
                event.add(key, value)
    _, invited = people(event)
    for address in change.attendees:
        if address.lower() not in invited:
            event.add("ATTENDEE", _attendee(address))
    sequence = int(event.get("SEQUENCE", 0) or 0)
    event.pop("SEQUENCE", None)
    event.add("SEQUENCE", sequence + 1)
    for key in ("DTSTAMP", "LAST-MODIFIED"):
        event.pop(key, None)
        event.add(key, now)
    _add_zones(calendar, event)
    return _text(calendar)


def _series_times(event: Event, change: Change) -> tuple[datetime, datetime]:
    """A series' new first start and end: on its own first day, at the time of day
    ``change`` gives (its date is not used), as long as it gives (else as long as it was)."""
    first = event.decoded("DTSTART")
    given = [t for t in (change.start, change.end) if t is not None]
    moments = [t for t in given if isinstance(t, datetime)]
    if not isinstance(first, datetime) or len(moments) != len(given):
        raise BadTime(
            "a repeating event keeps its days: only the time of day of a timed series can "
            "change here (give a time such as 2026-05-04T10:00; its date is not used)"
        )
    zone = moments[0].tzinfo or UTC
    begin = as_moment(first, zone)
    old_end = _end_of(event)
    length = DEFAULT_LENGTH if old_end is None else as_moment(old_end, zone) - begin
    if change.start is not None:
        assert isinstance(change.start, datetime)
        begin = datetime.combine(begin.date(), change.start.time(), tzinfo=zone)
        if change.end is not None:
            length = change.end - change.start
    elif change.end is not None:  # the end of its first occurrence, at that time of day
        assert isinstance(change.end, datetime)
        length = datetime.combine(begin.date(), change.end.time(), tzinfo=zone) - begin
    return begin, begin + length


def _keep_exceptions(calendar: ICalendar, event: Event, start: datetime) -> None:
    """A series moved to ``start``'s time of day: the dates taken out of it (EXDATE), added
    to it (RDATE) and the occurrences changed alone (RECURRENCE-ID) name the occurrences at
    the new time, so none comes back or goes; an UNTIL keeps its last occurrence."""
    zone = start.tzinfo or UTC

    def moved(value: Any) -> Any:
        if not isinstance(value, datetime):
            return value  # a day stays that day
        return datetime.combine(as_moment(value, zone).date(), start.time(), tzinfo=zone)

    for key in ("EXDATE", "RDATE"):
        lists = _many(event.get(key))
        if not lists:
            continue
        event.pop(key)
        for dates in lists:
            event.add(key, [moved(d.dt) for d in dates.dts])
    uid = str(event.get("UID", ""))
    for other in _events(calendar):
        if other is not event and str(other.get("UID", "")) == uid and "RECURRENCE-ID" in other:
            occurrence = moved(other.decoded("RECURRENCE-ID"))
            other.pop("RECURRENCE-ID")
            other.add("RECURRENCE-ID", occurrence)
    rule = event.get("RRULE")
    until = _many(rule.get("UNTIL")) if rule is not None else []
    if until and isinstance(until[0], datetime) and until[0].tzinfo is not None:
        rule["UNTIL"] = [max(until[0], moved(until[0])).astimezone(UTC)]


def default_end(start: When) -> When:
    return start + DEFAULT_LENGTH if isinstance(start, datetime) else start + timedelta(days=1)


def _end_of(event: Event) -> When | None:
    end = event.decoded("DTEND", None)
    if end is None and event.get("DURATION") is not None:
        end = event.decoded("DTSTART") + event.decoded("DURATION")
    return end  # type: ignore[no-any-return]


def _moved_end(event: Event, start: When) -> When:
    """Where an event moved to ``start`` ends: as long as it was (a day stays a day)."""
    old_start, old_end = event.decoded("DTSTART"), _end_of(event)
    if old_end is None or isinstance(old_start, datetime) != isinstance(start, datetime):
        return default_end(start)
    return start + (old_end - old_start)  # type: ignore[no-any-return]


def _set_times(event: Event, start: When, end: When) -> None:
    if isinstance(start, datetime) != isinstance(end, datetime):
        raise BadTime("start and end must both be dates (a whole day) or both times")
    if end <= start:
        raise BadTime("the end must come after the start")
    for key in ("DTSTART", "DTEND", "DURATION"):
        event.pop(key, None)
    event.add("DTSTART", start)
    event.add("DTEND", end)


def _attendee(address: str) -> vCalAddress:
    attendee = vCalAddress(f"mailto:{address}")
    attendee.params["ROLE"] = "REQ-PARTICIPANT"
    attendee.params["PARTSTAT"] = "NEEDS-ACTION"
    attendee.params["RSVP"] = "TRUE"
    return attendee


def _calendar_of(events: list[Event]) -> str:
    calendar = ICalendar.new(prodid=PRODID, subcomponents=events)
    _add_zones(calendar, events[0])
    return _text(calendar)


def _text(calendar: ICalendar) -> str:
    return bytes(calendar.to_ical()).decode()


def _add_zones(calendar: ICalendar, event: Event) -> None:
    """A VTIMEZONE for each zone the object names and lacks, covering ``event``'s days (a
    series: until its UNTIL, else :data:`SERIES_ZONE_YEARS`): short, and what a client
    needs to place every occurrence."""
    start, end = event.decoded("DTSTART"), _end_of(event) or event.decoded("DTSTART")
    first = start.date() if isinstance(start, datetime) else start
    last = end.date() if isinstance(end, datetime) else end
    if _repeats(event):
        rule = event.get("RRULE")
        until = _many(rule.get("UNTIL")) if rule is not None else []
        if until and event.get("RDATE") is None:
            ends = until[0]
            last = max(last, ends.date() if isinstance(ends, datetime) else ends)
        else:
            last = max(last, first + timedelta(days=366 * SERIES_ZONE_YEARS))
    calendar.add_missing_timezones(first_date=first, last_date=last + timedelta(days=1))


def _drop_zones(calendar: ICalendar, event: Event) -> None:
    """The VTIMEZONEs of the zones ``event``'s times name, taken out to be made again: one
    made for other dates (another season) would place the event an hour off."""
    named = {
        str(event[key].params.get("TZID", ""))
        for key in ("DTSTART", "DTEND")
        if key in event and event[key].params.get("TZID")
    }
    calendar.subcomponents = [
        c
        for c in calendar.subcomponents
        if not (isinstance(c, Timezone) and str(c.get("TZID", "")) in named)
    ]
