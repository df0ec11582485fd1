"""The tool-calling loop: ask the model, run the tools it asks for, repeat until it answers.

Every model response and tool result is handed to ``checkpoint`` as soon as it exists, so
a turn cut by a crash resumes from its last step instead of starting over. The loop is
bounded by ``max_iterations``; when the bound is hit the model gets one last call without
tools to answer with what it has.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from agent.llm.base import LLMProvider, TextSink
from agent.llm.types import (
    ChatMessage,
    LLMRequest,
    LLMResponse,
    SystemPrompt,
    ToolCall,
    ToolSpec,
    Usage,
)
from agent.tools.base import ToolContext, ToolResult
from agent.tools.executor import ToolExecutor

Checkpoint = Callable[[Sequence[ChatMessage]], Awaitable[None]]
ContextFactory = Callable[[ToolCall], ToolContext]

STEP_LIMIT_NOTE = (
    "You have reached the step limit for this turn. Do not call tools. Answer the user now "
    "with what you found so far, and say what is still missing."
)


@dataclass(slots=True)
class RunResult:
    text: str
    usage: Usage = field(default_factory=Usage)
    iterations: int = 0
    hit_step_limit: bool = False


def unanswered_calls(conversation: Sequence[ChatMessage]) -> list[ToolCall]:
    """Tool calls of the last assistant message that have no result yet (after a crash)."""
    answered: set[str] = set()
    for msg in reversed(conversation):
        if msg.role == "tool" and msg.tool_call_id:
            answered.add(msg.tool_call_id)
        elif msg.role == "assistant":
            return [c for c in msg.tool_calls if c.id not in answered]
        else:
            return []
    return []


def tool_message(call: ToolCall, result: ToolResult) -> ChatMessage:
    return ChatMessage(
        role="tool",
        content=result.content,
        tool_call_id=call.id,
        name=call.name,
        is_error=result.is_error,
        untrusted=result.untrusted,
    )


class Runner:
    def __init__(
        self,
        llm: LLMProvider,
        executor: ToolExecutor,
        *,
        llm_semaphore: asyncio.Semaphore,
        max_iterations: int = 20,
        max_tokens: int = 4_096,
        temperature: float | None = None,
    ) -> None:
        self.llm = llm
        self.executor = executor
        self._llm_slots = llm_semaphore
        self._max_iterations = max_iterations
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
        on_text: TextSink | None = None,
    ) -> RunResult:
        result = RunResult(text="")
        pending = unanswered_calls(conversation)
        if pending:
            await self._run_tools(pending, conversation, context_for, checkpoint)
        elif conversation and conversation[-1].role == "assistant":
            # The answer was decided just before an interruption; deliver it as it was.
            result.text = conversation[-1].content
            return result
        while result.iterations < self._max_iterations:
            result.iterations += 1
            response = await self.call_model(system, conversation, tools, on_text)
            result.usage += response.usage
            assistant = response.as_message()
            conversation.append(assistant)
            await checkpoint([assistant])
            if not response.tool_calls:
                result.text = response.text
                return result
            await self._run_tools(list(response.tool_calls), conversation, context_for, checkpoint)
        result.hit_step_limit = True
        nudge = ChatMessage(role="user", content=STEP_LIMIT_NOTE)
        response = await self.call_model(system, [*conversation, nudge], (), on_text)
        result.usage += response.usage
        final = ChatMessage(role="assistant", content=response.text)
        conversation.append(final)
        await checkpoint([final])
        result.text = response.text
        return result

    async def _run_tools(
        self,
        calls: Sequence[ToolCall],
        conversation: list[ChatMessage],
        context_for: ContextFactory,
        checkpoint: Checkpoint,
    ) -> None:
        for call in calls:
            outcome = await self.executor.execute(call, context_for(call))
            message = tool_message(call, outcome)
            conversation.append(message)
            await checkpoint([message])
