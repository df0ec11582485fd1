"""The ``cron`` tool: reminders and recurring jobs the user asks for.

A job runs either a fixed ``message`` (sent as is, no model call) or a ``prompt`` (a task the
agent carries out at that time); its result goes to the chat that created it. People list
their jobs (paused ones marked: a job paused from the control center or ``switchboard cron
pause`` still exists), remove, pause and resume them. Creating jobs
follows the access policy (not from groups; after outside content only with an approval); members may
create them for their own direct chat only, up to ``scheduler.max_jobs_per_member``
(gateway/runtime/schedule/jobs.py). Times are in the person's own zone unless ``timezone`` names one.
"""

from __future__ import annotations

from typing import Any

from agent.tools.base import Effect, Tool, ToolContext, ToolError, ToolResult, schema
from gateway.core.schedule_spec import ScheduleError
from gateway.core.services import JobInfo
from gateway.core.turns import TASK_TYPE_NAMES, task_type_name

# Words of a request for a job: a hint for the approver (agent.policy), no more.
SCHEDULE_INTENT = ("remind", "reminder", "alarm", "schedule", "cron", "job")


# action: what is said when it worked, the state the job must be in for it
CHANGES = {
    "remove": ("removed", "active or paused"),
    "pause": ("paused", "active"),
    "resume": ("resumed", "paused"),
}


def _line(job: JobInfo) -> str:
    paused = " (paused: it does not run until resumed)" if job.paused else ""
    return f"{job.id}: {job.description}{paused} - {job.what}"


class Cron(Tool):
    name = "cron"
    description = (
        "Scheduled jobs. action=add needs schedule ('in 20 minutes', 'tomorrow at 8:30', "
        "'every weekday at 8:00', '0 9 * * 1-5') and message (sent as is) or prompt (a task "
        "for then); list shows paused jobs too; remove, pause (kept, not run) and resume "
        "need id."
    )
    parameters = schema(
        {
            "action": {"type": "string", "enum": ["add", "list", "remove", "pause", "resume"]},
            "schedule": {"type": "string"},
            "message": {"type": "string"},
            "prompt": {"type": "string"},
            "timezone": {"type": "string"},
            "id": {"type": "string"},
            "task_type": {"type": "string", "enum": list(TASK_TYPE_NAMES)},
        },
        ("action",),
    )
    effect = Effect.SCHEDULE
    targets = ("id",)
    intent = SCHEDULE_INTENT
    does = "creates or changes a scheduled job"
    read_actions = frozenset({"list"})
    time_sensitive = True  # jobs fire, and other chats add and remove theirs

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        jobs = ctx.services.jobs
        if jobs is None:
            raise ToolError("scheduling is not available in this gateway")
        action = args["action"]
        if action == "list":
            listed = await jobs.list_jobs(ctx.principal)
            if not listed:
                return ToolResult("no scheduled jobs")
            return ToolResult("\n".join(map(_line, listed)))
        changes = {"remove": jobs.remove_job, "pause": jobs.pause_job, "resume": jobs.resume_job}
        if action in changes:
            if not args.get("id"):
                raise ToolError(f"{action} needs the job id (see action=list)")
            done, state = CHANGES[action]
            if await changes[action](args["id"], ctx.principal):
                return ToolResult(f"{done} job {args['id']}")
            raise ToolError(f"no {state} job {args['id']} of yours")
        if not args.get("schedule"):
            raise ToolError("add needs a schedule")
        if bool(args.get("message")) == bool(args.get("prompt")):
            raise ToolError(
                "add needs exactly one of message (sent as is) or prompt (a task for later)"
            )
        try:
            job = await jobs.add_job(
                schedule=args["schedule"],
                timezone=args.get("timezone"),
                prompt=args.get("prompt"),
                message=args.get("message"),
                chat=ctx.chat,
                principal=ctx.principal,
                task_type=task_type_name(args.get("task_type", "general")),
                agent=ctx.agent,
                user_texts=ctx.user_texts,
                tainted=ctx.state.read_untrusted,
            )
        except ScheduleError as exc:
            raise ToolError(str(exc)) from exc
        when = f"; next run {job.next_run:%Y-%m-%d %H:%M %Z}" if job.next_run else ""
        if job.waits_until is not None:
            when += (
                f", in the person's quiet hours: it waits until {job.waits_until:%H:%M %Z}"
                " (tell them)"
            )
        return ToolResult(f"scheduled job {job.id}: {job.description}{when}")
