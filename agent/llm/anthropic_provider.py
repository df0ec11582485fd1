"""Anthropic Messages API through the official ``anthropic`` SDK, with prompt caching.

Cache breakpoints sit on the last tool, on the stable part of the system prompt and on the
newest message, so a multi-turn chat (and each step of a tool loop) pays mostly cached
input. Imported only when the provider is configured.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import anthropic

# The SDK waits between its retries with anyio, whose asyncio backend it imports on first
# use: imported here, so a retry after "too many open files" does not fail on opening it.
import anyio._backends._asyncio  # noqa: F401
from anthropic.types import Message

from agent.llm.base import TextSink
from agent.llm.diagnose import (
    Endpoint,
    bad_request,
    connection_failed,
    not_an_api,
    not_found,
    out_of_descriptors,
    refused_key,
    server_error,
    unreadable,
)
from agent.llm.errors import (
    LLMContextOverflow,
    LLMError,
    LLMRateLimited,
    is_context_overflow,
    parse_retry_after,
    window_from_error,
)
from agent.llm.images import image_base64
from agent.llm.sight import Sight
from agent.llm.types import ChatMessage, LLMRequest, LLMResponse, ToolCall, Usage
from gateway.core.urls import basic_auth

_CACHE = {"type": "ephemeral"}
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class AnthropicProvider:
    def __init__(
        self,
        *,
        model: str,
        api_key: str | None,
        base_url: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        sight: Sight | None = None,
        setting: str = "llm",
    ) -> None:
        self.model = model
        self._sight = sight or Sight()  # llm.vision
        # A user name and password in the URL (a proxy's) go as HTTP basic auth.
        base_url, basic = basic_auth(base_url)
        self._at = Endpoint(
            "anthropic",
            base_url,
            model,
            timeout,
            has_key=bool(api_key),
            setting=setting,
            password=basic is not None,
        )
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key or "no-key",
            base_url=base_url,
            default_headers={"Authorization": basic} if basic else None,
            timeout=timeout,
            max_retries=max_retries,
            # aiohttp instead of the default httpx transport: ~0.5 ms less CPU per call.
            http_client=anthropic.DefaultAioHttpClient(timeout=timeout),
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        system: list[dict[str, Any]] = [
            {"type": "text", "text": request.system.stable, "cache_control": _CACHE}
        ]
        if request.system.dynamic:
            system.append({"type": "text", "text": request.system.dynamic})
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "system": system,
            "messages": self._wire_messages(request.messages),
        }
        if request.tools:
            tools = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
            tools[-1]["cache_control"] = _CACHE
            params["tools"] = tools
        if request.temperature is not None:
            params["temperature"] = request.temperature
        try:
            if on_text is None:
                # client.post rather than messages.create: skips the SDK's per-message
                # request "transform"; our parameters are plain JSON already.
                message = await self._client.post("/v1/messages", body=params, cast_to=Message)
                return _from_message(message, self._at)
            async with self._client.messages.stream(**params) as stream:
                kind = stream.response.headers.get("content-type", "")
                if "event-stream" not in kind:  # the SDK would find no events, and assert
                    await stream.response.aread()
                    raise not_an_api(self._at, None if "json" in kind else stream.response.text)
                async for text in stream.text_stream:
                    await on_text(text)
                final = await stream.get_final_message()
            if final.stop_reason is None:  # no message_stop: the stream was cut short
                raise unreadable(self._at, "the stream ended before the model finished its answer")
            return _from_message(final, self._at)
        except anthropic.APIError as exc:
            raise _translate(exc, self._at) from exc
        except ValueError as exc:  # the SDK could not decode a 200's body
            raise unreadable(self._at, f"not valid JSON: {exc}") from exc
        except OSError as exc:  # raised past the SDK: no descriptor for what it opens
            if not out_of_descriptors(exc):
                raise
            raise connection_failed(exc, self._at, timed_out=False) from exc

    def _wire_messages(self, messages: tuple[ChatMessage, ...]) -> list[dict[str, Any]]:
        wire: list[dict[str, Any]] = []
        for msg in messages:
            role = "assistant" if msg.role == "assistant" else "user"
            blocks = self._blocks(msg)
            if not blocks:
                continue
            if wire and wire[-1]["role"] == role:
                wire[-1]["content"].extend(blocks)
            else:
                wire.append({"role": role, "content": blocks})
        if wire and wire[0]["role"] != "user":
            wire.insert(0, {"role": "user", "content": [{"type": "text", "text": "(continued)"}]})
        if wire:
            last = dict(wire[-1]["content"][-1])
            last["cache_control"] = _CACHE
            wire[-1]["content"][-1] = last
        return wire

    def _blocks(self, msg: ChatMessage) -> list[dict[str, Any]]:
        if msg.role == "tool":
            images = self._images(msg)
            content: str | list[dict[str, Any]] = msg.content or "(empty)"
            if images:  # a screenshot from web_fetch: shown with the result it belongs to
                content = [{"type": "text", "text": content}, *images]
            return [
                {
                    "type": "tool_result",
                    "tool_use_id": wire_id(msg.tool_call_id or ""),
                    "content": content,
                    "is_error": msg.is_error,
                }
            ]
        blocks: list[dict[str, Any]] = []
        if msg.content:
            blocks.append({"type": "text", "text": msg.content})
        if msg.role == "assistant":
            blocks.extend(
                {
                    "type": "tool_use",
                    "id": wire_id(c.id),
                    "name": c.name,
                    "input": _arguments(c.arguments),
                }
                for c in msg.tool_calls
            )
            return blocks
        blocks.extend(self._images(msg))
        return blocks

    def _images(self, msg: ChatMessage) -> list[dict[str, Any]]:
        blocks = []
        for image in msg.images if msg.images and self._sight.sees else ():
            data = image_base64(image)
            if data is not None:
                source = {"type": "base64", "media_type": image.mime_type, "data": data}
                blocks.append({"type": "image", "source": source})
        return blocks


def wire_id(call_id: str) -> str:
    """A tool call id Anthropic accepts (letters, digits, ``_``, ``-``). Ids written by an
    OpenAI-compatible server (a turn that failed over) may hold other characters, such as
    ``functions.search:0``; the same id maps to the same wire id in the call and its result."""
    if _ID.fullmatch(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode()).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9_-]', '_', call_id)[:40]}_{digest}"


def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _from_message(message: object, at: Endpoint) -> LLMResponse:
    """The answer in a message, which the SDK hands back as the body's text when it is not
    JSON (a web page at the base URL), and with ``content`` unset when it is JSON of another
    kind: neither is an answer, and both are said as such."""
    if isinstance(message, str):
        raise not_an_api(at, message)
    # The SDK builds the object without validating it: any field may be missing or None.
    answer: Any = message
    if not isinstance(message, Message) or getattr(answer, "content", None) is None:
        raise not_an_api(at, None)
    text: list[str] = []
    calls: list[ToolCall] = []
    for block in answer.content:
        if block.type == "text":
            text.append(block.text)
        elif block.type == "tool_use":
            calls.append(
                ToolCall(block.id, block.name, json.dumps(block.input, ensure_ascii=False))
            )
    raw = answer.usage
    usage = Usage(
        input_tokens=(raw.input_tokens or 0)
        + (getattr(raw, "cache_read_input_tokens", 0) or 0)
        + (getattr(raw, "cache_creation_input_tokens", 0) or 0),
        output_tokens=raw.output_tokens or 0,
        cache_read_tokens=getattr(raw, "cache_read_input_tokens", 0) or 0,
        cache_write_tokens=getattr(raw, "cache_creation_input_tokens", 0) or 0,
    )
    return LLMResponse("".join(text), tuple(calls), answer.stop_reason or "end_turn", usage)


def _translate(exc: anthropic.APIError, at: Endpoint) -> LLMError:
    status = getattr(exc, "status_code", None)
    message = str(exc)
    if isinstance(exc, anthropic.RateLimitError):
        return LLMRateLimited(message, retry_after=parse_retry_after(exc.response.headers))
    if isinstance(exc, anthropic.AuthenticationError | anthropic.PermissionDeniedError):
        return refused_key(at, status, message)
    if isinstance(exc, anthropic.APIConnectionError):  # also APITimeoutError: no HTTP answer
        return connection_failed(exc, at, timed_out=isinstance(exc, anthropic.APITimeoutError))
    if isinstance(exc, anthropic.NotFoundError):
        return not_found(at, message)
    if isinstance(exc, anthropic.BadRequestError) and is_context_overflow(message):
        return LLMContextOverflow(message, status_code=status, window=window_from_error(message))
    if isinstance(status, int) and status >= 500:
        return server_error(at, status, message)
    return bad_request(at, status, message)
