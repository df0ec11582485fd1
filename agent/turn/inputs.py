"""What one run of the tool loop is given: its bounds and, per turn, its inputs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from agent.guards.trace import TurnTrace
from agent.llm.base import TextSink
from agent.llm.errors import LLMContextOverflow
from agent.llm.metered import Charge
from agent.llm.types import ChatMessage, SystemPrompt, ToolCall, ToolSpec
from agent.request import ToolSink
from agent.tools.base import ToolContext, TurnState
from gateway.core.turns import TurnControl

Checkpoint = Callable[[Sequence[ChatMessage]], Awaitable[None]]
ContextFactory = Callable[[ToolCall], ToolContext]
Steer = Callable[[], Awaitable[list[ChatMessage]]]


@dataclass(frozen=True, slots=True)
class TurnLimits:
    """An agent's bounds on every turn (``[agent]`` settings)."""

    max_iterations: int = 20
    max_turn_tokens: int = 600_000
    review_retries: int = 2
    llm_review: bool = False
    # an answer's claims of done actions against the turn's calls: the rules, and the model
    # where they cannot read the language ("model"), the rules alone, or not at all
    verify_claims: Literal["model", "rules", "off"] = "model"


class Fit(Protocol):
    """Keeps each model call of a turn inside the context window (see agent.window.TurnFit)."""

    @property
    def limit(self) -> int:
        """Prompt tokens above which the prompt is made smaller before a call."""
        ...

    def tokens(
        self, system: SystemPrompt, messages: Sequence[ChatMessage], tools: tuple[ToolSpec, ...]
    ) -> int: ...

    async def refit(
        self, overflow: LLMContextOverflow | None = None
    ) -> tuple[SystemPrompt, list[ChatMessage]]:
        """Compact the session now and rebuild the prompt with shorter tool results; after
        the provider refused the prompt (``overflow``), for a smaller one."""
        ...

    @property
    def note(self) -> str:
        """For the person, under the answer: what fitting the prompt did to their message
        (cut it), or ``""``."""
        ...


async def _nothing(_: object) -> None:
    return None


@dataclass(frozen=True, slots=True)
class TurnInputs:
    """Everything one turn's loop works on, prepared by :class:`agent.agent.Agent`.

    ``conversation`` is the turn's working copy (history, then this turn's messages): the
    loop appends each step to it and hands each step to ``checkpoint`` as soon as it exists,
    so a turn cut by a crash resumes from its last step. ``fit`` keeps every call inside the
    context window; without it prompts go out as they are."""

    system: SystemPrompt
    conversation: list[ChatMessage]
    tools: tuple[ToolSpec, ...]
    state: TurnState
    trace: TurnTrace
    charge: Charge
    context_for: ContextFactory
    checkpoint: Checkpoint = _nothing
    unattended: bool = False  # nobody is waiting: silence is a valid end
    check_in: bool = False  # a heartbeat's: it may end with a question for the owner
    # the reasons in the note of calls that failed unmentioned: the owner's and admins'
    # turns; a member is told only what failed (a reason can name the owner's address)
    explain_failures: bool = True
    on_text: TextSink | None = None  # answer text as the model writes it
    on_tool: ToolSink | None = None  # a tool's name just before it runs
    fit: Fit | None = None
    control: TurnControl | None = None  # a chat turn's handle: /stop and /status reach it
    steer: Steer | None = None  # follow-ups the person sent meanwhile, as checkpointed messages
