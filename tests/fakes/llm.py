"""A scripted fake of the OpenAI Chat Completions and Anthropic Messages APIs, and of
OpenAI's images endpoint.

The real ``openai`` and ``anthropic`` SDKs talk to it over HTTP on 127.0.0.1. Tests queue
steps (a text answer, tool calls, an HTTP error, a held response) that are served in order;
when the script is empty a ``responder`` function decides. Every request is recorded;
with ``web_page`` set, every request gets that HTML page instead (a base URL that is no API).
``/v1/images/generations`` answers with :data:`PICTURE` (as base64, or as an address to
fetch, ``image_answer``) or with an error, and records each request in ``pictures``.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from aiohttp import web

from tests.fakes.llm_anthropic import AnthropicWire, pieces

ServerKind = Literal[
    "llama.cpp", "llama-cpp-python", "ollama", "ollama-default", "vllm", "lm-studio"
]
SIGN_IN_PAGE = (
    "<!DOCTYPE html>\n<html><head><title>Sign in</title></head>"
    '<body><form method="post">Password <input type="password"></form></body></html>'
)
# A 1x1 PNG: what the fake images endpoint makes.
PICTURE = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


@dataclass(frozen=True)
class Step:
    text: str = ""
    calls: tuple[tuple[str, str], ...] = ()  # (tool name, raw JSON arguments)
    status: int = 200
    error_body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    gate: asyncio.Event | None = None  # hold the response until this is set
    delay: float = 0.0
    stream_chunks: int = 3
    # Faults (OpenAI wire): a 200 with this body instead of an answer; another finish
    # reason; a stream that ends after this many pieces of text (cleanly, or by a reset).
    raw_body: bytes | None = None
    finish_reason: str | None = None
    cut_after: int | None = None
    cut_by_reset: bool = False
    # a stream that sends this error event after its first piece of text, then ends
    stream_error: dict[str, Any] | None = None
    chunk_delay: float = 0.0  # seconds between two streamed pieces of the text
    # With ``gate``: stream this many pieces of the text, then hold the rest until the gate is
    # set (a model that stops writing for a while), instead of holding the whole response.
    pause_after: int | None = None


def streamed(content: str, *, chunks: int, over: float) -> Step:
    """A text answer that, when streamed, arrives in ``chunks`` pieces spread over ``over`` s."""
    return Step(text=content, stream_chunks=chunks, chunk_delay=over / max(1, chunks - 1))


def writing_time(step: Step) -> float:
    """How long the model takes to write ``step``'s text (streamed or not)."""
    return step.chunk_delay * max(0, len(pieces(step.text, step.stream_chunks)) - 1)


def text(content: str, *, delay: float = 0.0) -> Step:
    return Step(text=content, delay=delay)


def calls(*pairs: tuple[str, dict[str, Any] | str], content: str = "") -> Step:
    encoded = tuple(
        (name, args if isinstance(args, str) else json.dumps(args)) for name, args in pairs
    )
    return Step(text=content, calls=encoded)


def error(
    status: int,
    message: str = "fake error",
    *,
    retry_after_ms: int | None = None,
    code: str | None = None,
) -> Step:
    headers = {"retry-after-ms": str(retry_after_ms)} if retry_after_ms is not None else {}
    body = {"error": {"message": message, "type": "fake_error", "param": None, "code": code}}
    return Step(status=status, error_body=body, headers=headers)


def held(gate: asyncio.Event, content: str = "late answer") -> Step:
    return Step(text=content, gate=gate)


