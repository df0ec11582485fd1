"""The task API: submit a background task, look at it, follow it, stop it.

``POST /v1/tasks`` (``text``, ``agent``, ``deliver_to``) → the task; ``GET /v1/tasks`` → the
tasks, newest first, a page at a time (``limit``, ``after``: OpenAI's list shape, which the
SDKs page through); ``GET /v1/tasks/{id}`` → its state, progress notes and answer;
``GET /v1/tasks/{id}/events`` → server-sent events as it progresses (``Last-Event-ID``
resumes after an event); ``DELETE /v1/tasks/{id}`` stops it. A token sees the tasks it
submitted; an owner token sees every task. A token may start
a task where its role may use ``spawn`` in a chat (members may not, by default). Only owner
and admin tokens may send a task's notes and answer to a chat (``deliver_to``): for anyone
else that would be a message to someone else's chat.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from aiohttp import web

from channels.api import wire
from gateway.config.connect import ApiSettings, ApiToken, parse_target
from gateway.core.addressing import API_CHANNEL
from gateway.core.errors import StorageFullError
from gateway.core.messages import ChatRef
from gateway.core.principal import Principal
from gateway.core.system.bodies import parse_json, read_capped
from gateway.store import TaskEvent, TaskRecord
from gateway.store.tasks import FINAL_STATES

KEEP_ALIVE_SECONDS = 15.0
PAGE = 20  # tasks in a page of GET /v1/tasks, unless ``limit`` says (OpenAI's default)
MAX_PAGE = 100
KEY_HEADERS = ("Idempotency-Key", "X-Switchboard-Delivery")
MAX_TEXT_CHARS = 100_000

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Authenticated = Callable[[web.Request, ApiToken], Awaitable[web.StreamResponse]]


class TaskBackend(Protocol):
    """Background tasks as the API sees them (gateway/runtime/agents/task_board.py)."""

    async def submit(
        self,
        *,
        text: str,
        agent: str,
        principal: Principal,
        deliver_to: ChatRef | None,
        key: str | None,
    ) -> tuple[TaskRecord, bool]: ...

    def refusal(self, agent: str, principal: Principal) -> str | None:
        """Why ``principal`` may not start a task of ``agent`` (as ``spawn`` in a chat)."""

    async def get(self, task_id: str) -> TaskRecord | None: ...

    async def recent(
        self, *, limit: int, owner: tuple[str, str] | None, after: str | None
    ) -> list[TaskRecord]:
        """At most ``limit`` tasks, newest first: those acting for ``owner`` (channel,
        sender id; ``None``: all), after task ``after`` in that order."""

    async def events(self, task_id: str, *, after: int = 0) -> list[TaskEvent]: ...

    async def ended(self, task_id: str) -> bool:
        """Whether the task's final state is among its events."""

    def next_change(self) -> asyncio.Event: ...

    async def stop(self, task_id: str, *, by: str) -> bool:
        """Stop it as ``/stop`` stops a chat's turn (``by``: who asked)."""


class TaskApi(Protocol):
    """What the task endpoints need of the API channel."""

    settings: ApiSettings
    agents: tuple[str, ...]
    chats: tuple[str, ...]
    tasks: TaskBackend | None
    requests: Counter[tuple[str, str]]

    async def check_allowance(self, principal: Principal) -> str | None: ...

    def principal(self, token: ApiToken) -> Principal: ...

    def streaming(self) -> AbstractContextManager[None]: ...


def task_routes(
    api: TaskApi, authenticated: Callable[[str, Authenticated], Handler]
) -> list[web.RouteDef]:
    if api.tasks is None:
        return []
    handlers = TaskRoutes(api, api.tasks)
    return [
        web.post("/v1/tasks", authenticated("tasks", handlers.submit)),
        web.get("/v1/tasks", authenticated("tasks", handlers.listing)),
        web.get("/v1/tasks/{id}", authenticated("tasks", handlers.show)),
        web.get("/v1/tasks/{id}/events", authenticated("task_events", handlers.follow)),
        web.delete("/v1/tasks/{id}", authenticated("tasks", handlers.stop)),
    ]


