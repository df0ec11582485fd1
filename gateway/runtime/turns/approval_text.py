"""What approvers and requesters read about an approval request (pure text, no I/O).

Approvers see exactly what would run: the tool, who asked and every argument (redacted),
inside one code block that no value can close or format (:mod:`gateway.core.text.verbatim`:
the prompt's :attr:`OutboundMessage.verbatim`, a ``pre`` entity on Telegram), with
bidirectional and zero-width characters spelled out. An argument too long for the prompt is
cut there, and the prose outside the block (only our own words) says which, how long it
is, and that ``/show ID`` sends all of it; ``/approve ID`` of such a request works only for
an approver who has been sent it in full. Where there are buttons they send the commands;
elsewhere the owner types them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.core.messages import Action
from gateway.core.text.verbatim import fenced, visible
from gateway.store import ApprovalRequest, ApprovalState

MAX_VALUE_CHARS = 1_500  # per argument shown in the prompt; /show ID shows it all
MAX_SHOWN_CHARS = 3_000  # all arguments together, in the prompt
MAX_KEPT_CHARS = 30_000  # per argument kept for /show; a longer one cannot be approved here

Redact = Callable[[str], str]


# What a refusal tells the model to do next ("Tell the user what you would do and let them
# confirm."): words for the model, not for the person who decides.
_FOR_THE_MODEL = re.compile(r"\s*Tell the user\b[^.]*(\.|$)")


def approver_reason(reason: str) -> str:
    """A refusal's reason as the approvers read it: without its advice to the model."""
    return _FOR_THE_MODEL.sub("", reason).strip() or reason


def shown_arguments(args: dict[str, Any], redact: Redact) -> dict[str, Any]:
    """The arguments as approvers may see them: secrets redacted, whole up to
    ``MAX_KEPT_CHARS`` (beyond it cut with a note, and the request is not :func:`reviewable`)."""
    shown: dict[str, Any] = {}
    for name, value in args.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        text = redact(text)
        if len(text) > MAX_KEPT_CHARS:
            text = (
                f"{text[:MAX_KEPT_CHARS]}\n[{len(text) - MAX_KEPT_CHARS} more characters not kept]"
            )
        shown[name] = text
    return shown


def reviewable(record: ApprovalRequest) -> bool:
    """Whether every argument can be shown in full (``/show``)."""
    return all(len(str(value)) <= MAX_KEPT_CHARS for value in record.arguments.values())


@dataclass(frozen=True, slots=True)
class Cut:
    name: str
    shown: int
    total: int


def _block(record: ApprovalRequest, *, whole: bool) -> tuple[str, list[Cut]]:
    """The verbatim block: tool, requester, arguments (cut to the prompt's budget unless
    ``whole``), and which arguments were cut."""
    lines = [f"tool: {record.tool}", f"requested by: {requester_label(record.requester)}"]
    lines += [visible(line) for line in record.reach.splitlines()]
    cuts: list[Cut] = []
    budget = MAX_SHOWN_CHARS
    for name, value in record.arguments.items():
        text = visible(str(value))
        limit = len(text) if whole else max(0, min(MAX_VALUE_CHARS, budget))
        if len(text) > limit:
            cuts.append(Cut(visible(name), limit, len(text)))
            text = text[:limit]
        budget -= len(text)
        lines.append(f"{visible(name)}: {text}")
    if not record.arguments:
        lines.append("(no arguments)")
    return "\n".join(visible(line) if i < 2 else line for i, line in enumerate(lines)), cuts


def prompt_was_cut(record: ApprovalRequest) -> bool:
    return bool(_block(record, whole=False)[1])


MARKUP = str.maketrans("", "", "*_~`|[]<>#\\")


def requester_label(requester: dict[str, str], *, prose: bool = False) -> str:
    """Who asked; for ``prose`` (outside the verbatim block) without markdown characters,
    since a display name is whatever its owner typed."""
    name = requester.get("sender_name") or requester.get("sender_id", "someone")
    label = f"{name} ({requester.get('channel')} user {requester.get('sender_id')})"
    return visible(label.translate(MARKUP)) if prose else label


def minutes(seconds: float) -> str:
    whole = max(1, round(seconds / 60))
    return f"{whole} minute{'s' if whole != 1 else ''}"


def request_text(record: ApprovalRequest, *, timeout: float) -> tuple[str, str]:
    """The request approvers get: the markdown text (ending in the block) and the block
    itself (:attr:`OutboundMessage.verbatim`)."""
    block, cuts = _block(record, whole=False)
    notes = "".join(
        f"\n{cut.name} is cut: {cut.shown:,} of {cut.total:,} characters shown." for cut in cuts
    )
    if cuts:
        notes += (
            f"\nSend /show {record.id} for all of it; /approve {record.id} works only after that."
        )
    prose = (
        f"**Approval needed** (request {record.id})\n"
        f"Why it needs approval: {visible(record.reason)}{notes}\n\n"
        f"/approve {record.id} lets it run once; /deny {record.id} refuses it. "
        f"Without a decision within {minutes(timeout)} it is refused. What would run, "
        "exactly as written:"
    )
    return f"{prose}\n\n{fenced(block)}", block


def pictures_text(record: ApprovalRequest) -> str:
    """The caption of the pictures a tool took of what it would do (a browser's click)."""
    return f"What {record.tool} would act on, marked (request {record.id}):"


def show_text(record: ApprovalRequest) -> str:
    """``/show ID``: the whole request, every argument in full."""
    if not reviewable(record):
        return (
            f"Request {record.id} has an argument too long to show in a chat "
            f"(over {MAX_KEPT_CHARS:,} characters), so it cannot be approved here; "
            f"/deny {record.id} refuses it."
        )
    block, _ = _block(record, whole=True)
    return (
        f"Request {record.id} in full ({record.state}); /approve {record.id} or "
        f"/deny {record.id}:\n\n{fenced(block)}"
    )


def unseen_text(record: ApprovalRequest) -> str:
    return (
        f"Request {record.id} was too long to show in full, so it is not approved yet. "
        f"Send /show {record.id} to read all of it, then /approve {record.id}."
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
    who = requester_label(record.requester, prose=True)
    if record.state is ApprovalState.APPROVED:
        return f"Approved {record.id}: {record.tool} runs now for {who}."
    if record.state is ApprovalState.DENIED:
        return f"Denied {record.id}: {record.tool} will not run; {who} will be told."
    if record.state is ApprovalState.EXPIRED:
        return f"Request {record.id} expired: {record.tool} was refused and {who} told."
    return f"Request {record.id} could not be decided here ({record.decided_by})."


def already_text(record: ApprovalRequest) -> str:
    return f"Request {record.id} was already {record.state}; nothing changed."


LISTED_CHARS = 120  # of each argument, in the /approve listing


def listing_text(records: list[ApprovalRequest]) -> str:
    if not records:
        return "Nothing is waiting for your approval."
    lines = [
        f"{r.id}: {r.tool} for {requester_label(r.requester, prose=True)} ({r.reason})"
        + "".join(f"\n    {name}: {_brief(value)}" for name, value in r.arguments.items())
        for r in records[:20]
    ]
    return (
        "Waiting for your decision (/approve ID or /deny ID; /show ID for all of one):\n"
        + "\n".join(lines)
    )


def _brief(value: Any) -> str:
    """An argument on one line, cut at :data:`LISTED_CHARS` (what the listing shows of it:
    whoever decides sees what they decide, even when the request's own message was lost)."""
    text = " ".join(visible(str(value)).split())
    return text if len(text) <= LISTED_CHARS else text[: LISTED_CHARS - 1] + "…"
