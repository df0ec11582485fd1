"""``/context``: what the next prompt of a chat is made of, and what the provider caches.

The parts are counted as the window counts them (estimates: about four characters a token):
the stable system prompt (identity, rules, bootstrap files, the skills index), the tool
schemas, the memory block, the conversation summary and the person's words kept beside it,
the rest of the dynamic part (the day, who is talking, pinned goals), the history, and the
images and files attached in it. What is cached comes from the chat's last turn as its
provider reported it: the prompt tokens read from its cache and written to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent.llm.types import ChatMessage, SystemPrompt, ToolSpec
from agent.tokens import estimate, message_tokens, tools_tokens


@dataclass(frozen=True, slots=True)
class Cached:
    """The last turn's prompt, as its provider reported it (summed over its model calls)."""

    input_tokens: int  # all of it, cached or not
    cache_read_tokens: int
    cache_write_tokens: int


@dataclass(frozen=True, slots=True)
class PromptReport:
    system: int  # the stable part
    tools: int
    tool_count: int
    memory: int
    summary: int  # and the person's words kept beside it
    other: int  # the rest of the dynamic part
    history: int
    messages: int
    images: int
    files: int
    window: int | None  # tokens (None: no compaction, no window known)
    cached: Cached | None  # the last turn's

    @property
    def total(self) -> int:
        return self.system + self.tools + self.memory + self.summary + self.other + self.history

    def render(self) -> str:
        rows = [
            ("system (identity, rules, files, skills)", self.system),
            (f"tools ({self.tool_count} schemas)", self.tools),
            ("memory", self.memory),
            ("summary and your words kept", self.summary),
            ("day, who, pinned", self.other),
            (f"history ({self.messages} messages)", self.history),
        ]
        lines = ["The next prompt, about:"]
        lines += [f"- {label}: {tokens:,} tokens" for label, tokens in rows]
        of = (
            f" of a {self.window:,}-token window ({100 * self.total // self.window}%)"
            if self.window
            else ""
        )
        lines.append(f"- total: {self.total:,} tokens{of}")
        if self.images or self.files:
            lines.append(f"- attachments in the history: {self.images} images, {self.files} files")
        cached = self.cached
        if cached is None:
            lines.append("Cache: no turn reported yet.")
        elif not (cached.cache_read_tokens or cached.cache_write_tokens):
            lines.append("Cache: the provider reported no prompt caching on the last turn.")
        else:
            share = 100 * cached.cache_read_tokens // max(1, cached.input_tokens)
            lines.append(
                f"Cache, last turn: of its {cached.input_tokens:,} prompt tokens (all its model "
                f"calls), {cached.cache_read_tokens:,} were read from the provider's cache "
                f"({share}%) and {cached.cache_write_tokens:,} written to it."
            )
        lines.append(
            "Tools and the stable system part stay the same from turn to turn (cached); the "
            "rest changes on a new day or after a summary."
        )
        return "\n".join(lines)


def prompt_report(
    system: SystemPrompt,
    *,
    memory: str,
    summary: str,
    tools: Sequence[ToolSpec],
    history: Sequence[ChatMessage],
    window: int | None,
    cached: Cached | None,
) -> PromptReport:
    dynamic = estimate(system.dynamic)
    memory_tokens, summary_tokens = estimate(memory), estimate(summary)
    return PromptReport(
        system=estimate(system.stable),
        tools=tools_tokens(tools),
        tool_count=len(tools),
        memory=memory_tokens,
        summary=summary_tokens,
        other=max(0, dynamic - memory_tokens - summary_tokens),
        history=sum(message_tokens(m) for m in history),
        messages=len(history),
        images=sum(len(m.images) for m in history),
        files=sum(len(m.files) for m in history),
        window=window,
        cached=cached,
    )
