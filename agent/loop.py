"""AgentLoop: one turn, from the user's messages to the replies to send.

It loads the session's history, writes the new user messages as drafts (the turn's first
checkpoint), builds the prompt, runs the tool loop and decides what the user sees. It never
raises for a provider failure, a timeout or a bug in a tool: the user gets a clear notice
instead. Cancellation (shutdown) propagates, leaving the drafts for the next start to resume.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from agent.context import ContextBuilder, user_message
from agent.guards.cleanup import failed_attempts
from agent.guards.prompts import guidance, guidance_block
from agent.guards.trace import TurnTrace
from agent.llm.errors import LLMError
from agent.llm.types import ChatMessage, ToolCall
from agent.policy import ToolPolicy
from agent.runner import Runner
from agent.tools.base import Sender, ToolContext, TurnState
from agent.turn import TurnKind, TurnOutcome, TurnRequest
from agent.workspace import Workspace
from gateway.messages import OutboundKind, OutboundMessage
from gateway.store import History, NewMessage

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]

INTERRUPTED_NOTICE = (
    "Sorry, I was interrupted while working on your message and could not finish it. "
    "Please send it again."
)
TIMEOUT_NOTICE = "Sorry, that took too long and I had to stop. Try a smaller request?"
INTERNAL_ERROR_NOTICE = (
    "Sorry, something went wrong on my side while answering. It has been logged."
)


class AgentLoop:
    def __init__(
        self,
        *,
        runner: Runner,
        policy: ToolPolicy,
        history: History,
        context: ContextBuilder,
        workspace: Workspace,
        send: Sender,
        clock: Clock,
        turn_timeout: float = 600.0,
        history_limit: int = 200,
        default_reply: str = "I have nothing to add to that.",
        vision: bool = True,
        trace_dir: Path | None = None,
        redact: Callable[[str], str] = lambda text: text,
    ) -> None:
        self.runner = runner
        self.policy = policy
        self.history = history
        self.context = context
        self.workspace = workspace
        self._send = send
        self._clock = clock
        self._turn_timeout = turn_timeout
        self._history_limit = history_limit
        self._default_reply = default_reply
        self._vision = vision
        self._trace_dir = trace_dir
        self._redact = redact

    async def run_turn(self, request: TurnRequest) -> TurnOutcome:
        trace = TurnTrace(request.turn_id, session_key=request.session_key, kind=request.kind.value)
        try:
            async with asyncio.timeout(self._turn_timeout):
                outcome = await self._run(request, trace)
        except TimeoutError:
            log.warning("turn %s timed out after %ss", request.turn_id, self._turn_timeout)
            trace.decision("limits", "TURN_TIMEOUT", f"{self._turn_timeout}s wall time")
            outcome = self._notice(request, TIMEOUT_NOTICE)
        except LLMError as exc:
            log.warning("turn %s: provider failed: %s", request.turn_id, exc)
            trace.add("llm_error", error=type(exc).__name__, status=exc.status_code)
            outcome = self._notice(request, _provider_notice(exc))
        except Exception as exc:
            log.exception("turn %s failed", request.turn_id)
            trace.add("internal_error", error=type(exc).__name__)
            outcome = self._notice(request, INTERNAL_ERROR_NOTICE)
        if self._trace_dir is not None:
            await asyncio.to_thread(trace.write, self._trace_dir, self._redact)
        return outcome

    def interrupted(self, request: TurnRequest) -> TurnOutcome:
        """The outcome for a turn that crashed too often to try again."""
        return self._notice(request, INTERRUPTED_NOTICE)

    async def _run(self, request: TurnRequest, trace: TurnTrace) -> TurnOutcome:
        state, stored = await self.history.load(request.session_key, limit=self._history_limit)
        conversation = [ChatMessage.from_body(m.body) for m in stored]
        drafts = await self.history.drafts(request.turn_id) if request.resumed else []
        if drafts:
            conversation.extend(ChatMessage.from_body(d.body) for d in drafts)
        else:
            new = self._user_messages(request)
            await self._checkpoint(request, new)
            conversation.extend(new)
        tools = self.runner.executor.registry.specs(self.policy.offered)
        helpers = guidance(
            [m.text for m in request.messages] or [request.prompt or ""], [t.name for t in tools]
        )
        if helpers:
            trace.add("prompt_helpers", helpers=[h.name for h in helpers])
        system = self.context.system_prompt(
            request,
            tools,
            now=self._clock(),
            summary=state.summary,
            guidance=guidance_block(helpers),
        )
        turn_state = TurnState()
        result = await self.runner.run(
            system=system,
            conversation=conversation,
            tools=tools,
            context_for=lambda call: self._tool_context(request, call, turn_state),
            checkpoint=lambda messages: self._checkpoint(request, messages),
            state=turn_state,
            trace=trace,
            autopilot=request.kind.autopilot,
        )
        if result.had_errors:
            await self._clean_up_errors(request, trace)
        text = result.text.strip()
        if request.kind.autopilot:
            replies = () if not text else (self._outbound(request, text, OutboundKind.PROACTIVE),)
            return TurnOutcome(replies, usage=result.usage, final_text=text)
        if not text and turn_state.sent_texts:
            return TurnOutcome((), usage=result.usage, final_text=text)
        if not text:
            text = self._default_reply
        if _already_sent(text, turn_state.sent_texts):
            trace.decision("reply", "ALREADY_SENT", "the final answer repeats a message tool send")
            return TurnOutcome((), usage=result.usage, final_text=text)
        kind = OutboundKind.NOTICE if result.failed else OutboundKind.REPLY
        return TurnOutcome(
            (self._outbound(request, text, kind),), usage=result.usage, final_text=text
        )

    async def _clean_up_errors(self, request: TurnRequest, trace: TurnTrace) -> None:
        drop = failed_attempts(await self.history.drafts(request.turn_id))
        if drop:
            await self.history.drop(drop)
            trace.decision(
                "cleanup", "DROPPED_FAILED_ATTEMPT", f"{len(drop)} messages left history"
            )

    def _user_messages(self, request: TurnRequest) -> list[ChatMessage]:
        if request.messages:
            return [user_message(m, vision=self._vision) for m in request.messages]
        return [ChatMessage(role="user", content=request.prompt or "")]

    async def _checkpoint(self, request: TurnRequest, messages: Sequence[ChatMessage]) -> None:
        await self.history.add_drafts(
            request.session_key,
            request.turn_id,
            [NewMessage(m.role, m.to_body()) for m in messages],
        )

    def _tool_context(self, request: TurnRequest, call: ToolCall, state: TurnState) -> ToolContext:
        return ToolContext(
            turn_id=request.turn_id,
            call_id=call.id,
            session_key=request.session_key,
            chat=request.chat,
            principal=request.principal,
            workspace=self.workspace,
            send=self._send,
            state=state,
            inbound=request.last_message,
            user_texts=tuple(m.text for m in request.messages),
        )

    def _outbound(self, request: TurnRequest, text: str, kind: OutboundKind) -> OutboundMessage:
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
            turn_id=request.turn_id,
            idempotency_key=f"{request.turn_id}:{kind.value}",
        )

    def _notice(self, request: TurnRequest, text: str) -> TurnOutcome:
        if request.kind is not TurnKind.CHAT:
            return TurnOutcome((), failed=True, final_text=text)
        return TurnOutcome(
            (self._outbound(request, text, OutboundKind.NOTICE),), failed=True, final_text=text
        )


def _provider_notice(exc: LLMError) -> str:
    return f"Sorry, I could not answer: {exc.user_message} Your message is saved; please try again in a moment."


def _already_sent(text: str, sent: Sequence[str]) -> bool:
    """The final answer repeats what the `message` tool already delivered."""
    normalized = " ".join(text.split())
    return any(normalized and normalized in " ".join(s.split()) for s in sent)
