"""What the agent is asked to do in one turn, and what it decided: the types the gateway
hands :class:`agent.agent.Agent` and gets back (the engine that runs a turn is
:mod:`agent.turn`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import tzinfo

from agent.approval import PendingCall
from agent.llm.base import TextSink
from agent.llm.metered import Allowance, UsageEntry
from gateway.core.messages import ChatRef, InboundMessage, OutboundMessage
from gateway.core.principal import Principal
from gateway.core.turns import TaskTypeName, TurnControl, TurnKind

ToolSink = Callable[[str], Awaitable[None]]  # told a tool's name just before it runs


@dataclass(frozen=True, slots=True)
class TurnRequest:
    turn_id: str
    session_key: str
    chat: ChatRef  # where answers go
    principal: Principal
    kind: TurnKind = TurnKind.CHAT
    messages: tuple[InboundMessage, ...] = ()  # folded user messages, oldest first
    prompt: str | None = None  # the instruction for unattended turns
    resumed: bool = False
    # Receives answer text as the model generates it (web chat); the final reply still goes
    # through the durable outbox and is authoritative.
    on_text: TextSink | None = None
    on_tool: ToolSink | None = None  # the terminal's "thinking… (web_search)" line
    task_type: TaskTypeName = "general"
    history_limit: int | None = None  # a light session (heartbeat) keeps less history
    tainted: bool = False  # started by a turn that had read untrusted content
    authorising_texts: tuple[str, ...] | None = None  # the user's words behind a background task
    control: TurnControl | None = None  # a chat turn's handle (/stop, /status)
    steer: bool = False  # messages sent meanwhile join the running turn (<channel>.followups)
    zone: tzinfo | None = None  # the person's own time zone; None: the gateway's
    allowance: Allowance | None = None  # what the money caps leave this turn; None: no cap

    @property
    def last_message(self) -> InboundMessage | None:
        return self.messages[-1] if self.messages else None


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    replies: tuple[OutboundMessage, ...] = ()
    failed: bool = False
    # Every model call the turn caused, by purpose (committed with the turn).
    usage: tuple[UsageEntry, ...] = ()
    final_text: str = ""
    read_untrusted: bool = False  # the turn saw outside content (its answer may carry it)
    # The turn stopped at a call that waits for approval: it is parked, not committed.
    awaiting: PendingCall | None = None
