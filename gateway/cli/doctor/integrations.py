"""Doctor's checks of the services the assistant works in for the owner: the calendar's
login (``[calendar]``), by finding the account's calendars as the tool does."""

from __future__ import annotations

from gateway.cli.doctor.checks import Check
from gateway.config.settings import Settings


async def calendar_check(settings: Settings) -> list[Check]:
    if not settings.calendar.enabled:
        return []
    from agent.calendar.caldav import CalDav, CalendarError  # noqa: PLC0415 - when configured

    client = CalDav(settings.calendar)
    try:
        account = await client.account()
    except CalendarError as exc:
        return [Check("calendar", "fail", f"{exc}")]
    names = ", ".join(repr(c.name) for c in account.calendars)
    count = len(account.calendars)
    return [
        Check(
            "calendar",
            "ok",
            f"signed in at {client.url}: {count} calendar{'' if count == 1 else 's'} ({names})",
        )
    ]
