"""The one seam between the agent and a model provider."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from agent.llm.types import LLMRequest, LLMResponse

TextSink = Callable[[str], Awaitable[None]]


class LLMProvider(Protocol):
    """Send one request, get one complete response.

    With ``on_text`` the provider streams and calls it with each text fragment as it
    arrives; the returned response is the same either way. Failures raise
    :class:`agent.llm.errors.LLMError` subclasses, never SDK exceptions.
    """

    model: str

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse: ...

    async def aclose(self) -> None: ...
