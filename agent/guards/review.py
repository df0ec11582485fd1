"""Termination review: before a turn ends, check that the user actually got something.

Rules first (cheap, no model call). Each finding carries an audit code and the fix the model
is asked to make. A substantive answer is never replaced: when it only leaves a failed tool
unmentioned, the gateway adds a short factual note (:func:`failure_note`) instead of asking
the model again. Re-prompts (at most K) are for answers that are empty, an acknowledgement
or a status update, where asking again helps; if none of them turns substantive, an explicit
failure notice is sent — never silence, never two answers. Autopilot turns (heartbeat,
cron) may end silently. A check-in (heartbeat) may end with a question for the owner: it
goes to their chat, and their answer reaches the conversation that holds it. Other
autopilot turns (a job, a background task) must not end on a question for someone who is
not there: the model is told exactly that, once; if it asks again, the answer goes out.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

from agent.llm.types import ChatMessage

# Tools whose output is the substance the user asked for.
DEEP_TOOLS = frozenset(
    {"web_search", "web_fetch", "exec", "read_file", "list_dir", "memory_search", "get_skill"}
)

_ACK = re.compile(
    r"^\W*(ok(ay)?|sure( thing)?|got it|noted|on it|will do|done|yes|yep|alright|understood|"
    r"no problem|of course|thanks?( you)?|one (moment|sec(ond)?)|hang on|working on it)\W*$",
    re.IGNORECASE,
)
_STATUS = re.compile(
    r"^\W*(i'?ll|i will|let me|i'?m going to|i am going to|i'?m (now )?(checking|looking|searching|"
    r"working|reading|fetching)|i am (now )?(checking|looking|searching|working)|checking|looking|"
    r"searching|working on|give me a (moment|minute|sec))\b",
    re.IGNORECASE,
)
_ADMITS_FAILURE = re.compile(
    r"\b(error|errors|fail(ed|ure|s)?|couldn'?t|could not|can'?t|cannot|unable|didn'?t work|"
    r"not found|no such|denied|blocked|refused|timed? ?out|sorry|unfortunately|problem|issue|"
    r"not (allowed|available|possible)|doesn'?t exist|does not exist)\b",
    re.IGNORECASE,
)


class Code(enum.StrEnum):
    NO_SEND = "NO_SEND"
    UNSENT_RESULTS = "UNSENT_RESULTS"
    NO_SUBSTANTIVE = "NO_SUBSTANTIVE"
    ACK_ONLY = "ACK_ONLY"
    ERROR_UNRESOLVED = "ERROR_UNRESOLVED"
    UNVERIFIED_CLAIM = "UNVERIFIED_CLAIM"  # says it did what no call did (agent.guards.claims)
    ASKS_ABSENT = "ASKS_ABSENT"  # a job's answer ends on a question nobody is there to answer
    GENERIC = "GENERIC"


FIXES = {
    Code.NO_SEND: "You ended without replying. Write the answer for the user now.",
    Code.UNSENT_RESULTS: "You gathered results with tools but did not share them. Give the user the findings now (summarise what the tool output says).",
    Code.NO_SUBSTANTIVE: "Your reply is only an acknowledgement. Give the user the actual answer or result now.",
    Code.ACK_ONLY: "Your reply only announces work instead of delivering it. Do the work now with your tools, then answer with the result.",
    Code.ERROR_UNRESOLVED: "A tool failed and your reply does not deal with it. Either fix it and retry, or tell the user plainly what failed and why.",
    Code.UNVERIFIED_CLAIM: "Your reply says something was done that no successful tool call of this turn did. Do it now with your tools, or say plainly what was and was not done.",
    Code.ASKS_ABSENT: "Nobody is waiting for this reply: it is delivered later, unasked, so a question at its end goes unanswered. Decide sensibly yourself, do what is due, and end with what you did or found, not with a question.",
    Code.GENERIC: "Your reply does not complete the request. Finish it, or explain what is missing.",
}

FAILURE_NOTICES = {
    Code.NO_SEND: "Sorry, I could not produce an answer to this. Please try again or rephrase.",
    Code.UNSENT_RESULTS: "Sorry, I found material for this but could not turn it into an answer.",
    Code.NO_SUBSTANTIVE: "Sorry, I could not produce a real answer to this. Please try again or rephrase.",
    Code.ACK_ONLY: "Sorry, I could not finish this task. Please try again or break it into smaller steps.",
    Code.ERROR_UNRESOLVED: "Sorry, something I tried failed and I could not recover.",
    Code.UNVERIFIED_CLAIM: "Sorry, I could not finish this task. Please try again.",
    Code.ASKS_ABSENT: "Sorry, I could not finish this task on my own.",
    Code.GENERIC: "Sorry, I could not complete this properly.",
}


@dataclass(frozen=True, slots=True)
class ToolStep:
    tool: str
    is_error: bool
    after_last_send: bool  # happened after the last message the user saw
    acted: bool = False  # a successful side effect: "Done." is then a fine answer
    error: str = ""  # the error result's text, for the failure note


@dataclass(frozen=True, slots=True)
class Finding:
    code: Code
    reason: str
    detail: str = ""  # the fix for this answer in particular; default: the code's

    @property
    def fix(self) -> str:
        return f"{REVIEW_MARK}{self.code.value}] {self.detail or FIXES[self.code]}"


REVIEW_MARK = "[review "  # how the fix the model is asked for begins: a user message of ours


def is_review(message: ChatMessage) -> bool:
    """A user message the review stage wrote (asking for a fix), not the person."""
    return message.role == "user" and message.content.startswith(REVIEW_MARK)


def review(
    *,
    final_text: str,
    sent_texts: Sequence[str],
    steps: Sequence[ToolStep],
    unattended: bool,
    check_in: bool = False,
) -> Finding | None:
    """The first problem with a finished turn, or ``None`` when it may end as it is.
    ``check_in``: a heartbeat's, whose question the owner reads in their chat and may
    answer."""
    text = final_text.strip()
    if unattended:
        if not check_in and text.endswith("?") and "HEARTBEAT_OK" not in text:
            return Finding(Code.ASKS_ABSENT, "unattended turn asked the absent user a question")
        return None
    visible = [t for t in (*sent_texts, text) if t.strip()]
    if not visible:
        return Finding(Code.NO_SEND, "the turn produced no user-visible reply")
    unresolved = unresolved_errors(steps)
    if unresolved and not any(_ADMITS_FAILURE.search(t) for t in visible):
        return Finding(
            Code.ERROR_UNRESOLVED, f"{', '.join(unresolved)} failed and the reply does not say so"
        )
    fresh_results = [
        s for s in steps if s.tool in DEEP_TOOLS and not s.is_error and s.after_last_send
    ]
    if fresh_results and (not text or _ACK.match(text) or _is_status(text)):
        return Finding(Code.UNSENT_RESULTS, f"{fresh_results[-1].tool} output was never shared")
    if any(s.acted for s in steps):
        return None  # the action itself was the deliverable; a short confirmation suffices
    if all(_ACK.match(t) for t in visible):
        return Finding(Code.NO_SUBSTANTIVE, "only acknowledgements were sent")
    if all(_is_status(t) for t in visible):
        return Finding(Code.ACK_ONLY, "only status updates were sent")
    return None


def substantive(text: str) -> bool:
    """An answer with content of its own: not empty, not an acknowledgement, not a status
    update. Such an answer is delivered, never replaced by a failure notice."""
    text = text.strip()
    return bool(text) and not _ACK.match(text) and not _is_status(text)


NOTE_REASON_CHARS = 160


def failure_note(steps: Sequence[ToolStep], *, explain: bool = True) -> str:
    """What failed, in the gateway's words: "Note: read_file failed 2 times (x does not exist)."
    Only tools whose last call failed count (a retry that worked resolved it). Without
    ``explain`` (a member's turn) only what failed: a reason can name what is not theirs to
    know (the owner's address in a denied approval, a file they may not see)."""
    failures: dict[str, list[str]] = {}
    for step in steps:
        if step.is_error:
            failures.setdefault(step.tool, []).append(step.error)
    parts = []
    for tool in unresolved_errors(steps):
        errors = failures[tool]
        times = f" {len(errors)} times" if len(errors) > 1 else ""
        reason = " ".join(errors[-1].split()) if explain else ""
        if len(reason) > NOTE_REASON_CHARS:
            reason = reason[: NOTE_REASON_CHARS - 1].rstrip() + "…"
        parts.append(f"{tool} failed{times} ({reason})" if reason else f"{tool} failed{times}")
    return f"Note: {'; '.join(parts)}." if parts else ""


def _is_status(text: str) -> bool:
    return bool(_STATUS.match(text)) and len(text) < 240


def unresolved_errors(steps: Sequence[ToolStep]) -> list[str]:
    last: dict[str, bool] = {}
    for step in steps:
        last[step.tool] = step.is_error
    return [tool for tool, failed in last.items() if failed]


REVIEWER_PROMPT = (
    "You review an assistant's reply before it is sent. The user wrote:\n{request}\n\n"
    "The reply is:\n{reply}\n\nDoes the reply deliver what was asked (an answer or a result, "
    "not a promise to do it later)? Answer with exactly PASS, or FAIL: <one-line reason>."
)
