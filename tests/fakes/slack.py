"""A fake Slack: Web API, file hosting and a Socket Mode websocket on 127.0.0.1.

The real slack_sdk ``AsyncWebClient`` reaches it through ``base_url``; Socket Mode connects
to whatever URL ``apps.connections.open`` returns, which is this server. Events are pushed
as Socket Mode envelopes (acks are recorded per ``envelope_id``) or posted to a bolt HTTP
endpoint with a genuine signature (:func:`post_signed`). Web API calls are recorded;
``chat.postMessage`` can answer 429, cut the connection after storing the message or be
held open (:meth:`FakeSlack.hold_post`); ``conversations.history``/``.replies`` return stored messages with their metadata; files go
through ``files.getUploadURLExternal`` → upload → ``files.completeUploadExternal``.
``chat.postMessage`` keeps Block Kit ``blocks``, and a post to a user id lands in the app's
DM with that user (``D`` + the id's tail), as on Slack; :func:`block_actions` builds the
interaction a press on one of its buttons sends, signed like Slack (:func:`post_action`) or
as a Socket Mode ``interactive`` envelope (:meth:`FakeSlack.push_interactive`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from slack_sdk.signature import SignatureVerifier

from tests.fakes.holds import Hold, Holds

BOT_TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-1-test"
SIGNING_SECRET = "test-signing-secret"
BOT_USER = "UBOT0001"
TEAM = "T0001"


@dataclass
class Posted:
    channel: str
    ts: str
    text: str
    thread_ts: str | None = None
    metadata: dict[str, Any] | None = None
    files: list[dict[str, Any]] = field(default_factory=list)
    user: str = BOT_USER
    blocks: list[dict[str, Any]] = field(default_factory=list)


def dm_of(user: str) -> str:
    """The id of the app's DM with ``user`` (a ``U…`` id)."""
    return "D" + user[1:]


