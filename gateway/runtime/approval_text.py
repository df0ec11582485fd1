"""What approvers and requesters read about an approval request (pure text, no I/O).

Approvers see exactly what would run: the tool and every argument (redacted, and cut only
past a few thousand characters), who asked, why the policy wants their yes, and the two
commands. The same text works on every channel: where there are buttons they send those
commands; elsewhere the owner types them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gateway.core.messages import Action
from gateway.store import ApprovalRequest, ApprovalState

MAX_VALUE_CHARS = 1_500  # per argument shown; the approval covers the exact full value
MAX_SHOWN_CHARS = 3_000  # all arguments together

Redact = Callable[[str], str]


def shown_arguments(args: dict[str, Any], redact: Redact) -> dict[str, Any]:
    """The arguments as approvers see them: secrets redacted, very long values cut."""
    shown: dict[str, Any] = {}
    budget = MAX_SHOWN_CHARS
    for name, value in args.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        text = redact(text)
        limit = max(0, min(MAX_VALUE_CHARS, budget))
        if len(text) > limit:
            text = f"{text[:limit]}… ({len(text) - limit} more characters not shown)"
        budget -= len(text)
        shown[name] = text
    return shown


def requester_label(requester: dict[str, str]) -> str:
    name = requester.get("sender_name") or requester.get("sender_id", "someone")
    return f"{name} ({requester.get('channel')} user {requester.get('sender_id')})"


def minutes(seconds: float) -> str:
    whole = max(1, round(seconds / 60))
    return f"{whole} minute{'s' if whole != 1 else ''}"


def request_text(record: ApprovalRequest, *, timeout: float) -> str:
    """The request approvers get (markdown; channels render it)."""
    lines = "\n".join(f"{name}: {value}" for name, value in record.arguments.items())
    return (
        f"**Approval needed** (request {record.id})\n"
        f"{requester_label(record.requester)} wants me to run **{record.tool}**:\n"
        f"```\n{lines or '(no arguments)'}\n```\n"
        f"Why it needs approval: {record.reason}\n\n"
        f"/approve {record.id} lets it run once; /deny {record.id} refuses it. "
        f"Without a decision within {minutes(timeout)} it is refused."
    )


def request_actions(record: ApprovalRequest) -> tuple[Action, ...]:
    return (
        Action("Approve", f"/approve {record.id}", "primary"),
        Action("Deny", f"/deny {record.id}", "danger"),
    )


def waiting_text(record: ApprovalRequest, *, whose: str, timeout: float) -> str:
    """The requester's notice: the turn waits, and until when at most. ``whose``: "the
    owner's", "an admin's", or "your" (asked in their own direct chat)."""
    where = " in our direct chat" if whose == "your" else ""
    return (
        f"{record.tool} needs {whose} approval first, so I asked{where} (request "
        f"{record.id}). I'll carry on here once it is decided, within {minutes(timeout)} at most."
    )


def decided_text(record: ApprovalRequest) -> str:
    """What an approver is told after deciding (or trying to decide) ``record``."""
    who = requester_label(record.requester)
    if record.state is ApprovalState.APPROVED:
        return f"Approved {record.id}: {record.tool} runs now for {who}."
    if record.state is ApprovalState.DENIED:
        return f"Denied {record.id}: {record.tool} will not run; {who} will be told."
    if record.state is ApprovalState.EXPIRED:
        return f"Request {record.id} expired: {record.tool} was refused and {who} told."
    return f"Request {record.id} could not be decided here ({record.decided_by})."


def already_text(record: ApprovalRequest) -> str:
    return f"Request {record.id} was already {record.state}; nothing changed."


def listing_text(records: list[ApprovalRequest]) -> str:
    if not records:
        return "Nothing is waiting for your approval."
    lines = [
        f"{r.id}: {r.tool} for {requester_label(r.requester)} ({r.reason})" for r in records[:20]
    ]
    return "Waiting for your decision (/approve ID or /deny ID):\n" + "\n".join(lines)
