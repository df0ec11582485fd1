"""A fake Discord: the REST API and the gateway websocket on 127.0.0.1, for the real discord.py.

discord.py has no base-URL option; tests point two class attributes at this server
(``discord.http.Route.BASE`` and ``DiscordWebSocket.DEFAULT_GATEWAY``, see :func:`patch`).
The gateway speaks HELLO, HEARTBEAT/ACK, IDENTIFY → READY, RESUME → (replay) → RESUMED and
the dispatches tests push (``MESSAGE_CREATE``). It can drop the socket, fail resumes,
refuse every connection and replay events the client already saw. REST records what the
bot posted (honouring ``nonce`` + ``enforce_nonce`` as Discord does), typing and reactions,
serves attachments, and can answer a post with a 429 or cut the connection after storing it,
or hold it open (:meth:`FakeDiscord.hold_post`, tests/fakes/holds.py). ``GET`` of a
channel's messages (``after``, ``limit``) reads the bot's posts back as Discord does.
Buttons: posts keep their ``components``, ``POST /users/@me/channels`` opens a DM, a press is
an ``INTERACTION_CREATE`` (:meth:`FakeDiscord.press`) and its answer goes to the interaction
callback endpoint, which records it (``callbacks``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import discord
import pytest
import yarl
from aiohttp import web

from tests.fakes.holds import Hold, Holds

# Realistic 18-19 digit snowflakes: discord.py parses mentions in text only for those.
BOT_ID = 310_000_000_000_001_000
APP_ID = 310_000_000_000_001_001
GUILD_ID = 310_000_000_000_002_000
TEXT_CHANNEL = 310_000_000_000_000_500
OTHER_CHANNEL = 310_000_000_000_000_501
THREAD = 310_000_000_000_000_600
MESSAGE_CONTENT = 1 << 15
SUPPRESS_EMBEDS = 1 << 2  # a message flag: Discord embeds (fetches) none of its links


def user(user_id: int, username: str, global_name: str | None = None) -> dict[str, Any]:
    return {
        "id": str(user_id),
        "username": username,
        "discriminator": "0",
        "global_name": global_name,
        "avatar": None,
    }


BOT_USER = {**user(BOT_ID, "switchboard"), "bot": True}


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    # discord.py parses JSON only when Content-Type is exactly application/json.
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


@dataclass
class Posted:
    id: int
    channel_id: int
    content: str
    nonce: str | None
    reference: int | None
    files: dict[str, bytes] = field(default_factory=dict)
    components: list[dict[str, Any]] = field(default_factory=list)
    flags: int = 0  # as posted, SUPPRESS_EMBEDS as the last edit that named it set it


class FakeDiscord:
    def __init__(self) -> None:
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._ids = itertools.count(1)
        self._changed = asyncio.Condition()
        # gateway
        self.connections = 0
        self.identifies = 0
        self.resumes = 0
        self.intents: int | None = None
        self.resume_failures = 0  # how many RESUMEs to fail, then resume normally
        self.resume_failure: Literal["close", "invalid_session"] = "close"
        self.refuse_connections = False  # close every socket before HELLO
        self.replay_overlap = 0  # events already seen that a RESUME replays anyway
        self.close_identify_with: int | None = None  # answer IDENTIFY by closing with this
        self.close_after_ready: int | None = None  # close every new session/resume at once
        self._ws: web.WebSocketResponse | None = None
        self._session_id = ""
        self._seq = 0
        self._history: list[dict[str, Any]] = []
        # REST
        self.posted: list[Posted] = []
        self.post_attempts = 0
        self.typing: list[int] = []
        self.reactions: list[tuple[str, int, int, str]] = []  # (added|removed, chan, msg, emoji)
        self.fail_posts: deque[tuple[str, float]] = deque()  # ("429"|"disconnect", retry_after)
        self.limited: dict[
            int, float
        ] = {}  # channel id -> answer every post there 429, retry_after
        self.attempts_in: dict[int, int] = {}  # channel id -> posts tried there
        self.files: dict[str, bytes] = {}
        self.fail_me: deque[float] = deque()  # answer GET /users/@me with 429, retry_after
        self.callbacks: list[tuple[int, dict[str, Any]]] = []  # (interaction id, response)
        self.edits: list[tuple[int, str]] = []  # (message id, new content)
        self.edit_flags: list[int | None] = []  # the flags each edit asked for (None: none)
        self.deleted: list[int] = []
        self.command_registrations: list[list[dict[str, Any]]] = []
        self.holds = Holds()
        self.history_reads = 0

    # -- server ---------------------------------------------------------------------------

    async def start(self) -> FakeDiscord:
        app = web.Application(client_max_size=50_000_000)
        app.router.add_get("/gateway", self._gateway)
        api = "/api/v10"
        app.router.add_get(f"{api}/users/@me", self._me)
        app.router.add_get(f"{api}/oauth2/applications/@me", self._application)
        app.router.add_post(f"{api}/channels/{{cid}}/messages", self._create_message)
        app.router.add_get(f"{api}/channels/{{cid}}/messages", self._list_messages)
        app.router.add_post(f"{api}/channels/{{cid}}/typing", self._typing)
        app.router.add_patch(f"{api}/channels/{{cid}}/messages/{{mid}}", self._edit_message)
        app.router.add_delete(f"{api}/channels/{{cid}}/messages/{{mid}}", self._delete_message)
        app.router.add_post(f"{api}/users/@me/channels", self._open_dm)
        app.router.add_post(f"{api}/interactions/{{iid}}/{{token}}/callback", self._callback)
        app.router.add_put(f"{api}/applications/{{aid}}/commands", self._put_commands)
        reaction = f"{api}/channels/{{cid}}/messages/{{mid}}/reactions/{{emoji}}/@me"
        app.router.add_put(reaction, self._react)
        app.router.add_delete(reaction, self._react)
        app.router.add_get("/attachments/{name}", self._attachment)
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
    def gateway_url(self) -> yarl.URL:
        return yarl.URL(f"ws://127.0.0.1:{self.port}/gateway")

    def hold_post(self, channel_id: int, *, deliver: bool) -> Hold:
        """Hold the next post to ``channel_id`` open (made first, or never)."""
        return self.holds.add(deliver=deliver, matches=lambda facts: facts["channel"] == channel_id)

    def patch(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Point discord.py at this server: the two class attributes, nothing else."""
        monkeypatch.setattr(discord.http.Route, "BASE", f"{self.base}/api/v10")
        monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", self.gateway_url)

    async def until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        async def check() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(check(), timeout)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- gateway --------------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.connections += 1
        await self._notify()
        if self.refuse_connections:
            await ws.close(code=4000)
            return ws
        self._ws = ws
        await ws.send_json({"op": 10, "d": {"heartbeat_interval": 41250}})
        async for frame in ws:
            payload = json.loads(frame.data)
            op = payload["op"]
            if op == 1:
                await ws.send_json({"op": 11})
            elif op == 2:
                await self._identify(ws, payload["d"])
            elif op == 6:
                await self._resume(ws, payload["d"])
            await self._notify()
        return ws

    async def _identify(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        self.identifies += 1
        if self.close_identify_with is not None:  # 4004 bad token, 4014 disallowed intents...
            await ws.close(code=self.close_identify_with)
            return
        self.intents = data.get("intents")
        self._session_id = f"session-{self.identifies}"
        self._seq = 0
        self._history = []
        await self._send(
            "READY",
            {
                "v": 10,
                "user": BOT_USER,
                "guilds": [guild()],
                "session_id": self._session_id,
                "resume_gateway_url": str(self.gateway_url),
                "application": {"id": str(APP_ID), "flags": 0},
            },
        )
        if self.close_after_ready is not None:
            await ws.close(code=self.close_after_ready)

    async def _resume(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        self.resumes += 1
        if data.get("session_id") != self._session_id:  # unknown or invalidated session
            await ws.send_json({"op": 9, "d": False})  # what Discord answers: identify again
            return
        if self.resume_failures > 0:
            self.resume_failures = max(0, self.resume_failures - 1)
            if self.resume_failure == "invalid_session":
                await ws.send_json({"op": 9, "d": True})
            else:
                await ws.close(code=4000)
            return
        seen = int(data.get("seq") or 0) - self.replay_overlap
        for event in [e for e in self._history if e["s"] > seen]:
            await ws.send_json(event)
        self._seq += 1
        await ws.send_json({"op": 0, "t": "RESUMED", "s": self._seq, "d": {}})
        if self.close_after_ready is not None:
            await ws.close(code=self.close_after_ready)

    async def _send(self, event: str, data: dict[str, Any]) -> None:
        self._seq += 1
        frame = {"op": 0, "t": event, "s": self._seq, "d": data}
        self._history.append(frame)
        if self._ws is not None and not self._ws.closed:
            await self._ws.send_json(frame)

    async def drop(self, code: int = 4000) -> None:
        """Close the gateway socket (a resumable close code by default). 4007 (invalid
        sequence) and 4009 (session timed out) end the session, as Discord does: a RESUME
        of it is answered with op 9 INVALID_SESSION (d=false)."""
        if code in (4007, 4009):
            self._session_id = ""
        if self._ws is not None:
            await self._ws.close(code=code)

    # -- pushing messages -----------------------------------------------------------------

    def snowflake(self) -> int:
        return discord.utils.time_snowflake(datetime.now(UTC)) + next(self._ids)

    async def message(
        self,
        content: str,
        *,
        author: dict[str, Any],
        channel_id: int,
        guild: bool = False,
        mentions: tuple[dict[str, Any], ...] = (),
        reply_to: Posted | None = None,
        attachments: tuple[tuple[Any, ...], ...] = (),  # (filename, mime, data[, fields])
        message_id: int | None = None,
        replying_to_person: tuple[int, dict[str, Any], str] | None = None,
        forwarding: tuple[int, str] | None = None,
    ) -> int:
        """Dispatch MESSAGE_CREATE; returns the message id. ``reply_to``: a reply to one of
        the bot's posts; ``replying_to_person``: (message id, author, content) of a person's
        earlier message in the same channel, replied to; ``forwarding``: (the channel it was
        in, its content) of a message this one forwards, as Discord sends a forward (a
        reference of type 1 and a snapshot without author; ``attachments`` are the
        snapshot's, ``content`` must be empty)."""
        mid = message_id or self.snowflake()
        data: dict[str, Any] = {
            "id": str(mid),
            "channel_id": str(channel_id),
            "author": author,
            "content": content,
            "timestamp": datetime.now(UTC).isoformat(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": list(mentions),
            "mention_roles": [],
            "attachments": [self._attachment_payload(*a) for a in attachments],
            "embeds": [],
            "pinned": False,
            "type": 19 if reply_to or replying_to_person else 0,
        }
        if guild:
            data["guild_id"] = str(GUILD_ID)
            if self.intents is not None and not self.intents & MESSAGE_CONTENT:
                data["content"] = ""  # what Discord does without the intent
        if reply_to is not None:
            data["message_reference"] = {
                "message_id": str(reply_to.id),
                "channel_id": str(reply_to.channel_id),
            }
            data["referenced_message"] = self._message_payload(reply_to)
        if replying_to_person is not None:
            earlier, earlier_author, earlier_content = replying_to_person
            data["message_reference"] = {
                "message_id": str(earlier),
                "channel_id": str(channel_id),
            }
            data["referenced_message"] = {
                **{k: v for k, v in data.items() if k not in ("message_reference", "type")},
                "id": str(earlier),
                "author": earlier_author,
                "content": earlier_content,
                "mentions": [],
                "attachments": [],
                "type": 0,
            }
        if forwarding is not None:
            source, original = forwarding
            data["message_reference"] = {
                "type": 1,
                "message_id": str(self.snowflake()),
                "channel_id": str(source),
                "guild_id": str(GUILD_ID),
            }
            data["message_snapshots"] = [
                {
                    "message": {
                        "type": 0,
                        "content": original,
                        "embeds": [],
                        "attachments": data["attachments"],
                        "timestamp": datetime(2026, 11, 20, 9, 14, tzinfo=UTC).isoformat(),
                        "edited_timestamp": None,
                        "flags": 0,
                        "mentions": [],
                        "mention_roles": [],
                    }
                }
            ]
            data["attachments"] = []
        await self._send("MESSAGE_CREATE", data)
        return mid

    async def edit(
        self, message_id: int, content: str, *, author: dict[str, Any], channel_id: int
    ) -> None:
        """Dispatch the MESSAGE_UPDATE of a person editing their message ``message_id``."""
        data: dict[str, Any] = {
            "id": str(message_id),
            "channel_id": str(channel_id),
            "author": author,
            "content": content,
            "timestamp": datetime.now(UTC).isoformat(),
            "edited_timestamp": datetime.now(UTC).isoformat(),
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
        }
        await self._send("MESSAGE_UPDATE", data)

    async def dm(self, content: str, *, author: dict[str, Any], **kwargs: Any) -> int:
        return await self.message(
            content, author=author, channel_id=int(author["id"]) + 7, **kwargs
        )

    def _attachment_payload(
        self, filename: str, mime: str, data: bytes, *extra: dict[str, Any]
    ) -> dict[str, Any]:
        """``extra``: more fields, e.g. a voice message's ``duration_secs`` and ``waveform``."""
        aid = self.snowflake()
        name = f"{aid}-{filename}"
        self.files[name] = data
        url = f"{self.base}/attachments/{name}"
        return {
            "id": str(aid),
            "filename": filename,
            "size": len(data),
            "url": url,
            "proxy_url": url,
            "content_type": mime,
            **({} if not extra else extra[0]),
        }

    def _message_payload(self, posted: Posted) -> dict[str, Any]:
        return {
            "id": str(posted.id),
            "channel_id": str(posted.channel_id),
            "author": BOT_USER,
            "content": posted.content,
            "timestamp": datetime.now(UTC).isoformat(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "nonce": posted.nonce,
            "flags": posted.flags,
        }

    # -- REST -----------------------------------------------------------------------------

    async def _me(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != "Bot test-token":
            return json_response({"message": "401: Unauthorized", "code": 0}, 401)
        if self.fail_me:
            wait = self.fail_me.popleft()
            body = {"message": "You are being rate limited.", "retry_after": wait, "global": True}
            # Discord's own 429s pass Cloudflare (Via); discord.py reads one without as a ban.
            headers = {"Retry-After": str(wait), "Via": "1.1 google"}
            return json_response(body, 429, headers)
        return json_response(BOT_USER)

    async def _application(self, request: web.Request) -> web.Response:
        return json_response(
            {
                "id": str(APP_ID),
                "name": "switchboard",
                "description": "",
                "icon": None,
                "bot_public": False,
                "bot_require_code_grant": False,
                "verify_key": "0" * 64,
                "owner": user(42, "owner"),
                "flags": 0,
            }
        )

    async def _create_message(self, request: web.Request) -> web.StreamResponse:
        self.post_attempts += 1
        channel_id = int(request.match_info["cid"])
        files: dict[str, bytes] = {}
        if request.content_type.startswith("multipart/"):
            body: dict[str, Any] = {}
            reader = await request.multipart()
            async for part in reader:
                if part.name == "payload_json":
                    body = json.loads(await part.text())
                else:
                    files[part.filename or part.name or "file"] = bytes(await part.read())
        else:
            body = await request.json()
        nonce = body.get("nonce")
        self.attempts_in[channel_id] = self.attempts_in.get(channel_id, 0) + 1
        await self._notify()
        if body.get("enforce_nonce") and nonce:
            for earlier in self.posted:
                if earlier.nonce == nonce and earlier.channel_id == channel_id:
                    return json_response(self._message_payload(earlier))
        if channel_id in self.limited or (self.fail_posts and self.fail_posts[0][0] == "429"):
            wait = self.limited.get(channel_id) or self.fail_posts.popleft()[1]
            body_429 = {
                "message": "You are being rate limited.",
                "retry_after": wait,
                "global": False,
            }
            return json_response(body_429, 429, {"Retry-After": str(wait)})
        held = self.holds.take({"channel": channel_id})
        if held is not None:
            return await Holds.serve(
                held,
                lambda: self._post(channel_id, body, nonce, files),
                lambda: json_response({"message": "held, never made", "code": 0}, 502),
            )
        return await self._post(channel_id, body, nonce, files, request)

    async def _post(
        self,
        channel_id: int,
        body: dict[str, Any],
        nonce: str | None,
        files: dict[str, bytes],
        request: web.Request | None = None,
    ) -> web.Response:
        reference = body.get("message_reference") or {}
        posted = Posted(
            id=self.snowflake(),
            channel_id=channel_id,
            content=body.get("content") or "",
            nonce=nonce,
            reference=int(reference["message_id"]) if reference.get("message_id") else None,
            files=files,
            components=body.get("components") or [],
            flags=int(body.get("flags") or 0),
        )
        self.posted.append(posted)
        await self._notify()
        if request is not None and self.fail_posts and self.fail_posts[0][0] == "disconnect":
            self.fail_posts.popleft()
            assert request.transport is not None
            request.transport.abort()  # stored, but the client never hears back
            return web.Response()
        return json_response(self._message_payload(posted))

    async def _list_messages(self, request: web.Request) -> web.Response:
        """The channel's messages after ``after`` (the oldest ``limit`` of them), newest
        first, as Discord answers."""
        self.history_reads += 1
        await self._notify()
        channel_id = int(request.match_info["cid"])
        after = int(request.query.get("after", "0"))
        limit = int(request.query.get("limit", "50"))
        mine = sorted(
            (
                p
                for p in self.posted
                if p.channel_id == channel_id and p.id > after and p.id not in self.deleted
            ),
            key=lambda p: p.id,
        )[:limit]
        return json_response([self._message_payload(p) for p in reversed(mine)])

    def _live(self, request: web.Request) -> Posted | None:
        mid = int(request.match_info["mid"])
        return next((p for p in self.posted if p.id == mid and mid not in self.deleted), None)

    async def _edit_message(self, request: web.Request) -> web.Response:
        posted = self._live(request)
        if posted is None:
            return json_response({"message": "Unknown Message", "code": 10008}, 404)
        body = await request.json()
        posted.content = body.get("content") or ""
        if "components" in body:  # absent: kept; [] takes them off
            posted.components = body["components"] or []
        flags = body.get("flags")
        if flags is not None:  # an edit may set or clear only SUPPRESS_EMBEDS
            posted.flags = posted.flags & ~SUPPRESS_EMBEDS | int(flags) & SUPPRESS_EMBEDS
        self.edits.append((posted.id, posted.content))
        self.edit_flags.append(flags)
        await self._notify()
        return json_response(self._message_payload(posted))

    async def _delete_message(self, request: web.Request) -> web.Response:
        posted = self._live(request)
        if posted is None:
            return json_response({"message": "Unknown Message", "code": 10008}, 404)
        self.deleted.append(posted.id)
        await self._notify()
        return web.Response(status=204)

    def visible(self, channel_id: int) -> list[str]:
        """What a user sees in the channel now: the bot's messages, edits applied."""
        return [
            p.content
            for p in self.posted
            if p.channel_id == channel_id and p.id not in self.deleted
        ]

    async def _open_dm(self, request: web.Request) -> web.Response:
        recipient = int((await request.json())["recipient_id"])
        return json_response(
            {
                "id": str(recipient + 7),  # as dm_channel() numbers them
                "type": 1,
                "last_message_id": None,
                "recipients": [user(recipient, f"user{recipient}")],
            }
        )

    async def _callback(self, request: web.Request) -> web.Response:
        interaction = int(request.match_info["iid"])
        body = await request.json()
        self.callbacks.append((interaction, body))
        await self._notify()
        return json_response(
            {
                "interaction": {"id": str(interaction), "type": 3},
                "resource": {"type": body["type"]},
            }
        )

    async def _put_commands(self, request: web.Request) -> web.Response:
        self.command_registrations.append(await request.json())
        await self._notify()
        listed = [
            {**c, "id": str(self.snowflake()), "application_id": str(APP_ID), "version": "1"}
            for c in self.command_registrations[-1]
        ]
        return json_response(listed)

    async def invoke(
        self,
        name: str,
        text: str = "",
        *,
        author: dict[str, Any],
        channel_id: int,
        guild: bool = False,
    ) -> int:
        """Dispatch the INTERACTION_CREATE of ``author`` using the slash command ``name`` in
        the DM ``channel_id`` (with ``guild``, in that channel of the guild); returns the
        interaction id."""
        interaction = self.snowflake()
        options = [{"type": 3, "name": "text", "value": text}] if text else []
        where: dict[str, Any] = {
            "channel": {"id": str(channel_id), "type": 1, "recipients": [author]},
            "user": author,
        }
        if guild:  # Discord sends the guild member instead of the user
            where = {
                "guild_id": str(GUILD_ID),
                "channel": {"id": str(channel_id), "type": 0, "guild_id": str(GUILD_ID)},
                "member": {
                    "user": author,
                    "roles": [],
                    "joined_at": datetime.now(UTC).isoformat(),
                    "deaf": False,
                    "mute": False,
                    "flags": 0,
                    "permissions": "0",
                },
            }
        await self._send(
            "INTERACTION_CREATE",
            {
                "id": str(interaction),
                "application_id": str(APP_ID),
                "type": 2,
                "data": {"id": str(self.snowflake()), "name": name, "type": 1, "options": options},
                "channel_id": str(channel_id),
                **where,
                "token": f"interaction-token-{interaction}",
                "version": 1,
                "attachment_size_limit": 8_388_608,
                "locale": "en-US",
                "app_permissions": "0",
                "entitlements": [],
            },
        )
        return interaction

    async def press(self, posted: Posted, custom_id: str, *, presser: dict[str, Any]) -> int:
        """Dispatch the INTERACTION_CREATE a press by ``presser`` on the button
        ``custom_id`` under the DM message ``posted`` makes; returns the interaction id."""
        buttons = [c for row in posted.components for c in row.get("components", [])]
        assert custom_id in [b.get("custom_id") for b in buttons], "no such button"
        interaction = self.snowflake()
        message = {**self._message_payload(posted), "components": posted.components}
        await self._send(
            "INTERACTION_CREATE",
            {
                "id": str(interaction),
                "application_id": str(APP_ID),
                "type": 3,
                "data": {"custom_id": custom_id, "component_type": 2},
                "channel_id": str(posted.channel_id),
                "channel": {  # the DM is with the user dm_channel() numbered it after
                    "id": str(posted.channel_id),
                    "type": 1,
                    "recipients": [user(posted.channel_id - 7, "recipient")],
                },
                "user": presser,
                "token": f"interaction-token-{interaction}",
                "version": 1,
                "message": message,
                "attachment_size_limit": 8_388_608,
                "locale": "en-US",
                "app_permissions": "0",
                "entitlements": [],
            },
        )
        return interaction

    async def _typing(self, request: web.Request) -> web.Response:
        self.typing.append(int(request.match_info["cid"]))
        await self._notify()
        return web.Response(status=204)

    async def _react(self, request: web.Request) -> web.Response:
        action = "added" if request.method == "PUT" else "removed"
        info = request.match_info
        self.reactions.append((action, int(info["cid"]), int(info["mid"]), info["emoji"]))
        await self._notify()
        return web.Response(status=204)

    async def _attachment(self, request: web.Request) -> web.Response:
        data = self.files.get(request.match_info["name"])
        if data is None:
            return web.Response(status=404)
        return web.Response(body=data)

    # -- reading what the bot did ---------------------------------------------------------

    def texts(self, channel_id: int | None = None) -> list[str]:
        return [p.content for p in self.posted if channel_id in (None, p.channel_id)]

    async def wait_posts(self, count: int, timeout: float = 5.0) -> list[Posted]:
        await self.until(lambda: len(self.posted) >= count, timeout)
        return list(self.posted)


def dm_channel(author: dict[str, Any]) -> int:
    """The id of the DM channel between the bot and ``author``."""
    return int(author["id"]) + 7


def guild() -> dict[str, Any]:
    text = {
        "id": str(TEXT_CHANNEL),
        "type": 0,
        "guild_id": str(GUILD_ID),
        "name": "general",
        "position": 0,
        "permission_overwrites": [],
        "nsfw": False,
        "parent_id": None,
        "topic": None,
        "last_message_id": None,
        "rate_limit_per_user": 0,
    }
    other = {**text, "id": str(OTHER_CHANNEL), "name": "random", "position": 1}
    thread = {
        "id": str(THREAD),
        "type": 11,
        "guild_id": str(GUILD_ID),
        "parent_id": str(TEXT_CHANNEL),
        "owner_id": "42",
        "name": "a topic",
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 60,
            "archive_timestamp": datetime.now(UTC).isoformat(),
            "locked": False,
        },
        "member_count": 2,
        "message_count": 0,
        "rate_limit_per_user": 0,
        "last_message_id": None,
    }
    return {
        "id": str(GUILD_ID),
        "name": "Test guild",
        "channels": [text, other],
        "threads": [thread],
        "roles": [],
        "members": [],
        "emojis": [],
        "stickers": [],
        "features": [],
        "unavailable": False,
        "member_count": 3,
    }