class FakeSlack:
    def __init__(self) -> None:
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._changed = asyncio.Condition()
        self._ts = itertools.count(1)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.posted: list[Posted] = []
        self.reactions: dict[tuple[str, str], list[str]] = {}  # (channel, ts) -> names
        self.deleted: list[str] = []  # ts of messages deleted
        self.fail_posts: deque[tuple[str, float]] = deque()  # ("429"|"disconnect", retry_after)
        self.limited: dict[str, float] = {}  # channel -> answer every post there 429, retry_after
        self.uploads: dict[str, tuple[str, bytes]] = {}  # file id -> (name, bytes)
        self.hosted: dict[str, bytes] = {}  # files users shared, by path
        self.download_auth: list[str | None] = []
        self.holds = Holds()
        # What people wrote (their messages the API returns: a thread's parent), the
        # workspace's people by id (users.info) and channels by id (conversations.list).
        self.said: list[dict[str, Any]] = []
        self.users: dict[str, str] = {}
        self.channels: dict[str, str] = {}  # id -> name; the bot is a member of all of them
        # Socket Mode
        self.connections = 0
        self.acks: list[str] = []
        self._ws: web.WebSocketResponse | None = None
        self._envelopes = itertools.count(1)

    # -- server ---------------------------------------------------------------------------

    async def start(self) -> FakeSlack:
        app = web.Application(client_max_size=50_000_000)
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_get("/files/{name}", self._download)
        app.router.add_get("/link", self._socket)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server: Any = site._server
        self.port = server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        self.holds.release_all()
        if self._ws is not None and not self._ws.closed:
            await self._ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.base}/api/"

    async def until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        async def check() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(check(), timeout)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def hold_post(self, channel: str, *, deliver: bool) -> Hold:
        """Hold the next ``chat.postMessage`` to ``channel`` open (made first, or never:
        tests/fakes/holds.py)."""
        return self.holds.add(deliver=deliver, matches=lambda args: args["channel"] == channel)

    def next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    # -- Web API --------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        args: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                args.update(await request.json())
            else:
                args.update(await request.post())
        self.calls.append((method, args))
        await self._notify()
        auth = request.headers.get("Authorization", "")
        expected = APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN
        if auth != f"Bearer {expected}":
            return web.json_response({"ok": False, "error": "invalid_auth"})
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        result: web.StreamResponse = await handler(request, args)
        return result

    async def _auth_test(self, request: web.Request, args: dict[str, Any]) -> web.Response:
        return web.json_response(
            {
                "ok": True,
                "user_id": BOT_USER,
                "bot_id": "B0001",
                "team_id": TEAM,
                "user": "switchboard",
            }
        )

    async def _chat_postMessage(
        self, request: web.Request, args: dict[str, Any]
    ) -> web.StreamResponse:
        limited = self.limited.get(str(args.get("channel")))
        if limited is not None or (self.fail_posts and self.fail_posts[0][0] == "429"):
            wait = limited if limited is not None else self.fail_posts.popleft()[1]
            return web.json_response(
                {"ok": False, "error": "ratelimited"},
                status=429,
                headers={"Retry-After": str(wait)},
            )
        metadata = args.get("metadata")
        if isinstance(metadata, str):
            metadata = json.loads(metadata)
        blocks = args.get("blocks") or []
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        channel = str(args["channel"])
        held = self.holds.take({"channel": channel})
        if held is not None:

            async def make() -> web.Response:
                return await self._post(args, channel, metadata, blocks, None)

            def never() -> web.Response:
                return web.json_response({"ok": False, "error": "internal_error"}, status=500)

            return await Holds.serve(held, make, never)
        return await self._post(args, channel, metadata, blocks, request)

    async def _post(
        self,
        args: dict[str, Any],
        channel: str,
        metadata: dict[str, Any] | None,
        blocks: list[dict[str, Any]],
        request: web.Request | None,
    ) -> web.Response:
        posted = Posted(
            channel=dm_of(channel) if channel.startswith("U") else channel,
            ts=self.next_ts(),
            text=str(args.get("text") or ""),
            thread_ts=args.get("thread_ts"),
            metadata=metadata,
            blocks=blocks,
        )
        self.posted.append(posted)
        await self._notify()
        if request is not None and self.fail_posts and self.fail_posts[0][0] == "disconnect":
            self.fail_posts.popleft()
            assert request.transport is not None
            request.transport.abort()  # posted, but the client never hears back
            return web.Response()
        return web.json_response({"ok": True, "channel": posted.channel, "ts": posted.ts})

    async def _reactions_add(self, request: web.Request, args: dict[str, Any]) -> web.Response:
        marks = self.reactions.setdefault((str(args["channel"]), str(args["timestamp"])), [])
        if args["name"] in marks:
            return web.json_response({"ok": False, "error": "already_reacted"})
        marks.append(str(args["name"]))
        await self._notify()
        return web.json_response({"ok": True})

    async def _reactions_remove(self, request: web.Request, args: dict[str, Any]) -> web.Response:
        marks = self.reactions.get((str(args["channel"]), str(args["timestamp"])), [])
        if args["name"] not in marks:
            return web.json_response({"ok": False, "error": "no_reaction"})
        marks.remove(str(args["name"]))
        await self._notify()
        return web.json_response({"ok": True})

    async def _chat_update(self, request: web.Request, args: dict[str, Any]) -> web.Response:
        blocks = args.get("blocks") or []
        for posted in self.posted:
            if posted.channel == args.get("channel") and posted.ts == args.get("ts"):
                posted.blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
                posted.text = str(args.get("text") or posted.text)
                await self._notify()
                return web.json_response({"ok": True, "channel": posted.channel, "ts": posted.ts})
        return web.json_response({"ok": False, "error": "message_not_found"})

    async def _chat_delete(self, request: web.Request, args: dict[str, Any]) -> web.Response:
        for posted in self.posted:
            if posted.channel == args.get("channel") and posted.ts == args.get("ts"):
                if posted.ts in self.deleted:
                    break
                self.deleted.append(posted.ts)
                await self._notify()
                return web.json_response({"ok": True, "channel": posted.channel, "ts": posted.ts})
        return web.json_response({"ok": False, "error": "message_not_found"})

    def visible(self, channel: str) -> list[str]:
        """What a user sees in the conversation now: the bot's messages, updates applied."""
        return [p.text for p in self.posted if p.channel == channel and p.ts not in self.deleted]

    async def _conversations_history(
        self, request: web.Request, args: dict[str, Any]
    ) -> web.Response:
        oldest = float(args.get("oldest") or 0)
        messages = [
            self._message_json(p)
            for p in reversed(self.posted)
            if p.channel == args["channel"]
            and p.thread_ts is None
            and float(p.ts) >= oldest
            and p.ts not in self.deleted
        ]
        return web.json_response({"ok": True, "messages": messages, "has_more": False})

    async def _conversations_replies(
        self, request: web.Request, args: dict[str, Any]
    ) -> web.Response:
        parent = [
            m for m in self.said if m.get("channel") == args["channel"] and m["ts"] == args["ts"]
        ]
        messages = parent + [
            self._message_json(p)
            for p in self.posted
            if p.channel == args["channel"]
            and p.thread_ts == args["ts"]
            and p.ts not in self.deleted
        ]
        return web.json_response({"ok": True, "messages": messages, "has_more": False})

    async def _users_info(self, request: web.Request, args: dict[str, Any]) -> web.Response:
        name = self.users.get(args.get("user", ""))
        if name is None:
            return web.json_response({"ok": False, "error": "user_not_found"})
        profile = {"display_name": name, "real_name": name}
        return web.json_response({"ok": True, "user": {"id": args["user"], "profile": profile}})

    async def _conversations_list(self, request: web.Request, args: dict[str, Any]) -> web.Response:
        channels = [
            {"id": cid, "name": name, "is_channel": True, "is_member": True}
            for cid, name in self.channels.items()
        ]
        return web.json_response(
            {"ok": True, "channels": channels, "response_metadata": {"next_cursor": ""}}
        )

    def _message_json(self, posted: Posted) -> dict[str, Any]:
        data: dict[str, Any] = {
            "type": "message",
            "user": posted.user,
            "text": posted.text,
            "ts": posted.ts,
        }
        if posted.metadata:
            data["metadata"] = posted.metadata
        if posted.files:
            data["files"] = posted.files
        return data

    async def _files_getUploadURLExternal(
        self, request: web.Request, args: dict[str, Any]
    ) -> web.Response:
        file_id = f"F{len(self.uploads) + 1:04d}"
        self.uploads[file_id] = (str(args["filename"]), b"")
        return web.json_response(
            {"ok": True, "upload_url": f"{self.base}/upload/{file_id}", "file_id": file_id}
        )

    async def _upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        name, _ = self.uploads[file_id]
        self.uploads[file_id] = (name, await request.read())  # the SDK posts the raw bytes
        return web.Response(text="OK - 200")

    async def _files_completeUploadExternal(
        self, request: web.Request, args: dict[str, Any]
    ) -> web.Response:
        files = args["files"]
        if isinstance(files, str):
            files = json.loads(files)
        shared = []
        for item in files:
            name, _ = self.uploads[item["id"]]
            shared.append({"id": item["id"], "name": name, "title": item.get("title", name)})
        posted = Posted(
            channel=str(args["channel_id"]),
            ts=self.next_ts(),
            text="",
            thread_ts=args.get("thread_ts"),
            files=shared,
        )
        self.posted.append(posted)
        await self._notify()
        return web.json_response({"ok": True, "files": shared})

    async def _apps_connections_open(
        self, request: web.Request, args: dict[str, Any]
    ) -> web.Response:
        return web.json_response({"ok": True, "url": f"ws://127.0.0.1:{self.port}/link"})

    # -- files users share ----------------------------------------------------------------

    def host_file(self, name: str, data: bytes, mime: str) -> dict[str, Any]:
        """A file object as it appears in a ``file_share`` message event."""
        file_id = f"FU{len(self.hosted) + 1:04d}"
        path = f"{file_id}-{name}"
        self.hosted[path] = data
        return {
            "id": file_id,
            "name": name,
            "mimetype": mime,
            "size": len(data),
            "url_private": f"{self.base}/files/{path}",
            "url_private_download": f"{self.base}/files/{path}",
        }

    async def _download(self, request: web.Request) -> web.Response:
        self.download_auth.append(request.headers.get("Authorization"))
        if request.headers.get("Authorization") != f"Bearer {BOT_TOKEN}":
            return web.Response(text="<html>sign in</html>", content_type="text/html")
        data = self.hosted.get(request.match_info["name"])
        return web.Response(body=data) if data is not None else web.Response(status=404)

    # -- Socket Mode ----------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.connections += 1
        self._ws = ws
        await ws.send_json({"type": "hello", "num_connections": 1})
        await self._notify()
        async for frame in ws:
            if frame.type == aiohttp.WSMsgType.TEXT:
                envelope_id = json.loads(frame.data).get("envelope_id")
                if envelope_id:
                    self.acks.append(envelope_id)
                    await self._notify()
        return ws

    async def push(self, body: dict[str, Any], *, retry_attempt: int = 0) -> str:
        """Deliver an Events API body over Socket Mode; returns the envelope id."""
        await self.until(lambda: self._ws is not None and not self._ws.closed)
        assert self._ws is not None
        envelope_id = f"env-{next(self._envelopes)}"
        await self._ws.send_json(
            {
                "envelope_id": envelope_id,
                "type": "events_api",
                "accepts_response_payload": False,
                "retry_attempt": retry_attempt,
                "retry_reason": "timeout" if retry_attempt else "",
                "payload": body,
            }
        )
        return envelope_id

    async def push_interactive(self, payload: dict[str, Any]) -> str:
        """Deliver an interaction payload (``block_actions``) over Socket Mode."""
        await self.until(lambda: self._ws is not None and not self._ws.closed)
        assert self._ws is not None
        envelope_id = f"env-{next(self._envelopes)}"
        await self._ws.send_json(
            {
                "envelope_id": envelope_id,
                "type": "interactive",
                "accepts_response_payload": False,
                "payload": payload,
            }
        )
        return envelope_id

    async def push_command(self, command: str, text: str = "", *, user: str, channel: str) -> str:
        """A slash command the person typed, over Socket Mode (``slash_commands``)."""
        await self.until(lambda: self._ws is not None and not self._ws.closed)
        assert self._ws is not None
        envelope_id = f"env-{next(self._envelopes)}"
        payload = {
            "token": "legacy",
            "team_id": TEAM,
            "channel_id": channel,
            "user_id": user,
            "user_name": user.lower(),
            "command": command,
            "text": text,
            "api_app_id": "A0001",
            "trigger_id": f"trigger-{next(_event_ids)}",
            "response_url": "https://hooks.slack.invalid/commands/1",
        }
        await self._ws.send_json(
            {
                "envelope_id": envelope_id,
                "type": "slash_commands",
                "accepts_response_payload": True,
                "payload": payload,
            }
        )
        return envelope_id

    async def wait_ack(self, envelope_id: str, timeout: float = 5.0) -> None:
        await self.until(lambda: envelope_id in self.acks, timeout)

    async def drop(self) -> None:
        if self._ws is not None:
            await self._ws.close()

    # -- reading what the bot did ---------------------------------------------------------

    def texts(self, channel: str | None = None) -> list[str]:
        return [p.text for p in self.posted if channel in (None, p.channel) and p.text]

    def count(self, method: str, channel: str | None = None) -> int:
        return sum(
            1
            for name, args in self.calls
            if name == method and channel in (None, str(args.get("channel")))
        )

    async def wait_posts(self, count: int, timeout: float = 5.0) -> list[Posted]:
        await self.until(lambda: len(self.posted) >= count, timeout)
        return list(self.posted)


