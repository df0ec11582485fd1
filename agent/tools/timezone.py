"""The ``timezone`` tool: a person's own time zone, set by asking ("I'm in Lisbon").

A zone is only stored once the person confirmed it, in code: the first ``set`` puts it to
them (the tool answers with the question to ask), and only a ``set`` of the same zone in a
later turn of theirs (their answer) stores it. Their clock, their reminders and their quiet
hours follow it from their next message on. A zone the owner gave them in ``[people]``
cannot be changed this way.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agent.tools.base import Effect, Tool, ToolContext, ToolError, ToolResult, schema
from gateway.core.schedule_spec import ScheduleError, zone


class TimeZone(Tool):
    name = "timezone"
    description = (
        "The user's own time zone (their clock, reminders, quiet hours). action=show, or "
        "action=set with zone as an IANA name ('I'm in Lisbon' -> Europe/Lisbon): the first "
        "set returns a question to ask them; call set again with the same zone after they say yes."
    )
    parameters = schema(
        {
            "action": {"type": "string", "enum": ["show", "set"]},
            "zone": {"type": "string"},
        },
        ("action",),
    )
    effect = Effect.WRITE
    does = "changes the person's time zone"
    read_actions = frozenset({"show"})
    time_sensitive = True  # a set depends on what the person answered meanwhile
    rarely_used = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        zones = ctx.services.zones
        if zones is None:
            raise ToolError("time zones are not available in this gateway")
        person = ctx.principal.person
        if args["action"] == "show":
            current = await zones.zone_of(person)
            return ToolResult(f"{current}, now {_local(current)} there")
        name = str(args.get("zone") or "").strip()
        if not name:
            raise ToolError("set needs zone, an IANA name like Europe/Lisbon")
        try:
            zone(name)
        except ScheduleError as exc:
            raise ToolError(str(exc)) from exc
        fixed = zones.fixed_zone(person)
        if fixed is not None:
            raise ToolError(
                f"this person's time zone is set by the owner in the configuration ({fixed}); "
                "only the owner can change it"
            )
        if await zones.confirm_zone(person, name, ctx.turn_id):
            await ctx.audit("timezone", person=person, zone=name, turn=ctx.turn_id)
            return ToolResult(
                f"time zone set to {name} (now {_local(name)} there): their clock, new "
                "reminders and quiet hours use it from their next message on"
            )
        await zones.propose_zone(person, name, ctx.turn_id)
        return ToolResult(
            f"not set yet. Ask them to confirm, e.g. 'Shall I use {name} as your time zone? "
            f"It is {_local(name)} there now.' If they say yes, call timezone set with "
            f"zone={name} again."
        )


def _local(name: str) -> str:
    return datetime.now(zone(name)).strftime("%H:%M (%A)")