@dataclass
class Recorded:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    first_text_at: float | None = None  # when the stream's first words were written (monotonic)
    last_chunk_at: float | None = None  # when the stream's last piece was written (monotonic)

    @property
    def user_texts(self) -> list[str]:
        """Text of every user message as the person wrote it, in order (both wire formats):
        without the time each message carries or the guidance kept with it (``raw_user_texts``
        has them)."""
        return [as_written(text) for text in self.raw_user_texts]

    @property
    def raw_user_texts(self) -> list[str]:
        """Text of every user message as the model is shown it."""
        out = []
        for msg in self.body.get("messages", []):
            if msg.get("role") != "user":
                continue
            content = msg.get("content")
            if isinstance(content, str):
                out.append(content)
            elif isinstance(content, list):
                out.extend(b.get("text", "") for b in content if b.get("type") == "text")
        return out

    @property
    def image_parts(self) -> list[dict[str, Any]]:
        """The pictures the request hands the model (OpenAI's ``image_url`` parts)."""
        return [
            part
            for msg in self.body.get("messages", [])
            if isinstance(msg.get("content"), list)
            for part in msg["content"]
            if part.get("type") == "image_url"
        ]

    @property
    def last_user_text(self) -> str:
        texts = self.user_texts
        return texts[-1] if texts else ""

    @property
    def system_text(self) -> str:
        if "system" in self.body:
            system = self.body["system"]
            return system if isinstance(system, str) else "\n".join(b["text"] for b in system)
        first = self.body.get("messages", [{}])[0]
        return first.get("content", "") if first.get("role") == "system" else ""

    @property
    def tool_names(self) -> list[str]:
        return [
            t["function"]["name"] if "function" in t else t["name"]
            for t in self.body.get("tools", [])
        ]

    @property
    def tool_results(self) -> list[str]:
        """Contents of tool results in the request (both wire formats)."""
        out = []
        for msg in self.body.get("messages", []):
            if msg.get("role") == "tool":
                out.append(msg.get("content", ""))
            elif isinstance(msg.get("content"), list):
                out.extend(
                    _text_of(b.get("content", ""))
                    for b in msg["content"]
                    if b.get("type") == "tool_result"
                )
        return out

    @property
    def images(self) -> list[tuple[int, str]]:
        """Every image in the request: (message index, where: "user" or "tool_result")."""
        found = []
        for index, msg in enumerate(self.body.get("messages", [])):
            content = msg.get("content")
            for block in content if isinstance(content, list) else ():
                if block.get("type") in ("image", "image_url"):
                    found.append((index, "user"))
                elif block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                    found.extend(
                        (index, "tool_result")
                        for inner in block["content"]
                        if inner.get("type") == "image"
                    )
        return found


def _text_of(content: str | list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def _text_of(content: str | list[dict[str, Any]]) -> str:
    """A tool result's text (Anthropic sends a list of blocks when there are pictures)."""
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


Responder = Callable[[Recorded], Step | Awaitable[Step]]


async def _cut(
    request: web.Request, response: web.StreamResponse, *, reset: bool
) -> web.StreamResponse:
    """End a stream mid-answer: a clean end of the body without a finish reason or
    ``[DONE]`` (a proxy giving up), or a dropped connection (a crashed server)."""
    if reset and request.transport is not None:
        request.transport.abort()
        return response
    await response.write_eof()
    return response


_STAMP = re.compile(
    r"(?m)^\[\d\d:\d\d(?: on [a-z]+)?\] "
)  # "[09:14 on slack] ": where, across channels
_GUIDANCE = "\n\n[guidance for this request]\n"


def as_written(text: str) -> str:
    """A user message's text without the time stamped on it (at the start of its lines) and
    the guidance kept after it (agent/context.py)."""
    return _STAMP.sub("", text.split(_GUIDANCE, 1)[0])


def word_vector(text: str, dims: int = 32) -> list[float]:
    """A text's vector for the fake embeddings endpoint: the sum of its words' directions."""
    vector = [0.0] * dims
    for word in re.findall(r"\w+", text.lower()):
        seed = sum(ord(c) * (i + 1) for i, c in enumerate(word))
        for d in range(dims):
            vector[d] += ((seed * (d + 7) * 2654435761) % 1000) / 500 - 1
    return vector


def answer_limit(body: dict[str, Any]) -> int:
    """The answer's length a Chat Completions request asks for (0: none), in either word."""
    return int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)