_event_ids = itertools.count(1)


def event_body(event: dict[str, Any], *, event_id: str | None = None) -> dict[str, Any]:
    """An ``event_callback`` as Slack sends it (Socket Mode payload or HTTP body)."""
    return {
        "token": "legacy",
        "team_id": TEAM,
        "api_app_id": "A0001",
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{next(_event_ids):08d}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
    }


def dm_event(
    text: str, *, user: str, ts: str, channel: str = "D0001", **extra: Any
) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": channel,
        "channel_type": "im",
        "user": user,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        **extra,
    }


def edit_event(original: dict[str, Any], text: str, *, edited_ts: str) -> dict[str, Any]:
    """The ``message_changed`` event Slack sends when a person edits ``original``."""
    changed = {**original, "text": text, "edited": {"user": original["user"], "ts": edited_ts}}
    return {
        "type": "message",
        "subtype": "message_changed",
        "channel": original["channel"],
        "channel_type": original.get("channel_type"),
        "message": changed,
        "previous_message": original,
        "ts": edited_ts,
        "event_ts": edited_ts,
    }


def mention_event(
    text: str, *, user: str, ts: str, channel: str = "C0001", **extra: Any
) -> dict[str, Any]:
    return {
        "type": "app_mention",
        "channel": channel,
        "user": user,
        "text": f"<@{BOT_USER}> {text}",
        "ts": ts,
        "event_ts": ts,
        **extra,
    }


