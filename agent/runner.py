"""The model and the tools an agent works with, and the loop that drives them.

:class:`Runner` owns the agent's model (a :class:`agent.llm.metered.MeteredModel`: behind
its endpoint's gateway-wide concurrency cap, fitted to the window, metered) and the tool
executor; :meth:`Runner.run` hands one turn to :class:`agent.turn_loop.TurnLoop`.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.guards.trace import TurnTrace
from agent.llm.base import TextSink
from agent.llm.metered import Charge, MeteredModel, Purpose
from agent.llm.types import ChatMessage, LLMRequest, LLMResponse, SystemPrompt, ToolSpec
from agent.tools.base import TurnState
from agent.tools.executor import ToolExecutor
from agent.turn import ToolSink
from agent.turn_loop import TurnLoop
from agent.turn_steps import (
    Checkpoint,
    ContextFactory,
    Fit,
    GuardSettings,
    RunResult,
    tool_message,
)

__all__ = ["GuardSettings", "RunResult", "Runner", "tool_message"]


class Runner:
    def __init__(
        self,
        model: MeteredModel,
        executor: ToolExecutor,
        *,
        guards: GuardSettings | None = None,
        max_tokens: int = 4_096,
        temperature: float | None = None,
    ) -> None:
        self.model = model
        self.executor = executor
        self.guards = guards or GuardSettings()
        self.max_tokens = max_tokens  # asked for per call, lowered when the window is tight
        self._temperature = temperature

    @property
    def model_name(self) -> str:
        return self.model.model

    async def call_model(
        self,
        system: SystemPrompt,
        conversation: Sequence[ChatMessage],
        tools: tuple[ToolSpec, ...],
        on_text: TextSink | None = None,
        *,
        purpose: Purpose = Purpose.TURN,
        charge: Charge,
    ) -> LLMResponse:
        request = LLMRequest(system, tuple(conversation), tools, self.max_tokens, self._temperature)
        return await self.model.complete(request, purpose=purpose, charge=charge, on_text=on_text)

    async def run(
        self,
        *,
        system: SystemPrompt,
        conversation: list[ChatMessage],
        tools: tuple[ToolSpec, ...],
        context_for: ContextFactory,
        checkpoint: Checkpoint,
        state: TurnState,
        trace: TurnTrace,
        charge: Charge,
        unattended: bool = False,
        on_text: TextSink | None = None,
        fit: Fit | None = None,
        on_tool: ToolSink | None = None,
    ) -> RunResult:
        """Run the loop. ``fit`` keeps every call inside the context window (shortening old
        tool results, compacting); without it prompts go out as they are."""
        turn = TurnLoop(
            self,
            system,
            conversation,
            tools,
            context_for,
            checkpoint,
            state,
            trace,
            unattended,
            on_text,
            charge,
            fit,
        )
        turn.on_tool = on_tool
        return await turn.run()