def _reasoning_refusal(body: dict[str, Any]) -> web.Response | None:
    """OpenAI's 400 for what a reasoning model does not take, or None."""
    if "max_tokens" in body:
        message = (
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead."
        )
        param, code = "max_tokens", "unsupported_parameter"
    elif body.get("temperature") not in (None, 1):
        message = (
            f"Unsupported value: 'temperature' does not support {body['temperature']} with "
            "this model. Only the default (1) value is supported."
        )
        param, code = "temperature", "unsupported_value"
    else:
        return None
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return web.json_response({"error": error}, status=400)


def echo(request: Recorded) -> Step:
    return text(f"echo: {request.last_user_text}")


class _Gone(Exception):
    """The client hung up in the middle of a streamed answer."""


class FakeLLM(AnthropicWire):
    def __init__(self, *, responder: Responder = echo, latency: float = 0.0) -> None:
        self.script: deque[Step] = deque()
        self.responder = responder
        self.latency = latency
        self.requests: list[Recorded] = []
        self.arrived = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._ids = itertools.count(1)
        self._gates: set[asyncio.Event] = set()
        self.cached_prefixes: set[str] = set()
        self.usage_totals = {"input": 0, "read": 0, "written": 0}
        self.reported: list[int] = []  # input + output tokens reported per OpenAI answer
        self.in_flight = 0  # requests being answered right now
        self.max_in_flight = 0
        # A strict server (vLLM, llama.cpp) refuses prompt + max_tokens over its window.
        self.context_window: int | None = None
        # Which local server this pretends to be when asked about its window (llama.cpp
        # /props, Ollama /api/show, vLLM /v1/models, LM Studio /api/v0/models); the window
        # it reports is ``context_window`` (or ``reported_window`` where that is set).
        self.server_kind: ServerKind | None = None
        self.reported_window: int | None = None
        self.served_model = "fake-model"
        # The prompts (in tokens: llama-cpp-python's count of " a a a") sent to the legacy
        # /v1/completions, which only llama-cpp-python's window probe uses.
        self.completion_prompts: list[int] = []
        self.refusal_style: Literal["openai", "llama.cpp", "bare"] = "openai"
        # False: a model that sees no pictures. A request with an image part is refused as
        # llama.cpp's server refuses it (500), or as vLLM does (400) with refusal_style
        # "openai"; the servers' self-descriptions say so (``server_kind``).
        self.sees_images = True
        self.report_usage = True  # False: no usage at all (llama.cpp's server in a stream)
        # True: the model stops at the request's max_tokens, as hosted models do (a longer
        # text is cut there, 4 characters a token, and the answer says it was cut: OpenAI's
        # finish_reason "length", Anthropic's stop_reason "max_tokens"); False: a server
        # that ignores max_tokens
        self.keeps_to_max_tokens = False
        # True: a reasoning model as OpenAI serves one (o-series, gpt-5): it refuses
        # max_tokens (its word is max_completion_tokens) and any temperature but its own, as
        # OpenAI refuses them (400, the parameter named); refused requests are not recorded
        self.reasoning = False
        # /v1/embeddings: the texts asked for, and an HTTP status to answer instead (a failure)
        self.embedded: list[str] = []
        self.embeddings_status = 200
        # The images endpoint: each request (body and headers), and how it answers.
        self.pictures: list[Recorded] = []
        self.image_answer: Literal["b64_json", "url", "refuse"] = "b64_json"
        # An HTML page answered (200, text/html) to every request instead: a base URL that
        # reaches a web site, a sign-in page or a proxy's splash page, not a model's API.
        self.web_page: str | None = None
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> FakeLLM:
        app = web.Application(middlewares=[self._count])
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/props", self._llama_props)
        app.router.add_get("/openapi.json", self._openapi)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_post("/api/show", self._ollama_show)
        app.router.add_get("/api/v0/models", self._lm_studio_models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_post("/v1/images/generations", self._images)
        app.router.add_get("/files/picture.png", self._picture)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self

    async def stop(self) -> None:
        for gate in self._gates | {s.gate for s in self.script if s.gate is not None}:
            gate.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @web.middleware
    async def _count(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.web_page is not None:
            return web.Response(text=self.web_page, content_type="text/html")
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            response: web.StreamResponse = await handler(request)
            return response
        finally:
            self.in_flight -= 1

    def _too_long(self, recorded: Recorded, prompt_tokens: int) -> web.Response | None:
        asked = answer_limit(recorded.body)
        if self.context_window is None or prompt_tokens + asked <= self.context_window:
            return None
        if self.refusal_style == "llama.cpp":  # llama.cpp's server (tools/server, b5000+)
            refusal = {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": prompt_tokens,
                "n_ctx": self.context_window,
            }
            return web.json_response({"error": refusal}, status=400)
        if self.refusal_style == "bare":  # a server that does not say its window
            body = {"error": {"message": "the prompt is too long", "type": "invalid_request"}}
            return web.json_response(body, status=400)
        message = (
            f"This model's maximum context length is {self.context_window} tokens. However, "
            f"you requested {prompt_tokens + asked} tokens ({prompt_tokens} in the messages, "
            f"{asked} in the completion)."
        )
        code = "context_length_exceeded"
        body = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
        return web.json_response(body, status=400)

    def _no_pictures(self) -> web.Response:
        if self.refusal_style == "llama.cpp":
            message = (
                "image input is not supported - hint: if this is unexpected, you may need to "
                "provide the mmproj"
            )
            body = {"error": {"code": 500, "message": message, "type": "server_error"}}
            return web.json_response(body, status=500)
        message = f"{self.served_model} is not a multimodal model"
        body = {"error": {"message": message, "type": "BadRequestError", "code": 400}}
        return web.json_response(body, status=400)

    # -- images -----------------------------------------------------------------------------

    async def _images(self, request: web.Request) -> web.Response:
        self.pictures.append(Recorded(request.path, await request.json(), dict(request.headers)))
        if self.image_answer == "refuse":
            message = "Your request was rejected by the safety system."
            body = {"error": {"message": message, "type": "image_generation_user_error"}}
            return web.json_response(body, status=400)
        if self.image_answer == "url":
            item = {"url": f"http://127.0.0.1:{self.port}/files/picture.png"}
        else:
            item = {"b64_json": base64.b64encode(PICTURE).decode()}
        return web.json_response({"created": 0, "data": [item]})

    async def _picture(self, request: web.Request) -> web.Response:
        return web.Response(body=PICTURE, content_type="image/png")

    # -- what a local server says about its window ------------------------------------------

    @property
    def _window(self) -> int:
        return self.reported_window or self.context_window or 4_096

    async def _models(self, request: web.Request) -> web.Response:
        entry: dict[str, Any] = {"id": self.served_model, "object": "model", "owned_by": "me"}
        if self.server_kind == "vllm":
            entry["max_model_len"] = self._window
        return web.json_response({"object": "list", "data": [entry]})

    async def _llama_props(self, request: web.Request) -> web.Response:
        if self.server_kind != "llama.cpp":
            return web.json_response({"error": "not found"}, status=404)
        settings = {"n_ctx": self._window, "temperature": 0.8, "n_predict": -1}
        modalities = {"vision": self.sees_images, "audio": False}
        return web.json_response(
            {"default_generation_settings": settings, "total_slots": 1, "modalities": modalities}
        )

    async def _openapi(self, request: web.Request) -> web.Response:
        if self.server_kind != "llama-cpp-python":
            return web.json_response({"detail": "Not Found"}, status=404)
        info = {"title": "🦙 llama.cpp Python API", "version": "0.3.36"}
        return web.json_response({"openapi": "3.1.0", "info": info, "paths": {}})

    async def _completions(self, request: web.Request) -> web.Response:
        """llama-cpp-python's /v1/completions, as far as its window probe goes: a prompt of
        the window or more is refused (400, its words); one that fits fails on a stop word
        that cannot be encoded (500), which it reads before any work."""
        body = await request.json()
        tokens = len(str(body.get("prompt", "")).split())
        self.completion_prompts.append(tokens)
        if self.server_kind != "llama-cpp-python":
            return web.json_response({"detail": "Not Found"}, status=404)
        answer = int(body.get("max_tokens") or 16)
        if tokens >= self._window:
            message = (
                f"This model's maximum context length is {self._window} tokens, however you "
                f"requested {tokens + answer} tokens ({tokens} in your prompt; {answer} for the "
                "completion). Please reduce your prompt; or completion length."
            )
            error = {"message": message, "type": "invalid_request_error", "param": "messages"}
            return web.json_response(
                {"error": {**error, "code": "context_length_exceeded"}}, status=400
            )
        try:
            for stop in body.get("stop") or []:
                str(stop).encode("utf-8")
        except UnicodeEncodeError as exc:
            error = {"message": str(exc), "type": "internal_server_error", "param": None}
            return web.json_response({"error": {**error, "code": None}}, status=500)
        return web.json_response({"error": {"message": "not scripted"}}, status=501)

    async def _ollama_show(self, request: web.Request) -> web.Response:
        if self.server_kind not in ("ollama", "ollama-default"):
            return web.json_response({"error": "not found"}, status=404)
        body = await request.json()
        if body.get("model") != self.served_model:
            return web.json_response(
                {"error": f"model '{body.get('model')}' not found"}, status=404
            )
        parameters = 'stop "<|eot_id|>"'
        if self.server_kind == "ollama":
            parameters = f"num_ctx {self._window}\n{parameters}"
        info = {"general.architecture": "llama", "llama.context_length": 131_072}
        capabilities = ["completion", "tools", *(["vision"] if self.sees_images else [])]
        return web.json_response(
            {"parameters": parameters, "model_info": info, "capabilities": capabilities}
        )

    async def _lm_studio_models(self, request: web.Request) -> web.Response:
        if self.server_kind != "lm-studio":
            return web.json_response({"error": "not found"}, status=404)
        entry = {
            "id": self.served_model,
            "type": "vlm" if self.sees_images else "llm",
            "state": "loaded",
            "max_context_length": 131_072,
            "loaded_context_length": self._window,
        }
        return web.json_response({"object": "list", "data": [entry]})

    # -- scripting and waiting ------------------------------------------------------------

    def queue(self, *steps: Step) -> None:
        self.script.extend(steps)

    async def wait_for_requests(self, count: int, timeout: float = 10.0) -> None:
        async def reached() -> None:
            async with self.arrived:
                await self.arrived.wait_for(lambda: len(self.requests) >= count)

        await asyncio.wait_for(reached(), timeout)

    async def _next_step(self, recorded: Recorded) -> Step:
        async with self.arrived:
            self.requests.append(recorded)
            self.arrived.notify_all()
        if self.script:
            return self.script.popleft()
        step = self.responder(recorded)
        return await step if isinstance(step, Awaitable) else step

    async def _prepare(self, request: web.Request) -> tuple[Recorded, Step]:
        body = await request.json()
        recorded = Recorded(request.path, body, dict(request.headers))
        step = await self._next_step(recorded)
        most = answer_limit(body) * 4
        if self.keeps_to_max_tokens and most and len(step.text) > most:
            step = replace(step, text=step.text[:most], calls=(), finish_reason="length")
        if step.gate is not None and step.pause_after is None:
            self._gates.add(step.gate)
            await step.gate.wait()
        if self.latency or step.delay:
            await asyncio.sleep(self.latency + step.delay)
        return recorded, step

    # -- embeddings ----------------------------------------------------------------------

    async def _embeddings(self, request: web.Request) -> web.Response:
        """An OpenAI-compatible /v1/embeddings: each word of a text adds a fixed
        pseudo-random direction (texts sharing words are alike; no meaning)."""
        body = await request.json()
        texts = [body["input"]] if isinstance(body["input"], str) else list(body["input"])
        if self.embeddings_status != 200:
            error = {"error": {"message": "embeddings down", "type": "server_error"}}
            return web.json_response(error, status=self.embeddings_status)
        self.embedded.extend(texts)
        data = [
            {"object": "embedding", "index": i, "embedding": word_vector(text)}
            for i, text in enumerate(texts)
        ]
        usage = {"prompt_tokens": sum(len(t.split()) for t in texts), "total_tokens": 0}
        return web.json_response(
            {"object": "list", "data": data, "model": body["model"], "usage": usage}
        )

    # -- OpenAI ---------------------------------------------------------------------------

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        if self.reasoning:
            refused = _reasoning_refusal(await request.json())
            if refused is not None:
                return refused
        recorded, step = await self._prepare(request)
        if step.status != 200:
            return web.json_response(step.error_body, status=step.status, headers=step.headers)
        if step.raw_body is not None:
            return web.Response(body=step.raw_body, content_type="application/json")
        if not self.sees_images and recorded.image_parts:
            return self._no_pictures()
        prompt_tokens = max(1, len(json.dumps(recorded.body)) // 4)
        refused = self._too_long(recorded, prompt_tokens)
        if refused is not None:
            return refused
        completion_tokens = max(1, len(step.text) // 4)
        self.reported.append(prompt_tokens + completion_tokens)
        tool_calls = [
            {
                "id": f"call_{next(self._ids)}",
                "type": "function",
                "function": {"name": n, "arguments": a},
            }
            for n, a in step.calls
        ]
        finish = step.finish_reason or ("tool_calls" if tool_calls else "stop")
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if not recorded.body.get("stream"):
            await asyncio.sleep(writing_time(step))  # the model writes as long either way
            message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
            if tool_calls:
                message["tool_calls"] = tool_calls
            completion = {
                "id": f"chatcmpl-{next(self._ids)}",
                "object": "chat.completion",
                "created": 0,
                "model": recorded.body.get("model", "fake"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            }
            return web.json_response(
                {**completion, "usage": usage} if self.report_usage else completion
            )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)

        async def chunk(
            delta: dict[str, Any],
            finish_reason: str | None = None,
            extra: dict[str, Any] | None = None,
        ) -> None:
            payload = {
                "id": "chatcmpl-stream",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "fake",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                **(extra or {}),
            }
            try:
                await response.write(f"data: {json.dumps(payload)}\n\n".encode())
            except ConnectionResetError as exc:  # the client went away (a stopped turn)
                raise _Gone from exc
            recorded.last_chunk_at = time.monotonic()
            if delta.get("content") and recorded.first_text_at is None:
                recorded.first_text_at = recorded.last_chunk_at

        try:
            return await self._stream(step, response, request, tool_calls, finish, usage, chunk)
        except _Gone:
            return response

    async def _stream(  # noqa: PLR0917 - the pieces of one streamed answer
        self,
        step: Step,
        response: web.StreamResponse,
        request: web.Request,
        tool_calls: list[dict[str, Any]],
        finish: str,
        usage: dict[str, Any],
        chunk: Any,
    ) -> web.StreamResponse:
        await chunk({"role": "assistant", "content": ""})
        for index, piece in enumerate(pieces(step.text, step.stream_chunks)):
            if index == step.cut_after:
                return await _cut(request, response, reset=step.cut_by_reset)
            if index == 1 and step.stream_error is not None:
                await response.write(
                    f"data: {json.dumps({'error': step.stream_error})}\n\n".encode()
                )
                await response.write_eof()
                return response
            if index and step.chunk_delay:
                await asyncio.sleep(step.chunk_delay)  # the model writing, not synchronization
            if index == step.pause_after and step.gate is not None:
                self._gates.add(step.gate)
                await step.gate.wait()
            await chunk({"content": piece})
        for index, call in enumerate(tool_calls):
            await chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
            for piece in pieces(call["function"]["arguments"], 2):
                await chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        await chunk({}, finish)
        usage_chunk = {
            "id": "chatcmpl-stream",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fake",
            "choices": [],
            "usage": usage,
        }
        if self.report_usage:
            await response.write(f"data: {json.dumps(usage_chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response
