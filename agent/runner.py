"""The model and the tools an agent works with, and the loop that drives them.

:class:`Runner` owns the provider (calls are bounded by a shared semaphore) and the tool
executor; :meth:`Runner.run` hands one turn to :class:`agent.turn_loop.TurnLoop`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from agent.guards.trace import TurnTrace
from agent.llm.base import LLMProvider, TextSink
from agent.llm.types import ChatMessage, LLMRequest, LLMResponse, SystemPrompt, ToolSpec
from agent.tools.base import TurnState
from agent.tools.executor import ToolExecutor
from agent.turn import ToolSink
from agent.turn_loop import (
    Checkpoint,
    ContextFactory,
    GuardSettings,
    Rebuild,
    RunResult,
    TurnLoop,
    tool_message,
)

__all__ = ["GuardSettings", "RunResult", "Runner", "tool_message"]


class Runner:
    def __init__(
        self,
        llm: LLMProvider,
        executor: ToolExecutor,
        *,
        llm_semaphore: asyncio.Semaphore,
        guards: GuardSettings | None = None,
        max_tokens: int = 4_096,
        temperature: float | None = None,
    ) -> None:
        self.llm = llm
        self.executor = executor
        self.guards = guards or GuardSettings()
        self._llm_slots = llm_semaphore
        self._max_tokens = max_tokens
        self._temperature = temperature

    async def call_model(
        self,
        system: SystemPrompt,
        conversation: Sequence[ChatMessage],
        tools: tuple[ToolSpec, ...],
        on_text: TextSink | None = None,
    ) -> LLMResponse:
        request = LLMRequest(
            system, tuple(conversation), tools, self._max_tokens, self._temperature
        )
        async with self._llm_slots:
            return await self.llm.complete(request, on_text=on_text)

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
        autopilot: bool = False,
        on_text: TextSink | None = None,
        on_overflow: Rebuild | None = None,
        on_tool: ToolSink | None = None,
    ) -> RunResult:
        """Run the loop. ``on_overflow`` rebuilds a shorter prompt after a context-overflow
        error; the model call is retried once with it."""
        turn = TurnLoop(
            self,
            system,
            conversation,
            tools,
            context_for,
            checkpoint,
            state,
            trace,
            autopilot,
            on_text,
        )
        turn.on_overflow = on_overflow
        turn.on_tool = on_tool
        return await turn.run()
