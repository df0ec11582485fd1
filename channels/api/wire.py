"""The OpenAI Chat Completions wire format, as much of it as Switchboard answers.

A request names the agent as its ``model`` and carries the conversation as ``messages``.
Clients such as Open WebUI resend the whole conversation every time; the session already
holds it, so only the last message, which must be the user's, is new. Its text parts are
read (images and files are not passed on). Tools run on the server: ``tools`` and
``tool_choice`` are ignored, and no tool call ever goes back to the client.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

MAX_TEXT_CHARS = 100_000


class BadRequest(Exception):
    """The request cannot be answered; the message says why (for the client)."""

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.param = param
        self.code = code


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: str
    text: str  # the new user message
    stream: bool = False
    user: str | None = None  # the client's end user: names the session


def parse_chat(body: Any) -> ChatRequest:
    """The part of a ``/v1/chat/completions`` body that matters, or :class:`BadRequest`."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model is required: the name of an agent (GET /v1/models)", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list", param="messages")
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        raise BadRequest(
            "the last message must be the user's (the session keeps the conversation; "
            "send the new user message last)",
            param="messages",
        )
    text = content_text(last.get("content"))
    if not text.strip():
        raise BadRequest("the last user message has no text", param="messages")
    if len(text) > MAX_TEXT_CHARS:
        raise BadRequest(f"the message is over {MAX_TEXT_CHARS} characters", param="messages")
    if body.get("n") not in (None, 1):
        raise BadRequest("only n = 1 is supported", param="n")
    user = body.get("user")
    return ChatRequest(
        model=model,
        text=text,
        stream=bool(body.get("stream")),
        user=user if isinstance(user, str) and user else None,
    )


def content_text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def error_body(
    message: str, kind: str, *, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(
    status: int,
    message: str,
    kind: str = "invalid_request_error",
    *,
    retry: bool = False,
    code: str | None = None,
    param: str | None = None,
) -> web.Response:
    """An error in OpenAI's shape. The official SDKs retry 409, 429 and 5xx on their own
    (twice by default), and a retry of a request that was taken would start its work again:
    so every error says ``x-should-retry: false`` unless ``retry`` (nothing was taken: the
    gateway is stopping, its disk is full), where a retry is what the client should do."""
    return web.json_response(
        error_body(message, kind, code=code, param=param),
        status=status,
        headers=None if retry else {"x-should-retry": "false"},
    )


def model_list(agents: list[str], created: int) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {"id": agent, "object": "model", "created": created, "owned_by": "switchboard"}
            for agent in agents
        ],
    }


def completion(completion_id: str, model: str, text: str) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": None,
    }


def chunk(
    completion_id: str, model: str, delta: dict[str, Any], finish_reason: str | None = None
) -> bytes:
    """One server-sent event of a streamed answer."""
    data = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
    }
    return sse(data)


def sse(
    data: dict[str, Any] | str, *, event: str | None = None, event_id: int | None = None
) -> bytes:
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if event is not None:
        lines.append(f"event: {event}")
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    lines.extend(f"data: {line}" for line in payload.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


def event_stream() -> web.StreamResponse:
    """A response of server-sent events (prepare it, then write :func:`sse` events)."""
    return web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",  # proxies (nginx) must not hold the events back
        }
    )


DONE = b"data: [DONE]\n\n"
KEEP_ALIVE = b": keep-alive\n\n"
