"""Provider-neutral chat messages, tool specs and responses.

History is stored in this shape; each provider converts it to its own wire format at the
edge. A tool call keeps the model's raw argument string so a malformed call can be shown
back to the model exactly as it was written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

MessageRole = Literal["user", "assistant", "tool"]  # who says a message (a person is a Role)


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image handed to a vision-capable model, read from a local file at send time."""

    path: str
    mime_type: str = "image/jpeg"


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: MessageRole
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # on tool results
    name: str | None = None  # tool name, on tool results
    images: tuple[ImagePart, ...] = ()
    is_error: bool = False  # a tool result that reports a failure
    # content from outside (web page, email, tool output, others' words); on an answer in
    # history: written by a turn after it read some (gateway.store.history.shaped_by_outside)
    untrusted: bool = False
    # Local files that came with a user message (attachments); never sent to the provider,
    # they decide which attachments the conversation's file tools may open.
    files: tuple[str, ...] = ()
    # Who wrote a user message ("channel:sender id"), for the owner reading the transcript
    # in the control center; never sent to the provider ("": not a person's message).
    sender: str = ""

    def to_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            body["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            body["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            body["name"] = self.name
        if self.images:
            body["images"] = [{"path": i.path, "mime_type": i.mime_type} for i in self.images]
        if self.is_error:
            body["is_error"] = True
        if self.untrusted:
            body["untrusted"] = True
        if self.files:
            body["files"] = list(self.files)
        if self.sender:
            body["sender"] = self.sender
        return body

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> ChatMessage:
        return cls(
            role=body["role"],
            content=body.get("content", ""),
            tool_calls=tuple(ToolCall(**c) for c in body.get("tool_calls", ())),
            tool_call_id=body.get("tool_call_id"),
            name=body.get("name"),
            images=tuple(ImagePart(**i) for i in body.get("images", ())),
            is_error=body.get("is_error", False),
            untrusted=body.get("untrusted", False),
            files=tuple(body.get("files", ())),
            sender=body.get("sender", ""),
        )


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SystemPrompt:
    """``stable`` changes rarely and is cached by the provider; ``dynamic`` follows it."""

    stable: str
    dynamic: str = ""

    @property
    def text(self) -> str:
        return f"{self.stable}\n\n{self.dynamic}" if self.dynamic else self.stable


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of model calls as the provider reported them (``input_tokens`` include the
    cached and cache-written ones), and what they cost."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    # Of input + output, how many we counted (tiktoken) because the server reported none.
    estimated_tokens: int = 0
    # US dollars at the model's price ([llm.prices]), set by agent.llm.metered; None: the
    # model has no price.
    cost_usd: float | None = None

    def __add__(self, other: Usage) -> Usage:
        costs = [c for c in (self.cost_usd, other.cost_usd) if c is not None]
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.estimated_tokens + other.estimated_tokens,
            sum(costs) if costs else None,
        )


@dataclass(frozen=True, slots=True)
class LLMRequest:
    system: SystemPrompt
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 4_096
    temperature: float | None = None


@dataclass(frozen=True, slots=True)
class Failover:
    """A model of a fallback chain that did not answer one call, and why."""

    model: str  # "provider model" as configured
    error: str  # the LLMError type, e.g. LLMUnavailable
    reason: str  # the cause, in the words the notice would use
    status: int | None = None
    cooling: bool = False  # not called: it failed recently and sits out its cooldown


@dataclass(frozen=True, slots=True)
class LLMResponse:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)
    model: str = ""  # the model that answered, when a fallback chain chose it
    failovers: tuple[Failover, ...] = ()  # models tried (or skipped) before it

    def as_message(self) -> ChatMessage:
        return ChatMessage(role="assistant", content=self.text, tool_calls=self.tool_calls)
