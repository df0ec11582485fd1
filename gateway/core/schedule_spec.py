"""When a job runs: parsed from what people and models write.

Accepted forms (case-insensitive; times in the given time zone):

- ``in 20 minutes`` / ``in 2 hours`` / ``in 1 day`` / ``in 90 seconds``
- ``at 9:00``, ``at 9pm``, ``today at 17:30``, ``tomorrow at 8:30`` (next occurrence)
- ``2026-11-23 09:00`` or any ISO 8601 date-time
- ``every 30 minutes``, ``every 2 hours``, ``every day at 9:00``, ``every weekday at 8:00``,
  ``every monday at 9:00``
- a 5-field cron expression: ``0 9 * * 1-5``

Cron expressions have standard (Vixie/Debian) cron semantics, computed by ``cronsim``:
0 and 7 are Sunday, ranges, steps and names work in every field, and when both the
day-of-month and the day-of-week are restricted a day matching *either* fires. A time that
a daylight-saving jump skips runs once right after the jump; one that repeats runs once, in
its first pass. A one-off time follows the same rules (:func:`wall_time`), except that one
asked for while the clocks repeat an hour is the next time the clock shows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

MIN_INTERVAL_SECONDS = 60

_IN = re.compile(r"^in\s+(\d+)\s*(s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?)$")
_EVERY = re.compile(r"^every\s+(\d+)?\s*(s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?)$")
_TIME = r"(\d{1,2})(?::(\d{2}))?\s*(am|pm)?"
_AT = re.compile(rf"^(?:(today|tomorrow)\s+)?(?:at\s+)?{_TIME}$")
_EVERY_AT = re.compile(
    rf"^every\s+(day|weekday|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\s+(?:at\s+)?{_TIME}$"
)
_DAYS = {
    "day": "*",
    "weekday": "mon-fri",
    "monday": "mon",
    "tuesday": "tue",
    "wednesday": "wed",
    "thursday": "thu",
    "friday": "fri",
    "saturday": "sat",
    "sunday": "sun",
}


class ScheduleError(ValueError):
    """The schedule text could not be understood; the message says what is accepted."""


def zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(
            f"unknown time zone {name!r} (use an IANA name like Europe/Berlin)"
        ) from exc


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    kind: Literal["once", "cron", "interval"]
    timezone: str
    at: datetime | None = None
    cron: str | None = None
    every_seconds: int | None = None
    start: datetime | None = None  # interval anchor

    @property
    def recurring(self) -> bool:
        return self.kind != "once"

    def next_after(self, previous: datetime | None, now: datetime) -> datetime | None:
        """The next run: the first one for a new job (``previous`` None), else the first after
        ``previous`` that is not in the past. Missed runs are skipped, never queued."""
        if self.kind == "once":
            assert self.at is not None
            return self.at if previous is None else None
        if self.kind == "interval":
            assert self.every_seconds is not None and self.start is not None
            if previous is None:
                return self.start
            return max(previous + timedelta(seconds=self.every_seconds), now)
        assert self.cron is not None
        return cron_next(self.cron, self.timezone, now if previous is None else max(previous, now))

    def describe(self) -> str:
        if self.kind == "once":
            assert self.at is not None
            return (
                f"once at {self.at.astimezone(zone(self.timezone)):%Y-%m-%d %H:%M} {self.timezone}"
            )
        if self.kind == "interval":
            assert self.every_seconds is not None
            return every(self.every_seconds)
        assert self.cron is not None
        return f"cron '{self.cron}': {explain(self.cron)} ({self.timezone})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "timezone": self.timezone,
            "at": self.at.isoformat() if self.at else None,
            "cron": self.cron,
            "every_seconds": self.every_seconds,
            "start": self.start.isoformat() if self.start else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScheduleSpec:
        return cls(
            kind=data["kind"],
            timezone=data["timezone"],
            at=datetime.fromisoformat(data["at"]) if data.get("at") else None,
            cron=data.get("cron"),
            every_seconds=data.get("every_seconds"),
            start=datetime.fromisoformat(data["start"]) if data.get("start") else None,
        )


def parse_schedule(text: str, *, now: datetime, timezone: str) -> ScheduleSpec:
    tz = zone(timezone)
    raw = " ".join(text.strip().lower().split())
    local_now = now.astimezone(tz)
    if match := _IN.match(raw):
        seconds = int(match.group(1)) * _unit(match.group(2))
        return ScheduleSpec("once", timezone, at=now + timedelta(seconds=seconds))
    if match := _EVERY.match(raw):
        seconds = int(match.group(1) or 1) * _unit(match.group(2))
        if seconds < MIN_INTERVAL_SECONDS:
            raise ScheduleError(f"the shortest interval is {MIN_INTERVAL_SECONDS} seconds")
        return ScheduleSpec(
            "interval", timezone, every_seconds=seconds, start=now + timedelta(seconds=seconds)
        )
    if match := _EVERY_AT.match(raw):
        hour, minute = _clock(match.group(2), match.group(3), match.group(4))
        return ScheduleSpec("cron", timezone, cron=f"{minute} {hour} * * {_DAYS[match.group(1)]}")
    if match := _AT.match(raw):
        hour, minute = _clock(match.group(2), match.group(3), match.group(4))
        day = local_now.date() + timedelta(days=1 if match.group(1) == "tomorrow" else 0)
        at = wall_time(datetime.combine(day, time(hour, minute)), tz)
        if at <= now and at.replace(fold=1) > now:  # the clocks went back: it comes again
            at = at.replace(fold=1)
        elif at <= now:
            if match.group(1) == "today":
                raise ScheduleError(f"{hour:02d}:{minute:02d} today has already passed")
            at = wall_time(datetime.combine(day + timedelta(days=1), time(hour, minute)), tz)
        return ScheduleSpec("once", timezone, at=at)
    if len(raw.split()) == 5 and not raw[0].isalpha():
        cron_next(raw, timezone, now)  # refuses what is not cron or never fires
        return ScheduleSpec("cron", timezone, cron=raw)
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ScheduleError(
            f"cannot understand schedule {text!r}; use e.g. 'in 20 minutes', 'at 9:00', "
            "'tomorrow at 8:30', '2026-12-01 09:00', 'every 2 hours', 'every weekday at 8:00' "
            "or a cron expression like '0 9 * * 1-5'"
        ) from None
    at = at if at.tzinfo else wall_time(at, tz)
    if at <= now:
        raise ScheduleError(f"{text!r} is in the past")
    return ScheduleSpec("once", timezone, at=at)


def wall_time(wall: datetime, tz: ZoneInfo) -> datetime:
    """A date and time on the clocks of ``tz`` as cron reads it: a time the clocks skip
    (02:30 the night they jump from 02:00 to 03:00) is the moment right after the jump,
    a time they repeat its first pass. (zoneinfo would give a skipped time the offset from
    before the jump: 02:30 CET, which is 03:30 CEST.)"""
    at = wall.replace(tzinfo=tz, fold=0)
    while at.astimezone(UTC).astimezone(tz).replace(tzinfo=None) != at.replace(tzinfo=None):
        wall += timedelta(minutes=1)  # as cronsim does
        at = wall.replace(tzinfo=tz, fold=0)
    return at


def _unit(word: str) -> int:
    base = word[:-1] if len(word) > 1 and word.endswith("s") else word
    for names, seconds in (
        (("s", "sec", "second"), 1),
        (("m", "min", "minute"), 60),
        (("h", "hr", "hour"), 3600),
        (("d", "day"), 86400),
    ):
        if base in names:
            return seconds
    raise ScheduleError(f"unknown time unit {word!r}")


def cron_next(expr: str, timezone: str, after: datetime) -> datetime:
    """The first time after ``after`` (strictly) that the cron expression fires, in ``timezone``.

    A wall time the clocks repeat fires once, in its first pass: asked from the second pass,
    cronsim answers with that first pass, which is before ``after`` and skipped here."""
    try:
        for fires in CronSim(expr, after.astimezone(zone(timezone))):
            if fires > after:
                return fires
    except CronSimError as exc:
        raise ScheduleError(f"invalid cron expression {expr!r}: {exc}") from exc
    raise ScheduleError(f"cron expression {expr!r} never fires")


def every(seconds: int) -> str:
    """A repeat in words, in the largest unit that divides it ("every 2 hours")."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"every {unit}" if count == 1 else f"every {count} {unit}s"
    return f"every {seconds} seconds"


def explain(expr: str) -> str:
    """The expression in words ("At 09:00 on Monday through Friday")."""
    try:
        return CronSim(expr, datetime.now().astimezone()).explain()
    except CronSimError:
        return "an invalid schedule"


def _clock(hour_text: str, minute_text: str | None, meridiem: str | None) -> tuple[int, int]:
    hour, minute = int(hour_text), int(minute_text or 0)
    if meridiem == "pm" and hour < 12:
        hour += 12
    if meridiem == "am" and hour == 12:
        hour = 0
    if not (0 <= hour < 24 and 0 <= minute < 60):
        raise ScheduleError(f"{hour_text}:{minute_text or '00'} is not a time of day")
    return hour, minute
