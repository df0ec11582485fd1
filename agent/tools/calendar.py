"""The ``calendar`` tool: the owner's CalDAV calendar (``[calendar]``), listed and changed in
the words and the time zone of the person asking.

What an event says (its title, place, notes, who organises it) comes from whoever sent the
invitation, so an answer that brings such words in is outside content: it taints the turn,
and its text is marked as data (:func:`agent.untrusted.wrap_untrusted`). That is a listing,
and the event an update or a delete read back when someone else organises it. What the
assistant itself wrote from the person's words (the event just created, the owner's own
event changed) is not: "add A and B" runs without an approval for B. A change after outside
content needs an approver's yes (agent.policy), whatever the user wrote.

A change that concerns other people needs the owner's approval (with ``tools.approvals =
"ask"``; refused otherwise): inviting anyone, and moving or deleting an event someone else
organises or others are invited to. Whether an event is someone else's is read from the
server before the call runs (:meth:`CalendarTool.approval_refusal`), and again as it runs;
the approvers see the event's title and time (:meth:`CalendarTool.reach`). Whether anyone
is told is the server's doing: one that schedules (RFC 6638) sends invitations and
changes; one that does not (Radicale) only stores the attendee, and the tool says so,
never that an invitation went out. A call that cannot run (a time it cannot read, an event
that is not there) is refused before anyone is asked.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
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
    skipped,
)
from agent.tools.base import (
    Effect,
    Outside,
    Reach,
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
    others: bool  # someone else organises it: its words are theirs (outside content)


@dataclass(frozen=True, slots=True)
class Planned:
    """An update worked out before it is written: the event as it will be, and what to
    say about how the call's words were taken."""

    found: Found
    ical: str
    after: Occurrence
    notes: tuple[str, ...]


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
        if args.get("action") == "list":
            return Outside("calendar events, written by whoever sent the invitations")
        return Outside("a calendar event someone else organises")

    # -- approval ---------------------------------------------------------------------------

    async def refused_anyway(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        """What makes this call fail whatever an approver decided (a time it cannot read, a
        calendar or an event that is not there), said before anyone is asked."""
        try:
            _check(args)
            if args["action"] != "list":
                account = await self._client.account()
                if args.get("calendar"):
                    pick(account, str(args["calendar"]))
                if args["action"] in ("update", "delete"):
                    await self._find(args, account)
        except (BadTime, ToolError) as exc:
            return str(exc)
        except CalendarError:
            return None  # the server may answer by then; run() says what is wrong
        return None

    async def approval_refusal(self, args: dict[str, Any], ctx: ToolContext) -> Refusal | None:
        try:
            _check(args)
            return await self._refusal(args, ctx)
        except (CalendarError, BadTime, ToolError, ValueError):
            return None  # refused_anyway() or run() says what is wrong

    async def _refusal(self, args: dict[str, Any], ctx: ToolContext) -> Refusal | None:
        """Why this call needs the owner's yes, or ``None``: when it concerns other people
        (after outside content, the policy asks an approver in any case)."""
        action = args["action"]
        if action == "list":
            return None
        account = await self._client.account()
        reasons = []
        invited = _addresses(args.get("attendees"))
        if invited:
            reasons.append(_inviting(invited, account))
        if action in ("update", "delete"):
            found = await self._find(args, account)
            if found.others:
                reasons.append(f"{found.organizer} organises this event, not the owner")
            others = [a for a in found.attendees if a not in account.addresses]
            if others and account.schedules:
                reasons.append(f"the calendar server tells {', '.join(others)} of the change")
            elif others:
                reasons.append(
                    f"{', '.join(others)} {'is' if len(others) == 1 else 'are'} invited to it "
                    "(the calendar server sends no notices, so nobody is told)"
                )
        if reasons:
            reach = "reaches" if account.schedules else "concerns"
            return Refusal(
                f"this calendar change {reach} other people: {'; '.join(reasons)}. Only the "
                "owner can allow it.",
                askable=True,
                authority=Role.OWNER,
            )
        return None

    async def reach(self, args: dict[str, Any], ctx: ToolContext) -> Reach:
        """The event as the approvers should judge it: its title and time, in the person's
        zone (and, for an update, what it becomes), read from the server before asking."""
        try:
            _check(args)
            zone = zone_named(await self._zone_of(ctx))
            if args["action"] == "create":
                start, end, notes = _new_times(args, zone)
                event = Occurrence("", "", start, end, "", "", "", (), False, "")
                return Reach("\n".join([f"when: {describe(event, zone)} ({zone})", *notes]))
            if args["action"] == "list":
                return Reach()
            account = await self._client.account()
            if args["action"] == "delete":
                return Reach(_shown(await self._find(args, account), zone))
            planned = await self._plan(args, account, zone)
            became = f"after the change: {describe(planned.after, zone)}"
            return Reach("\n".join([_shown(planned.found, zone), became, *planned.notes]))
        except (CalendarError, BadTime, ToolError, ValueError) as exc:
            return Reach(f"event: not read ({exc})")

    # -- running ----------------------------------------------------------------------------

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        zone = zone_named(await self._zone_of(ctx))
        try:
            _check(args)
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
        start, end, notes = _new_times(args, zone)
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
        event = Occurrence(uid, title, start, end, "", "", organizer, tuple(invited), False, "")
        # Only the call's own words: a calendar's name is the server's (a shared calendar's is
        # someone else's), and would make this confirmation outside content.
        where = (
            f"calendar {str(args['calendar']).strip()!r}"
            if args.get("calendar")
            else "the first calendar"
            if len(account.calendars) > 1
            else "the calendar"
        )
        said = [f"Created {title!r}, {describe(event, zone)}, in {where} (id {uid}).", *notes]
        if invited:
            said.append(_invited(invited, account))
        return ToolResult(" ".join(said))

    async def _update(self, args: dict[str, Any], zone: tzinfo) -> ToolResult:
        account = await self._client.account()
        planned = await self._plan(args, account, zone)
        found, after = planned.found, planned.after
        try:
            await self._client.replace(found.stored, planned.ical)
        except CalendarChanged as exc:
            raise ToolError(f"not changed: {exc}; list the events again and retry") from None
        if after.recurring:
            begin = as_moment(after.start, zone)
            until = "" if after.end is None else f"–{as_moment(after.end, zone):%H:%M}"
            said = [
                f"Updated {after.title!r} (every occurrence of the series): now "
                f"{begin:%H:%M}{until}, from {describe_moment(begin).rsplit(' ', 1)[0]} on."
            ]
        else:
            said = [f"Updated {after.title!r}: now {describe(after, zone)}."]
        said += planned.notes
        invited = _addresses(args.get("attendees"))
        if invited:
            said.append(_invited(invited, account))
        return _answer(" ".join(said), found)

    async def _plan(self, args: dict[str, Any], account: Account, zone: tzinfo) -> Planned:
        """The update ``args`` ask for, worked out on the event as the server has it."""
        found = await self._find(args, account)
        series = found.occurrence.recurring
        start = parse_time(args["start"], zone) if args.get("start") else None
        notes: list[str] = []
        if start is not None and not series:  # a series' first day is not the day given
            start, said = _real(start, "start")
            notes += said
        end = _end(args.get("end"), start, zone)
        if end is not None and not series:
            end, said = _real(end, "end")
            notes += said
        change = Change(
            title=_text(args, "title"),
            start=start,
            end=end,
            location=_text(args, "location"),
            notes=_text(args, "notes"),
            attendees=tuple(_addresses(args.get("attendees"))),
        )
        ical = changed(found.stored, found.occurrence.uid, change, now=self._clock.now())
        after = _after(found.stored, ical, found.occurrence.uid)
        if (
            series
            and isinstance(start, datetime)
            and as_moment(after.start, zone).date() != (start.date())
        ):
            notes.append(
                "A repeating event keeps its days here: only its time of day changed (the "
                f"date given, {describe_moment(start).rsplit(' ', 1)[0]}, was not used; which "
                "days it repeats on can be changed in a calendar app)."
            )
        return Planned(found, ical, after, tuple(notes))

    async def _delete(self, args: dict[str, Any], zone: tzinfo) -> ToolResult:
        account = await self._client.account()
        found = await self._find(args, account)
        try:
            await self._client.delete(found.stored)
        except CalendarChanged as exc:
            raise ToolError(f"not deleted: {exc}; list the events again") from None
        event = found.occurrence
        series = " (the whole series)" if event.recurring else ""
        return _answer(f"Deleted {event.title!r}{series}, {describe(event, zone)}.", found)

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
                others = bool(organizer) and organizer not in account.addresses
                return Found(stored, occurrence, organizer, attendees, others)
        raise ToolError(f"no event with id {uid!r}; list the events to find its id")


def _answer(said: str, found: Found) -> ToolResult:
    """What an update or a delete says: the event's words are someone else's (outside
    content) when someone else organises it; the owner's own event is the owner's."""
    if found.others:
        return ToolResult(wrap_untrusted("calendar event", said), untrusted=True)
    return ToolResult(said)


def _shown(found: Found, zone: tzinfo) -> str:
    """The event as approvers see it (in the verbatim block: its title is anyone's)."""
    event = found.occurrence
    line = f"event: {event.title!r}, {describe(event, zone)} ({zone})"
    if event.recurring:
        line += ", repeating: every occurrence"
    return line


def _inviting(invited: list[str], account: Account) -> str:
    """What an invitation does, for the approvers: what the server does, nothing more."""
    if account.schedules:
        return f"it invites {', '.join(invited)} (your calendar server sends them invitations)"
    return (
        f"it names {', '.join(invited)} as invited (your calendar server sends no "
        "invitations, so nobody is told)"
    )


def _invited(invited: list[str], account: Account) -> str:
    """What the model is told of the attendees it added: only what happened."""
    names = ", ".join(invited)
    if account.schedules:
        return f"Invitations to {names} are sent by the calendar server."
    return (
        f"{names} {'is' if len(invited) == 1 else 'are'} recorded on the event as invited, but "
        "no invitation was sent: this calendar server does not send invitations. If the user "
        "wants them told, send_email can write to them (ask the user first)."
    )


def _new_times(args: dict[str, Any], zone: tzinfo) -> tuple[When, When, list[str]]:
    """A new event's start and end as they will be written, and what to say of times that
    do not exist in ``zone`` (the hour skipped when the clocks go forward)."""
    start, notes = _real(parse_time(args["start"], zone), "start")
    end = _end(args.get("end"), start, zone)
    if end is None:
        return start, default_end(start), notes
    end, said = _real(end, "end")
    if isinstance(start, datetime) != isinstance(end, datetime):
        raise BadTime("start and end must both be dates (a whole day) or both times")
    if end <= start:
        raise BadTime("the end must come after the start")
    return start, end, notes + said


def _real(value: When, which: str) -> tuple[When, list[str]]:
    """``value``, moved past the gap when its clock time does not exist, and a note then."""
    real = skipped(value)
    if real is None:
        return value, []
    assert isinstance(value, datetime)
    verb = "starts" if which == "start" else "ends"
    return real, [
        f"{describe_moment(value)} does not exist in {value.tzinfo} (the clocks go forward "
        f"then), so it {verb} at {real:%H:%M}."
    ]


def _check(args: dict[str, Any]) -> None:
    """What each action needs, and times and addresses it can read, said before anything
    is asked of the server or of an approver (:meth:`CalendarTool.refused_anyway`)."""
    action = args["action"]
    if action == "create" and not (str(args.get("title") or "").strip() and args.get("start")):
        raise ToolError("create needs title and start")
    if action in ("update", "delete") and not str(args.get("id") or "").strip():
        raise ToolError(f"{action} needs id (list the events to find it)")
    changes = ("start", "end", "title", "location", "notes", "attendees")
    if action == "update" and all(args.get(key) is None for key in changes):
        raise ToolError(f"update needs something to change: {', '.join(changes)}")
    _addresses(args.get("attendees"))
    if action == "create":
        _new_times(args, UTC)  # whether a time reads does not depend on the zone
    elif action == "update":
        for key in ("start", "end"):
            if args.get(key):
                parse_time(args[key], UTC)


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
