"""``/v1`` over HTTP: the OpenAI-compatible endpoints and, from :mod:`channels.api.tasks`,
the task API. Every request authenticates with its bearer token alone (an API token; the
web chat's token and cookie are not API tokens), and wrong tokens count against the client
like failed logins. Errors come in OpenAI's shape, so SDKs raise their usual exceptions.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from aiohttp import web

from channels.api import wire
from channels.api.answers import AlreadyAnswered, Ask, PendingAnswer, StreamText
from channels.api.tasks import TaskApi, task_routes
from gateway.config.connect import ApiToken
from gateway.core.commands import UNMETERED_COMMANDS
from gateway.core.errors import ChannelTransientError, StorageFullError
from gateway.core.principal import Role
from gateway.core.system.bodies import parse_json, read_capped
from gateway.core.webhost import CredentialThrottle

log = logging.getLogger(__name__)

SESSION_HEADER = "X-Switchboard-Session"
OPEN_WEBUI_CHAT = "X-OpenWebUI-Chat-Id"  # sent by Open WebUI with forwarded user info
KEY_HEADERS = ("Idempotency-Key", "X-Switchboard-Delivery")
KEEP_ALIVE_SECONDS = 15.0
NO_ANSWER_YET = (
    "no answer in time; the turn goes on: its answer will be in the session's history, and "
    "this request sent again with its Idempotency-Key gets it"
)
FAILED = "turn_failed"  # the code of an error that a failed turn is
FAILED_FOR_OTHERS = (
    "the assistant could not answer this: its model failed or the turn ran out of time (the "
    "owner finds why in the gateway's log). The message is kept in the session; ask again later."
)
RETRY_COUNT = "x-stainless-retry-count"  # the openai SDK's: 0, then 1, 2, ... on its retries

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Authenticated = Callable[[web.Request, ApiToken], Awaitable[web.StreamResponse]]


class ApiBackend(TaskApi, Protocol):
    """What the endpoints need of the channel (:class:`channels.api.channel.ApiChannel`)."""

    started_at: int  # Unix time: the models' "created"

    def authenticate(self, request: web.Request) -> ApiToken | None: ...

    def conversation(self, ask: Ask) -> AbstractAsyncContextManager[PendingAnswer]: ...


def routes(api: ApiBackend, throttle: CredentialThrottle) -> list[web.RouteDef]:
    handlers = ChatRoutes(api, throttle)
    return [
        web.get("/v1/models", handlers.authenticated("models", handlers.models)),
        web.post("/v1/chat/completions", handlers.authenticated("chat", handlers.chat)),
        *task_routes(api, handlers.authenticated),
    ]


async def read_json(request: web.Request, limit: int) -> tuple[Any, bytes]:
    """The request's JSON body (at most ``limit`` bytes) and its bytes, or
    :class:`wire.BadRequest`."""
    too_large = f"the body is over {limit} bytes (api.max_request_bytes)"
    if request.content_length is not None and request.content_length > limit:
        raise wire.BadRequest(too_large)
    body = await read_capped(request.content, limit)
    if body is None:
        raise wire.BadRequest(too_large)
    try:
        return parse_json(body), body
    except ValueError as exc:
        raise wire.BadRequest(f"the body is not JSON: {exc}") from None


def server_error(request: web.Request, error: web.HTTPException) -> web.Response:
    """What the web server answers under ``/v1`` itself (a path no endpoint has, a method
    the endpoint does not take, a cluster node that does not lead, a handler that failed)
    in OpenAI's shape: clients parse ``{"error": {...}}`` from every answer, and the SDKs
    raise their usual exceptions (``NotFoundError``, ...) on it."""
    where = f"{request.method} {request.path}"
    kind, code, retry = "invalid_request_error", None, False
    if error.status == 404:
        message = f"Invalid URL ({where}): no such endpoint (docs/connect.md lists them)"
        code = "unknown_url"
    elif error.status == 405:
        methods = error.allowed_methods if isinstance(error, web.HTTPMethodNotAllowed) else ()
        allowed = ", ".join(sorted(methods))
        message = f"Method not allowed ({where}): {request.path} takes {allowed}"
        code = "method_not_allowed"
    else:
        message = error.text or error.reason
        if error.status >= 500:
            kind = "server_error"
            retry = error.status == 503  # nothing was taken: sent again, it is
    response = wire.error_response(error.status, message, kind, code=code, retry=retry)
    for header in ("Allow", "Retry-After"):
        if header in error.headers:
            response.headers[header] = error.headers[header]
    return response


def is_retry(request: web.Request) -> bool:
    """Whether the official SDKs (Stainless-made) sent this again on their own: after a
    timeout, a lost connection or an error they retry, counting in this header."""
    count = request.headers.get(RETRY_COUNT, "0").strip()
    return count.isdigit() and int(count) > 0


class ChatRoutes:
    def __init__(self, api: ApiBackend, throttle: CredentialThrottle) -> None:
        self._api = api
        self._throttle = throttle

    def authenticated(self, endpoint: str, handler: Authenticated) -> Handler:
        """``handler`` behind the API token check (and the failed-credential throttle)."""

        async def checked(request: web.Request) -> web.StreamResponse:
            started = time.monotonic()
            response, token = await self._checked(endpoint, handler, request)
            log.info(  # who asked for what, and how it went; never the token or the body
                "api: %s %s %d (%s, %.1f s)",
                request.method,
                request.path,
                response.status,
                f"token {token.name}" if token is not None else "no valid token",
                time.monotonic() - started,
            )
            return response

        return checked

    async def _checked(
        self, endpoint: str, handler: Authenticated, request: web.Request
    ) -> tuple[web.StreamResponse, ApiToken | None]:
        """The response, and the token that asked (``None``: no valid one). A valid token
        goes through even while its address is throttled (a guesser on the same address, on
        a loopback bind every local program, would lock every client out): an API token is
        at least 16 random characters, and only wrong ones are refused."""
        token = self._api.authenticate(request)
        if token is None and self._throttle.throttled(request):
            self._api.requests[(endpoint, "throttled")] += 1
            return wire.error_response(
                429, "too many failed attempts; wait a minute", "rate_limit_exceeded"
            ), None
        if token is None:
            self._throttle.record_failure(request)
            self._api.requests[(endpoint, "unauthorized")] += 1
            return wire.error_response(
                401,
                "a valid API token is required: Authorization: Bearer <token> ([api] tokens)",
                "invalid_request_error",
                code="invalid_api_key",
            ), None
        response = await handler(request, token)
        outcome = "ok" if response.status < 400 else str(response.status)
        self._api.requests[(endpoint, outcome)] += 1
        return response, token

    async def models(self, request: web.Request, token: ApiToken) -> web.StreamResponse:
        return web.json_response(wire.model_list(list(self._api.agents), self._api.started_at))

    async def chat(self, request: web.Request, token: ApiToken) -> web.StreamResponse:
        api = self._api
        try:
            body, raw = await read_json(request, api.settings.max_request_bytes)
            chat = wire.parse_chat(body)
        except wire.BadRequest as exc:
            return wire.error_response(
                400, str(exc), "invalid_request_error", param=exc.param, code=exc.code
            )
        if chat.model not in api.agents:
            known = ", ".join(api.agents)
            return wire.error_response(
                404,
                f"no agent named {chat.model!r} (models here: {known})",
                "invalid_request_error",
                param="model",
                code="model_not_found",
            )
        command = chat.text.split(maxsplit=1)[0].lower() if chat.text.startswith("/") else ""
        if command not in UNMETERED_COMMANDS:  # /status and /usage cost nothing
            refusal = await api.check_allowance(api.principal(token))
            if refusal is not None:
                return wire.error_response(429, refusal, "rate_limit_exceeded", code="allowance")
        ask = Ask(
            token=token,
            agent=chat.model,
            text=chat.text,
            session=request.headers.get(SESSION_HEADER)
            or chat.user
            or request.headers.get(OPEN_WEBUI_CHAT),
            key=next((request.headers[h] for h in KEY_HEADERS if request.headers.get(h)), None),
            body=hashlib.sha256(raw).hexdigest(),
            retry=is_retry(request),
        )
        try:
            async with api.conversation(ask) as pending:
                if chat.stream:
                    return await self._stream(request, chat.model, pending, token)
                with api.streaming():  # ended when the server stops, like a stream
                    async with asyncio.timeout(api.settings.answer_timeout_seconds):
                        await pending.finished.wait()
                if pending.failure is not None:
                    return wire.error_response(
                        502, failure_text(pending.failure, token), "server_error", code=FAILED
                    )
                return web.json_response(
                    wire.completion(pending.completion_id, chat.model, pending.text)
                )
        except AlreadyAnswered as repeated:
            if repeated.other:
                return wire.error_response(
                    409,
                    "this Idempotency-Key was used before for another question: a key is for "
                    "sending the same request again; use a new key for a new one",
                    "invalid_request_error",
                    code="idempotency_key_reused",
                )
            return wire.error_response(
                409,
                "this request (its Idempotency-Key) was received before; its answer is "
                "in the session's history",
                "invalid_request_error",
                code="duplicate_request",
            )
        except TimeoutError:
            return wire.error_response(504, NO_ANSWER_YET, "timeout")
        except StorageFullError:  # not journaled: sent again later, it is taken then
            return wire.error_response(
                507, "the gateway's disk is full; try again later", "server_error", retry=True
            )
        except ChannelTransientError as exc:  # not journaled either
            return wire.error_response(503, str(exc), "server_error", retry=True)

    async def _stream(
        self, request: web.Request, model: str, pending: PendingAnswer, token: ApiToken
    ) -> web.StreamResponse:
        """The answer as server-sent events: fragments as the model writes, completed by the
        outbox's messages; a comment every few seconds keeps idle connections open. A turn
        that fails ends it with an error event, as OpenAI's streams do."""
        response = wire.event_stream()
        await response.prepare(request)
        cid = pending.completion_id
        view = StreamText()
        with self._api.streaming():
            await response.write(wire.chunk(cid, model, {"role": "assistant", "content": ""}))
            try:
                async with asyncio.timeout(self._api.settings.answer_timeout_seconds):
                    while (piece := await _next(pending, response)).kind != "end":
                        if piece.kind == "text":
                            out = view.text(piece.text)
                        elif piece.kind == "tool":
                            out = ""
                            view.tool()
                        elif piece.kind == "failed":
                            reason = failure_text(piece.text, token)
                            body = wire.error_body(reason, "server_error", code=FAILED)
                            await response.write(wire.sse(body))
                            return response
                        else:
                            out = view.message(piece.text)
                        if out:
                            await response.write(wire.chunk(cid, model, {"content": out}))
            except TimeoutError:
                body = wire.error_body(NO_ANSWER_YET, "timeout")
                await response.write(wire.sse(body))
                return response
            await response.write(wire.chunk(cid, model, {}, "stop"))
            await response.write(wire.DONE)
        return response


def failure_text(notice: str, token: ApiToken) -> str:
    """Why a turn failed, for the client: to an owner's token its notice (the cause and the
    fix, which may name the model server's address), to others only that it failed."""
    return notice if token.role is Role.OWNER else FAILED_FOR_OTHERS


async def _next(pending: PendingAnswer, response: web.StreamResponse) -> Any:
    """The next piece of the answer; keep-alive comments while there is none."""
    while True:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(KEEP_ALIVE_SECONDS):
                return await pending.pieces.get()
        await response.write(wire.KEEP_ALIVE)