def _error(
    status: int, message: str, kind: str = "invalid_request_error", **fields: Any
) -> web.Response:
    return wire.error_response(status, message, kind, **fields)


class TaskRoutes:
    def __init__(self, api: TaskApi, tasks: TaskBackend) -> None:
        self._api = api
        self._tasks = tasks

    async def submit(self, request: web.Request, token: ApiToken) -> web.StreamResponse:
        limit = self._api.settings.max_request_bytes
        raw = await read_capped(request.content, limit)
        if raw is None:
            return _error(400, f"the body is over {limit} bytes (api.max_request_bytes)")
        try:
            body = parse_json(raw)
        except ValueError:
            return _error(400, "the body must be JSON: {text, agent, deliver_to}")
        if not isinstance(body, dict):
            return _error(400, "the body must be a JSON object: {text, agent, deliver_to}")
        text, agent = body.get("text"), body.get("agent", "main")
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT_CHARS:
            return _error(
                400, f"text is required (at most {MAX_TEXT_CHARS} characters)", param="text"
            )
        if agent not in self._api.agents:
            known = ", ".join(self._api.agents)
            return _error(404, f"no agent named {agent!r} (agents: {known})", param="agent")
        principal = self._api.principal(token)
        refusal = self._tasks.refusal(agent, principal)
        if refusal is not None:  # as the spawn tool is for this token's role in a chat
            return _error(
                403,
                f"{refusal}, and a task is what spawn starts (tools.policy)",
                "permission_error",
            )
        target = self._target(body.get("deliver_to"), token) if body.get("deliver_to") else None
        if isinstance(target, web.Response):
            return target
        refusal = await self._api.check_allowance(principal)
        if refusal is not None:
            return _error(429, refusal, "rate_limit_exceeded", code="allowance")
        key = next((request.headers[h] for h in KEY_HEADERS if request.headers.get(h)), None)
        try:
            record, new = await self._tasks.submit(
                text=text, agent=agent, principal=principal, deliver_to=target, key=key
            )
        except StorageFullError:
            return _error(
                507, "the gateway's disk is full; try again later", "server_error", retry=True
            )
        if not new and (record.prompt, record.agent, record.deliver_to) != (text, agent, target):
            return _error(  # a client's bug: never answered with another task
                409,
                "this Idempotency-Key was used before for another task: a key is for sending "
                "the same task again; use a new key for a new one",
                code="idempotency_key_reused",
            )
        return web.json_response(await self._view(record), status=202 if new else 200)

    def _target(self, value: object, token: ApiToken) -> ChatRef | web.Response:
        """The chat ``deliver_to`` names, or why the task may not go there."""
        if token.role == "member":
            return _error(
                403,
                "deliver_to is for owner and admin tokens: a member may not send to a chat",
                "permission_error",
                param="deliver_to",
            )
        try:
            target = parse_target(str(value))
        except ValueError as exc:
            return _error(400, str(exc), param="deliver_to")
        if target.channel not in self._api.chats:
            configured = ", ".join(self._api.chats) or "none"
            return _error(
                400,
                f"deliver_to: {target.channel} is not configured on this gateway, so the "
                f"answer could never be sent (configured: {configured})",
                param="deliver_to",
            )
        return target

    async def listing(self, request: web.Request, token: ApiToken) -> web.StreamResponse:
        """The token's tasks (an owner token's: all), newest first, ``limit`` of them after
        the task ``after``: ``{"object": "list", "data": [...], "has_more": ...}``."""
        limit = request.query.get("limit", str(PAGE))
        if not limit.isdigit() or not 1 <= int(limit) <= MAX_PAGE:
            return _error(400, f"limit must be from 1 to {MAX_PAGE}", param="limit")
        after = request.query.get("after") or None
        if after is not None:
            last = await self._tasks.get(after)
            if last is None or not _mine(last, token):  # another's: as if there were none
                return _error(400, f"after: no task {after!r}", param="after")
        owner = None if token.role == "owner" else (API_CHANNEL, token.name)
        found = await self._tasks.recent(limit=int(limit) + 1, owner=owner, after=after)
        page = found[: int(limit)]
        return web.json_response(
            {
                "object": "list",
                "data": [await self._view(record) for record in page],
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
                "has_more": len(found) > len(page),
            }
        )

    async def show(self, request: web.Request, token: ApiToken) -> web.StreamResponse:
        record = await self._visible(request, token)
        if record is None:
            return _not_found(request)
        return web.json_response(await self._view(record))

    async def stop(self, request: web.Request, token: ApiToken) -> web.StreamResponse:
        record = await self._visible(request, token)
        if record is None:
            return _not_found(request)
        by = self._api.principal(token).person
        if not await self._tasks.stop(record.id, by=by):
            current = await self._tasks.get(record.id) or record
            return _error(409, f"the task has ended already ({current.state})", code="task_ended")
        stopped = await self._tasks.get(record.id) or record
        return web.json_response(await self._view(stopped))

    async def follow(self, request: web.Request, token: ApiToken) -> web.StreamResponse:
        """Server-sent events: every event after ``Last-Event-ID`` (or ``?after=``), then
        each new one as it happens, until the task has ended."""
        record = await self._visible(request, token)
        if record is None:
            return _not_found(request)
        after = _int(request.headers.get("Last-Event-ID") or request.query.get("after"))
        response = wire.event_stream()
        await response.prepare(request)
        with self._api.streaming():
            while True:
                change = self._tasks.next_change()  # before reading: nothing slips between
                after, ended = await self._write_events(response, record.id, after)
                if ended:
                    break
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(KEEP_ALIVE_SECONDS):
                        await change.wait()
                        continue
                await response.write(wire.KEEP_ALIVE)
            await response.write_eof()
        return response

    async def _write_events(
        self, response: web.StreamResponse, task_id: str, after: int
    ) -> tuple[int, bool]:
        """Write the task's events after ``after``; returns the last one written and
        whether the task has ended (its final state is among them, or came before; it is
        always a task's last event)."""
        events = await self._tasks.events(task_id, after=after)
        if not events:
            if not await self._tasks.ended(task_id):
                return after, False
            events = await self._tasks.events(task_id, after=after)  # it may have just ended
            if not events:
                return after, True  # ended before ``after``
        ended = False
        for event in events:
            data = {
                "task": task_id,
                "seq": event.seq,
                "at": event.at,
                "kind": event.kind,
                "text": event.text,
            }
            await response.write(wire.sse(data, event=event.kind, event_id=event.seq))
            after = event.seq
            ended = event.kind == "state" and event.text in FINAL_STATES
        return after, ended

    async def _visible(self, request: web.Request, token: ApiToken) -> TaskRecord | None:
        """The task, if this token may see it: its own, or any for an owner token."""
        record = await self._tasks.get(request.match_info["id"])
        return record if record is not None and _mine(record, token) else None

    async def _view(self, record: TaskRecord) -> dict[str, Any]:
        events = await self._tasks.events(record.id)
        target = record.deliver_to
        return {
            "id": record.id,
            "object": "task",
            "state": record.state,
            "agent": record.agent,
            "text": record.prompt,
            "created_at": record.created_at,
            "finished_at": record.finished_at,
            "notes": [{"at": e.at, "text": e.text} for e in events if e.kind == "note"],
            "answer": record.result if record.state == "done" else None,
            "error": record.result if record.state in ("failed", "interrupted") else None,
            "deliver_to": None if target is None else _target_text(target),
            "events_url": f"/v1/tasks/{record.id}/events",
        }


def _mine(record: TaskRecord, token: ApiToken) -> bool:
    """Whether ``token`` may see the task: one it submitted, or any for an owner token."""
    owner = record.owner
    submitted = owner.get("channel") == API_CHANNEL and owner.get("sender_id") == token.name
    return submitted or token.role == "owner"


def _target_text(chat: ChatRef) -> str:
    return f"{chat.channel}:{chat.chat_id}" + (f":{chat.thread_id}" if chat.thread_id else "")


def _not_found(request: web.Request) -> web.Response:
    return _error(404, f"no task {request.match_info['id']!r}", code="task_not_found")


def _int(value: str | None) -> int:
    try:
        return max(0, int(value or 0))
    except ValueError:
        return 0