def block_actions(posted: Posted, value: str, *, user: str) -> dict[str, Any]:
    """The ``block_actions`` payload Slack sends when ``user`` presses the button whose
    value is ``value`` under the message ``posted``."""
    buttons = [
        element
        for block in posted.blocks
        if block.get("type") == "actions"
        for element in block["elements"]
    ]
    [button] = [b for b in buttons if b.get("value") == value]
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM},
        "api_app_id": "A0001",
        "token": "legacy",
        "container": {
            "type": "message",
            "message_ts": posted.ts,
            "channel_id": posted.channel,
            "is_ephemeral": False,
        },
        "trigger_id": f"trigger-{next(_event_ids)}",
        "team": {"id": TEAM, "domain": "test"},
        "channel": {"id": posted.channel, "name": "directmessage"},
        "message": {
            "type": "message",
            "ts": posted.ts,
            "text": posted.text,
            "user": BOT_USER,
            "blocks": posted.blocks,
        },
        "response_url": "http://127.0.0.1:9/response",
        "actions": [
            {
                "action_id": button["action_id"],
                "block_id": "b1",
                "text": button["text"],
                "value": button["value"],
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


async def post_action(url: str, payload: dict[str, Any], *, secret: str = SIGNING_SECRET) -> int:
    """POST an interaction as Slack does: form-encoded ``payload``, signed over the raw
    body. Returns the HTTP status."""
    raw = urllib.parse.urlencode({"payload": json.dumps(payload)})
    ts = str(int(time.time()))
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": SignatureVerifier(secret).generate_signature(timestamp=ts, body=raw),
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=raw, headers=headers) as response,
    ):
        await response.read()
        return response.status


async def post_signed(
    url: str,
    body: dict[str, Any],
    *,
    secret: str = SIGNING_SECRET,
    timestamp: int | None = None,
    signature: str | None = None,
    retry_num: int | None = None,
) -> int:
    """POST ``body`` as Slack would: signed over the raw bytes. Returns the HTTP status."""
    raw = json.dumps(body)
    ts = str(timestamp if timestamp is not None else int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature
        or SignatureVerifier(secret).generate_signature(timestamp=ts, body=raw),
    }
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = "http_timeout"
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=raw, headers=headers) as response,
    ):
        await response.read()
        return response.status
