"""The ``calendar`` tool: the owner's CalDAV calendar (``[calendar]``), listed and changed in
the words and the time zone of the person asking.

What an event says (its title, place, notes, who organises it) comes from whoever sent the
invitation, so every answer that quotes the server (a listing, the event changed, the
calendar's name) is outside content: it taints the turn, and its text is marked as data
(:func:`agent.untrusted.wrap_untrusted`). A change after such content needs an approver's
yes (agent.policy), whatever the user wrote. A change that reaches other people needs the
owner's approval (with ``tools.approvals = "ask"``; refused otherwise): inviting anyone, and
moving or deleting an event someone else organises or others are invited to (the server
tells them). Whether an event is someone else's is read from the server before the call
runs (:meth:`CalendarTool.approval_refusal`), and again as it runs.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from typing import Any

from agent.calendar.agenda import agenda, describe_moment, listing
from agent.calendar.caldav import (
    Account,
    CalDav,
    Calendar,
    CalendarChanged,
    CalendarError,
    Stored,
)
from agent.calendar.events import (
    BadTime,
    Change,
    Occurrence,
    When,
    as_moment,
    changed,
    day_bounds,
    default_end,
    describe,
    master,
    new_event,
    occurrence_of,
    parse_time,
    people,
)
from agent.tools.base import (
    Effect,
    Outside,
    Refusal,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    schema,
)
from agent.untrusted import wrap_untrusted
from gateway.core.clock import Clock, SystemClock
from gateway.core.principal import Role
from gateway.core.schedule_spec import zone as zone_named
from gateway.core.system.mail import parse_addresses

CALENDAR_INTENT = (
    "calendar",
    "event",
    "meeting",
    "appointment",
    "invite",
    "schedule",
    "reschedule",
    "book",
    "move",
    "cancel",
    "delete",
)
MAX_ATTENDEES = 20


@dataclass(frozen=True, slots=True)
class Found:
    """The event a call names, as the server holds it."""

    stored: Stored
    occurrence: Occurrence
    organizer: str
    attendees: tuple[str, ...]


class CalendarTool(Tool):
    name = "calendar"
    description = (
        "The owner's calendar, in the user's time zone (2026-05-04T15:00; a date alone: all "
        "day). action=list (start..end, default today), create (title, start, end?, location?, "
        "notes?, attendees?), update (id; a new start keeps the length), delete (id). "
        "`calendar` names one calendar."
    )
    parameters = schema(
        {
            "action": {"type": "string", "enum": ["list", "create", "update", "delete"]},
            "start": {"type": "string", "maxLength": 40},
            "end": {"type": "string", "maxLength": 40},
            "title": {"type": "string", "maxLength": 300},
            "location": {"type": "string", "maxLength": 500},
            "notes": {"type": "string", "maxLength": 4000},
            "calendar": {"type": "string", "maxLength": 200},
            "id": {"type": "string", "maxLength": 300},
            "attendees": {
                "type": "array",
                "items": {"type": "string"},
                "maxItems": MAX_ATTENDEES,
                "description": "Email addresses to invite (the owner approves)",
            },
        },
        ("action",),
    )
    effect = Effect.REMOTE
    targets = ("id", "title")
    read_actions = frozenset({"list"})
    intent = CALENDAR_INTENT
    does = "changes the owner's calendar"
    time_sensitive = True  # the calendar changes on other devices
    group_chats = False  # the owner's schedule is not a group's business

    def __init__(self, client: CalDav, *, default_zone: str = "UTC", clock: Clock | None = None):
        self._client = client
        self._default_zone = default_zone
        self._clock = clock or SystemClock()

    def read_from(self, args: dict[str, Any]) -> Outside:
        return Outside("calendar events, written by whoever sent the invitations")

    # -- approval ---------------------------------------------------------------------------

    async def approval_refusal(self, args: dict[str, Any], ctx: ToolContext) -> Refusal | None:
        try:
            _check(args)
            return await self._refusal(args, ctx)
        except (CalendarError, BadTime, ToolError, ValueError):
            return None  # run() says what is wrong

    async def _refusal(self, args: dict[str, Any], ctx: ToolContext) -> Refusal | None:
        """Why this call needs the owner's yes, or ``None``: when it reaches other people
        (after outside content, the policy asks an approver in any case)."""
        action = args["action"]
        if action == "list":
            return None
        reasons = []
        invited = _addresses(args.get("attendees"))
        if invited:
            reasons.append(f"it invites {', '.join(invited)} (the server sends them invitations)")
        if action in ("update", "delete"):
            account = await self._client.account()
            found = await self._find(args, account)
            if found.organizer and found.organizer not in account.addresses:
                reasons.append(f"{found.organizer} organises this event, not the owner")
            others = [a for a in found.attendees if a not in account.addresses]
            if others:
                reasons.append(f"the server tells {', '.join(others)} of the change")
        if reasons:
            return Refusal(
                f"this calendar change reaches other people: {'; '.join(reasons)}. Only the "
                "owner can allow it.",
                askable=True,
                authority=Role.OWNER,
            )
        return None

    # -- running ----------------------------------------------------------------------------

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        zone = zone_named(await self._zone_of(ctx))
        _check(args)
        try:
            if not ctx.approved:
                refusal = await self._refusal(args, ctx)
                if refusal is not None:
                    await ctx.audit("calendar-refused", reason=refusal.reason, turn=ctx.turn_id)
                    raise ToolError(refusal.reason)
            action = args["action"]
            if action == "list":
                return await self._list(args, zone)
            if action == "create":
                return await self._create(args, ctx, zone)
            if action == "update":
                return await self._update(args, zone)
            return await self._delete(args, zone)
        except BadTime as exc:
            raise ToolError(str(exc)) from None
        except CalendarError as exc:
            raise ToolError(f"calendar: {exc}") from None

    async def _zone_of(self, ctx: ToolContext) -> str:
        zones = ctx.services.zones
        return self._default_zone if zones is None else await zones.zone_of(ctx.principal.person)

    async def _list(self, args: dict[str, Any], zone: tzinfo) -> ToolResult:
        start, end = self._range(args, zone)
        account = await self._client.account()
        calendars = (
            (pick(account, args["calendar"]),) if args.get("calendar") else account.calendars
        )
        found = await agenda(self._client, calendars, start, end)
        span = f"{describe_moment(start)} to {describe_moment(end)} ({zone})"
        if not found:
            return ToolResult(f"No events from {span}.")
        body = f"Events from {span}:\n{listing(found, zone)}"
        return ToolResult(wrap_untrusted("calendar events", body), untrusted=True)

    def _range(self, args: dict[str, Any], zone: tzinfo) -> tuple[datetime, datetime]:
        """The range to list: from ``start`` (default: today) to ``end`` (a date: through
        that day; default: the end of the day the range starts on)."""
        today = self._clock.now().astimezone(zone).date()
        start = as_moment(parse_time(args["start"], zone) if args.get("start") else today, zone)
        end = day_bounds(start.date(), zone)[1]
        if args.get("end"):
            end_at = parse_time(args["end"], zone)
            end = (
                as_moment(end_at, zone)
                if isinstance(end_at, datetime)
                else day_bounds(end_at, zone)[1]
            )
        if end <= start:
            raise BadTime("the end of the range must come after its start")
        return start, end

    async def _create(self, args: dict[str, Any], ctx: ToolContext, zone: tzinfo) -> ToolResult:
        title = str(args["title"]).strip()
        start = parse_time(args["start"], zone)
        end = _end(args.get("end"), start, zone) or default_end(start)
        invited = _addresses(args.get("attendees"))
        account = await self._client.account()
        calendar = pick(account, str(args.get("calendar") or ""))
        organizer = next((a for a in sorted(account.addresses) if "@" in a), "")
        if invited and not organizer:
            raise ToolError(
                "cannot invite: the calendar server names no email address for this account "
                "(set calendar.username to the account's email address)"
            )
        # The same call (a turn resumed after a crash) makes the same event, never a second.
        uid = hashlib.sha256(ctx.idempotency_key.encode()).hexdigest()[:32] + "@switchboard"
        ical = new_event(
            uid=uid,
            title=title,
            start=start,
            end=end,
            location=str(args.get("location") or ""),
            notes=str(args.get("notes") or ""),
            attendees=invited,
            organizer=organizer,
            now=self._clock.now(),
        )
        try:
            await self._client.create(calendar, uid, ical)
        except CalendarChanged:
            return ToolResult(f"That event was already created (id {uid}).")
        event = Occurrence(
            uid, title, start, end, "", "", organizer, tuple(invited), False, calendar.name
        )
        said = (
            f"Created {title!r}, {describe(event, zone)}, in calendar {calendar.name!r} (id {uid})."
        )
        if invited:
            said += f" Invitations go to {', '.join(invited)}."
        # The calendar's name is the server's (a shared calendar's is someone else's words).
        return ToolResult(wrap_untrusted("calendar event", said), untrusted=True)

    async def _update(self, args: dict[str, Any], zone: tzinfo) -> ToolResult:
        start = parse_time(args["start"], zone) if args.get("start") else None
        change = Change(
            title=_text(args, "title"),
            start=start,
            end=_end(args.get("end"), start, zone),
            location=_text(args, "location"),
            notes=_text(args, "notes"),
            attendees=tuple(_addresses(args.get("attendees"))),
        )
        account = await self._client.account()
        found = await self._find(args, account)
        ical = changed(found.stored, found.occurrence.uid, change, now=self._clock.now())
        try:
            await self._client.replace(found.stored, ical)
        except CalendarChanged as exc:
            raise ToolError(f"not changed: {exc}; list the events again and retry") from None
        after = _after(found.stored, ical, found.occurrence.uid)
        series = " (every occurrence of the series)" if found.occurrence.recurring else ""
        said = f"Updated {after.title!r}{series}: now {describe(after, zone)}."
        if change.attendees:
            said += f" Invitations go to {', '.join(change.attendees)}."
        return ToolResult(wrap_untrusted("calendar event", said), untrusted=True)

    async def _delete(self, args: dict[str, Any], zone: tzinfo) -> ToolResult:
        account = await self._client.account()
        found = await self._find(args, account)
        try:
            await self._client.delete(found.stored)
        except CalendarChanged as exc:
            raise ToolError(f"not deleted: {exc}; list the events again") from None
        event = found.occurrence
        series = " (the whole series)" if event.recurring else ""
        said = f"Deleted {event.title!r}{series}, {describe(event, zone)}."
        return ToolResult(wrap_untrusted("calendar event", said), untrusted=True)

    # -- finding ----------------------------------------------------------------------------

    async def _find(self, args: dict[str, Any], account: Account) -> Found:
        uid = str(args["id"]).strip()
        calendars = (
            (pick(account, args["calendar"]),) if args.get("calendar") else account.calendars
        )
        for stored in await asyncio.gather(*(self._client.find(c, uid) for c in calendars)):
            event = None if stored is None else master(stored, uid)
            if stored is not None and event is not None:
                organizer, attendees = people(event)
                occurrence = occurrence_of(event, stored.calendar.name)
                return Found(stored, occurrence, organizer, attendees)
        raise ToolError(f"no event with id {uid!r}; list the events to find its id")


def _check(args: dict[str, Any]) -> None:
    """What each action needs, said before anything is asked of the server."""
    action = args["action"]
    if action == "create" and not (str(args.get("title") or "").strip() and args.get("start")):
        raise ToolError("create needs title and start")
    if action in ("update", "delete") and not str(args.get("id") or "").strip():
        raise ToolError(f"{action} needs id (list the events to find it)")
    changes = ("start", "end", "title", "location", "notes", "attendees")
    if action == "update" and all(args.get(key) is None for key in changes):
        raise ToolError(f"update needs something to change: {', '.join(changes)}")


def pick(account: Account, name: str) -> Calendar:
    """The calendar called ``name`` (its display name or the last part of its address), or
    the first one when no name is given."""
    if not name.strip():
        return account.calendars[0]
    wanted = name.strip().lower()
    for calendar in account.calendars:
        segment = calendar.url.rstrip("/").rsplit("/", 1)[-1].lower()
        if wanted in (calendar.name.lower(), segment):
            return calendar
    names = ", ".join(repr(c.name) for c in account.calendars)
    raise ToolError(f"no calendar called {name!r}; the calendars are {names}")


def _end(text: str | None, start: When | None, zone: tzinfo) -> When | None:
    """The end ``text`` names; a whole-day event ends on the day it names (inclusive)."""
    if not text:
        return None
    end = parse_time(text, zone)
    if not isinstance(end, datetime) and not isinstance(start, datetime):
        return end + timedelta(days=1)
    return end


def _text(args: dict[str, Any], key: str) -> str | None:
    value = args.get(key)
    return None if value is None else str(value).strip()


def _addresses(values: Any) -> list[str]:
    if not values:
        return []
    try:
        return parse_addresses(values)
    except ValueError as exc:
        raise ToolError(
            f"attendees: {exc}; give plain addresses such as dana@example.org"
        ) from None


def _after(stored: Stored, ical: str, uid: str) -> Occurrence:
    event = master(Stored(stored.calendar, stored.url, None, ical), uid)
    assert event is not None  # changed() wrote it
    return occurrence_of(event, stored.calendar.name)
