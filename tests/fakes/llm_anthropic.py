"""The Anthropic Messages half of the fake LLM server (see tests.fakes.llm), with simulated
prompt caching: a prefix ending at a cache breakpoint is written, a later request whose
prefix matches a written one reads it."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from aiohttp import web


class AnthropicWire:
    """Mixed into FakeLLM: serves /v1/messages from the same script."""

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        recorded, step = await self._prepare(request)
        if step.status != 200:
            message = (step.error_body or {}).get("error", {}).get("message", "error")
            kind = (
                "rate_limit_error"
                if step.status == 429
                else "overloaded_error"
                if step.status >= 500
                else "invalid_request_error"
            )
            return web.json_response(
                {"type": "error", "error": {"type": kind, "message": message}},
                status=step.status,
                headers=step.headers,
            )
        content: list[dict[str, Any]] = []
        if step.text:
            content.append({"type": "text", "text": step.text})
        for name, args in step.calls:
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(self._ids)}",
                    "name": name,
                    "input": json.loads(args),
                }
            )
        stop = (
            "max_tokens"
            if step.finish_reason == "length"
            else "tool_use"
            if step.calls
            else "end_turn"
        )
        uncached, read, written = self._cache_usage(recorded.body)
        self.usage_totals["input"] += uncached
        self.usage_totals["read"] += read
        self.usage_totals["written"] += written
        usage = {
            "input_tokens": uncached,
            "output_tokens": max(1, len(step.text) // 4),
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        }
        message = {
            "id": f"msg_{next(self._ids)}",
            "type": "message",
            "role": "assistant",
            "model": recorded.body.get("model", "fake"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not recorded.body.get("stream"):
            text = "".join(b.get("text", "") for b in content if b["type"] == "text")
            await asyncio.sleep(
                step.chunk_delay * max(0, len(pieces(text, step.stream_chunks)) - 1)
            )
            return web.json_response(message)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)

        async def event(name: str, data: dict[str, Any]) -> None:
            await response.write(
                f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()
            )

        await event("message_start", {"message": {**message, "content": [], "stop_reason": None}})
        for index, block in enumerate(content):
            if block["type"] == "text":
                await event(
                    "content_block_start",
                    {"index": index, "content_block": {"type": "text", "text": ""}},
                )
                for number, piece in enumerate(pieces(block["text"], step.stream_chunks)):
                    if number and step.chunk_delay:
                        await asyncio.sleep(step.chunk_delay)  # the model writing
                    await event(
                        "content_block_delta",
                        {"index": index, "delta": {"type": "text_delta", "text": piece}},
                    )
            else:
                await event(
                    "content_block_start", {"index": index, "content_block": {**block, "input": {}}}
                )
                for piece in pieces(json.dumps(block["input"]), 2):
                    await event(
                        "content_block_delta",
                        {
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        },
                    )
            await event("content_block_stop", {"index": index})
        await event(
            "message_delta",
            {
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        await event("message_stop", {})
        await response.write_eof()
        return response

    def _cache_usage(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """(uncached, cache read, cache written) input tokens, simulating prompt caching:
        a prefix ending at a breakpoint is written; a later request reads the longest
        written prefix that ends at one of its breakpoints or up to 20 blocks before one
        (Anthropic looks back that far, no further)."""
        blocks = _blocks(body)
        sizes = [max(1, len(text) // 4) for text, _ in blocks]
        digest = hashlib.sha256()
        prefix_hashes = []
        for text, _ in blocks:
            digest.update(text.encode())
            prefix_hashes.append(digest.copy().hexdigest())
        breakpoints = [i for i, (_, marked) in enumerate(blocks) if marked]
        looked_at = {i for b in breakpoints for i in range(max(0, b - LOOKBACK), b + 1)}
        read_upto = max(
            (
                i + 1
                for i, h in enumerate(prefix_hashes)
                if i in looked_at and h in self.cached_prefixes
            ),
            default=0,
        )
        # a prefix shorter than the provider's minimum is never cached
        cacheable = [i for i in breakpoints if sum(sizes[: i + 1]) >= MIN_CACHEABLE]
        write_upto = max(cacheable, default=-1) + 1
        for i in cacheable:
            self.cached_prefixes.add(prefix_hashes[i])
        read = sum(sizes[:read_upto])
        written = sum(sizes[read_upto:write_upto]) if write_upto > read_upto else 0
        return sum(sizes) - read - written, read, written


LOOKBACK = 20  # blocks before a breakpoint where a cached prefix is still found
MIN_CACHEABLE = 1024  # tokens: shorter prefixes are not cached (Anthropic's Sonnet models)


def _blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """A request as Anthropic caches it: tools, system, then message blocks, in order;
    each (canonical JSON without cache_control, whether it carries a breakpoint)."""
    out: list[tuple[str, bool]] = []

    def add(block: dict[str, Any], role: str = "") -> None:
        marked = "cache_control" in block
        clean = {k: v for k, v in block.items() if k != "cache_control"}
        out.append((role + json.dumps(clean, sort_keys=True), marked))

    for tool in body.get("tools", []):
        add(tool)
    system = body.get("system", [])
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system:
        add(block)
    for message in body.get("messages", []):
        content = message["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            add(block, message["role"])
    return out


def pieces(value: str, count: int) -> list[str]:
    if not value:
        return []
    size = max(1, -(-len(value) // count))
    return [value[i : i + size] for i in range(0, len(value), size)]
