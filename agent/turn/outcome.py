"""What the user sees when a turn ends: one answer, a failure notice, or (for unattended
turns with nothing to report) nothing at all."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from agent.guards.trace import TurnTrace
from agent.llm.errors import LLMContextOverflow, LLMError
from agent.request import TurnOutcome, TurnRequest
from agent.tools.base import TurnState
from agent.turn.loop import RunResult
from gateway.core.messages import Attachment, OutboundKind, OutboundMessage
from gateway.core.turns import TurnKind

TIMEOUT_NOTICE = "Sorry, that took too long and I had to stop. Try a smaller request?"
INTERNAL_ERROR_NOTICE = (
    "Sorry, something went wrong on my side while answering. It has been logged."
)


def decide(
    request: TurnRequest,
    result: RunResult,
    state: TurnState,
    trace: TurnTrace,
    *,
    default_reply: str,
) -> TurnOutcome:
    """The outcome of a turn that ran to the end."""
    return replace(
        _decide(request, result, state, trace, default_reply=default_reply),
        read_untrusted=state.read_untrusted,
        usage=state.meter.entries(),
    )


def _decide(
    request: TurnRequest,
    result: RunResult,
    state: TurnState,
    trace: TurnTrace,
    *,
    default_reply: str,
) -> TurnOutcome:
    text = result.text.strip()
    if request.kind.unattended:
        text = nothing_to_report(text)
        if not text:
            trace.decision("reply", "HEARTBEAT_OK", "nothing to report; nothing sent")
        replies = (
            ()
            if not text
            else (outbound(request, text, OutboundKind.PROACTIVE, tuple(state.files)),)
        )
        return TurnOutcome(replies, final_text=text)
    files = tuple(state.files)
    if (not text and state.sent_texts) or already_sent(text or default_reply, state.sent_texts):
        if text:
            trace.decision("reply", "ALREADY_SENT", "the final answer repeats a message tool send")
        # The words are out already; files the turn made still reach the user.
        replies = (
            (outbound(request, files_caption(files), OutboundKind.REPLY, files),) if files else ()
        )
        return TurnOutcome(replies, final_text=text)
    text = text or default_reply
    kind = OutboundKind.NOTICE if result.failed else OutboundKind.REPLY
    return TurnOutcome((outbound(request, text, kind, files),), final_text=text)


def notice(request: TurnRequest, text: str) -> TurnOutcome:
    """A failed turn: chat turns and scheduled jobs (someone asked for them) tell the user;
    heartbeats and background tasks only record the failure."""
    if request.kind is TurnKind.CRON:
        text = f"A scheduled task could not run. {text}"
    elif request.kind is not TurnKind.CHAT:
        return TurnOutcome((), failed=True, final_text=text)
    return TurnOutcome(
        (outbound(request, text, OutboundKind.NOTICE),), failed=True, final_text=text
    )


def stop_notice(done: Sequence[str], unknown: Sequence[str], *, dropped: int = 0) -> str:
    """What a person who stopped a turn is told: that it stopped, what it had already done
    (those side effects are not undone), and the messages the stop dropped."""
    parts = ["Stopped."]
    if done:
        parts.append(f"Already done before the stop: {', '.join(done)}.")
    if unknown:
        parts.append(f"Started, outcome unknown: {', '.join(unknown)}.")
    if not done and not unknown:
        parts.append("Nothing had been changed.")
    if dropped == 1:
        parts.append("The message you sent after it was dropped.")
    elif dropped:
        parts.append(f"The {dropped} messages you sent after it were dropped.")
    return " ".join(parts)


STOPPED_MARK = "Stopped before it finished."


def kept_answer(cut: str) -> str:
    """What a chat keeps of an answer stopped while it was shown: its words as far as they
    were written (a code block left open closed), then the mark the web chat shows too."""
    words = cut.rstrip()
    if words.count("```") % 2:
        words += "\n```"
    return f"{words}\n\n_{STOPPED_MARK}_"


def stop_mark(done: Sequence[str], unknown: Sequence[str]) -> str:
    """What history keeps where a stopped answer ends (after what it had written): a plain
    mark, so the model reading it later neither repeats nor imitates the person's notice."""
    facts = [f"already done: {', '.join(done)}"] if done else []
    if unknown:
        facts.append(f"outcome unknown: {', '.join(unknown)}")
    return f"[the person stopped this answer here{'; ' if facts else ''}{'; '.join(facts)}]"


MEMBER_NOTICE = (
    "Sorry, I could not answer: the AI model behind me {problem}. This is on my side, not "
    "a problem with your message; {after}"
)


def provider_notice(exc: LLMError, *, owner: bool) -> str:
    """The cause and the fix, then whether waiting helps (it does not for a wrong setting,
    nor for a conversation too long for the model: a shorter text does). The cause and the
    fix are the owner's to read: anyone else is told only that the model failed and whether
    to try again in a moment, never the model server's address or its settings."""
    if isinstance(exc, LLMContextOverflow):
        said = f"{exc.window} tokens, its server says; " if exc.window else ""
        return (
            "Sorry, I could not answer: the conversation is too long for the model's context "
            f"window ({said}set by llm.context_window). Please send a shorter message, or "
            "/new to start a fresh conversation."
        )
    if not owner:
        if exc.transient:
            return MEMBER_NOTICE.format(
                problem="did not answer", after="please try again in a moment."
            )
        return MEMBER_NOTICE.format(
            problem="is not working right now",
            after="please try again later.",
        )
    after = (
        "please try again in a moment." if exc.transient else "send it again once this is fixed."
    )
    return f"Sorry, I could not answer. {exc.explain()} Your message is saved; {after}"


def outbound(
    request: TurnRequest, text: str, kind: OutboundKind, files: tuple[Attachment, ...] = ()
) -> OutboundMessage:
    last = request.last_message
    return OutboundMessage(
        channel=request.chat.channel,
        chat_id=request.chat.chat_id,
        thread_id=request.chat.thread_id,
        text=text,
        kind=kind,
        reply_to_message_id=last.platform_message_id
        if last is not None and last.is_group
        else None,
        attachments=files,
        turn_id=request.turn_id,
        idempotency_key=f"{request.turn_id}:{kind.value}",
    )


def files_caption(files: tuple[Attachment, ...]) -> str:
    return "\n".join(f.note or f.filename or "a file" for f in files)


def nothing_to_report(text: str) -> str:
    """An unattended answer without its HEARTBEAT_OK marker; empty when that was all it said."""
    if not re.search(r"\bHEARTBEAT_OK\b", text, flags=re.IGNORECASE):
        return text
    rest = re.sub(r"\bHEARTBEAT_OK\b", "", text, flags=re.IGNORECASE).strip()
    return "" if len(re.sub(r"\W+", "", rest)) < 20 else rest  # the marker plus filler


def already_sent(text: str, sent: Sequence[str]) -> bool:
    """The final answer repeats what the `message` tool already delivered."""
    normalized = " ".join(text.split())
    return any(normalized and normalized in " ".join(s.split()) for s in sent)
