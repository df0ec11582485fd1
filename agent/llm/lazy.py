"""Start without waiting for the model SDK.

Importing ``openai`` or ``anthropic`` takes most of a second on a small machine. The
gateway is ready to accept (and journal) messages before that: the SDK is imported on a
worker thread right after start, and the first model call waits for it only if it has
not finished yet.
"""

from __future__ import annotations

import asyncio
import importlib

from agent.llm.base import LLMProvider, TextSink
from agent.llm.factory import configuration_problem, create_provider, provider_module
from agent.llm.sight import Sight
from agent.llm.types import LLMRequest, LLMResponse
from gateway.config.settings import LLMSettings


class LazyProvider:
    def __init__(
        self, settings: LLMSettings, *, setting: str = "llm", sight: Sight | None = None
    ) -> None:
        self.model = settings.model
        self.sight = sight or Sight(settings.vision)  # whether it is shown pictures
        self._settings = settings
        self._setting = setting  # where it is configured (errors name it)
        self._provider: LLMProvider | None = None
        self._lock = asyncio.Lock()
        self._warming: asyncio.Task[None] | None = None
        # settings do not change under a provider (a change builds a new one)
        self._configured = configuration_problem(settings, setting) is None

    def warm(self) -> None:
        """Begin importing the SDK in the background (idempotent)."""
        if self._warming is None and self._provider is None:
            module = provider_module(self._settings)
            self._warming = asyncio.create_task(asyncio.to_thread(importlib.import_module, module))  # type: ignore[arg-type]

    async def provider(self) -> LLMProvider:
        if self._provider is None:
            async with self._lock:
                if self._provider is None:
                    if self._warming is not None:
                        await self._warming  # the import, on a worker thread
                    self._provider = create_provider(
                        self._settings, setting=self._setting, sight=self.sight
                    )
        return self._provider

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        if not self._configured and (
            problem := configuration_problem(self._settings, self._setting)
        ):
            raise problem  # at once: no SDK import, no request, no retries
        return await (await self.provider()).complete(request, on_text=on_text)

    async def aclose(self) -> None:
        if self._warming is not None and not self._warming.done():
            await asyncio.gather(self._warming, return_exceptions=True)
        if self._provider is not None:
            await self._provider.aclose()
