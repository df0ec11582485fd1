"""The Matrix channel: matrix-nio's ``AsyncClient`` against the homeserver.

Start logs in (an access token is checked with ``whoami``; a password logs in with the
configured or remembered device id, so restarts keep one device), then runs the sync loop
(:mod:`.intake`). A refused token or password fails the start, naming the setting; an
unreachable homeserver only delays intake (the loop retries with backoff).

Rooms: invites are accepted from people the access gate would let in (owners, admins,
``allow_from``, paired people), and for a direct chat also from anyone while ``dm_policy`` is
``pairing`` or ``open`` (so a stranger can ask for a pairing code); others are declined.
End-to-end encrypted rooms are left (:mod:`.encrypted`): an accepted invitation into one is
joined, the bot says once why it cannot take part, and leaves; nothing said there is
journaled. Joining first lets the inviter read the reason in the room (a declined invite
shows no reason in Matrix clients).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from nio import AsyncClient, AsyncClientConfig, LoginResponse, SyncResponse, WhoamiResponse
from nio.responses import JoinResponse, RoomInfo

from channels.matrix import render
from channels.matrix.convert import CHANNEL, Room, convert
from channels.matrix.encrypted import EncryptedRooms
from channels.matrix.intake import SyncLoop, inviter
from channels.matrix.media import MediaStore
from channels.matrix.probe import probe as check_credentials
from channels.matrix.sender import Sender
from channels.matrix.settings import MatrixSettings
from channels.matrix.state import DeviceFile
from gateway.core.backoff import Backoff
from gateway.core.bus import InboundSink
from gateway.core.channel import ChannelContext, ChannelHealth, StartContext
from gateway.core.errors import ChannelPermanentError, ConfigError, not_set
from gateway.core.messages import ChatRef, ChatType, InboundMessage, OutboundMessage

log = logging.getLogger(__name__)

DRAFT_INTERVAL = 1.0  # seconds between edits of a room's streamed draft


class MatrixChannel:
    name = CHANNEL

    def __init__(
        self, section: MatrixSettings, context: ChannelContext, *, backoff: Backoff | None = None
    ) -> None:
        if not section.enabled or not section.homeserver:
            raise not_set("matrix.homeserver")
        if not section.user_id:
            raise not_set("matrix.user_id")
        self.settings = section
        self._device_file = DeviceFile(context.data_dir / "channels" / "matrix.json")
        config = AsyncClientConfig(
            max_limit_exceeded=0,  # a 429 comes back to us: the outbox holds the room
            max_timeouts=0,  # a timeout too: the outbox retries, with the same transaction id
            request_timeout=section.sync_timeout_seconds + 30,
            store_sync_tokens=False,
            encryption_enabled=False,
        )
        self.client = AsyncClient(
            section.homeserver.rstrip("/"),
            section.user_id,
            device_id=section.device_id or self._device_file.device_id() or "",
            config=config,
        )
        self._sender = Sender(self.client)
        self._media = MediaStore(
            self.client,
            context.workspace_dir / "attachments" / self.name,
            max_bytes=section.max_attachment_bytes,
        )
        self._backoff = backoff or Backoff(base=1.0, cap=60.0)
        self._sink: InboundSink | None = None
        self._loop: SyncLoop | None = None
        self._encrypted = EncryptedRooms(self.client, self._sender)
        self._declined: set[str] = set()
        self._known_rooms: set[str] = set()  # rooms joined before the current sync
        self._last_error: str | None = None
        self._last_message_at: float | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, context: StartContext) -> None:
        self._sink = context.sink
        await self._log_in()
        self._loop = SyncLoop(
            self.client,
            self._on_sync,
            context.records,
            timeout_ms=self.settings.sync_timeout_seconds * 1000,
            backoff=self._backoff,
            on_status=self._status,
        )
        self._loop.start()
        log.info("matrix: %s on %s", self.settings.user_id, self.settings.homeserver)

    async def stop(self) -> None:
        if self._loop is not None:
            await self._loop.stop()
            self._loop = None
        await self.client.close()
        self._sink = None

    async def _log_in(self) -> None:
        section = self.settings
        try:
            if section.access_token is not None and section.access_token.get_secret_value().strip():
                self.client.access_token = section.access_token.get_secret_value().strip()
                answer: Any = await self.client.whoami()
                if isinstance(answer, WhoamiResponse):
                    self.client.user_id = answer.user_id
                    self.client.device_id = answer.device_id or self.client.device_id
                    return
                setting = "SWITCHBOARD_MATRIX__ACCESS_TOKEN"
            else:
                assert section.password is not None
                answer = await self.client.login(
                    section.password.get_secret_value(), device_name="Switchboard"
                )
                if isinstance(answer, LoginResponse):
                    self._device_file.remember(answer.device_id)
                    return
                setting = "SWITCHBOARD_MATRIX__PASSWORD"
        except (OSError, TimeoutError) as exc:
            self._status(f"cannot reach {section.homeserver}: {exc}")
            log.warning("matrix: cannot reach %s (%s); syncing will retry", section.homeserver, exc)
            return
        code = str(getattr(answer, "status_code", "") or "")
        if code in ("M_UNKNOWN_TOKEN", "M_FORBIDDEN", "M_MISSING_TOKEN", "M_USER_DEACTIVATED"):
            raise ConfigError(
                f"the Matrix homeserver refused the login ({answer}); check {setting} "
                "and SWITCHBOARD_MATRIX__USER_ID",
                field="matrix.access_token" if "TOKEN" in setting else "matrix.password",
            )
        self._status(f"login failed: {answer}")

    # -- inbound --------------------------------------------------------------------------

    async def _on_sync(self, answer: SyncResponse, first: bool) -> None:
        """Handle one sync answer; raising leaves its token unstored (it is asked again)."""
        sink = self._sink
        if sink is None:
            raise RuntimeError("matrix channel is stopped")
        for room_id, invite in answer.rooms.invite.items():
            await self._invited(sink, room_id, invite)
        readable: dict[str, RoomInfo] = {}
        for room_id, joined in answer.rooms.join.items():
            if await self._encrypted.encrypted(room_id):  # before any of its events
                await self._encrypted.refuse(room_id, joined)
            else:
                readable[room_id] = joined
        known = set(self._known_rooms)
        self._known_rooms.update(answer.rooms.join)
        if first:
            return
        for room_id, joined in readable.items():
            if joined.timeline.limited and room_id in known:  # a fresh join's history is old
                log.warning(
                    "matrix: more messages arrived in %s than one sync holds; older ones are skipped",
                    room_id,
                )
            events = [event.source for event in joined.timeline.events]
            if room_id not in known:  # joined in this sync: nothing said before it is ours
                events = _after_joining(events, self.client.user_id)
            for event in events:
                await self._event(sink, room_id, event)

    async def _event(self, sink: InboundSink, room_id: str, event: dict[str, Any]) -> None:
        user_id = self.client.user_id
        room = self.client.rooms.get(room_id)
        if room is None:
            return
        converted = convert(
            event,
            Room(room_id, room.member_count <= 2, {u: room.user_name(u) or "" for u in room.users}),
            user_id,
            our_events=frozenset(self._sender.sent_events),
        )
        if converted is None:
            return
        message = converted.message
        if converted.files:
            admitted = await sink.admits(message)
            message = replace(
                message,
                attachments=await self._media.fetch(message, converted.files, download=admitted),
            )
        await sink.publish_inbound(message)  # raises: the sync token is not stored
        self._last_message_at = time.time()

    async def _invited(self, sink: InboundSink, room_id: str, invite: Any) -> None:
        if room_id in self._declined:
            return
        who, direct = inviter(invite, self.client.user_id)
        if who is None:
            return
        probe = InboundMessage(
            channel=self.name,
            chat_id=room_id if not direct else who,
            sender_id=who,
            text="",
            platform_message_id="",
            chat_type=ChatType.DM if direct else ChatType.GROUP,
            mentioned=True,
        )
        welcome = direct and self.settings.dm_policy in ("pairing", "open")
        if welcome or await sink.admits(probe):
            answer = await self.client.join(room_id)
            if isinstance(answer, JoinResponse):
                log.info("matrix: joined %s at the invitation of %s", room_id, who)
                return
            log.warning("matrix: could not join %s: %s", room_id, answer)
            raise ConnectionError(f"join failed: {answer}")
        settings = self.settings
        known = who in (*settings.allow_from, *settings.admins, *settings.owners)
        log.warning(
            "matrix: declined an invitation to %s from %s (%s)",
            room_id,
            who,
            f"the room is not in matrix.group_allow_from: add {room_id} there and invite again"
            if known and not direct
            else "not an allowed user",
        )
        self._declined.add(room_id)
        await self.client.room_leave(room_id)

    # -- outbound -------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> str | None:
        if message.direct:  # a person's id: their direct room with the bot
            message = replace(message, chat_id=await self._direct_room(message.chat_id))
        return await self._sender.send(message)

    async def _direct_room(self, user_id: str) -> str:
        for room_id, room in self.client.rooms.items():
            if room.member_count <= 2 and user_id in room.users and not room.encrypted:
                return str(room_id)
        raise ChannelPermanentError(
            f"no direct room with {user_id}: they should invite the bot first"
        )

    async def typing(self, chat: ChatRef) -> None:
        await self.client.room_typing(chat.chat_id, True, timeout=10_000)

    # -- streaming by editing (gateway/runtime/outbound/drafts.py) ---------------------------------

    draft_interval = DRAFT_INTERVAL

    def draft_parts(self, text: str) -> list[str]:
        return render.parts(text)

    async def post_draft(self, chat: ChatRef, text: str, *, reply_to: str | None) -> str:
        return await self._sender.post_draft(chat, text, reply_to=reply_to)

    async def edit_draft(self, chat: ChatRef, message_id: str, text: str) -> None:
        await self._sender.edit_draft(chat, message_id, text)

    async def delete_draft(self, chat: ChatRef, message_id: str) -> None:
        await self._sender.redact(chat, message_id)

    async def finish_drafts(self, message: OutboundMessage, drafts: Sequence[str]) -> str | None:
        return await self._sender.send(message, drafts)

    async def probe(self) -> str:
        """``whoami`` (or a login) against the homeserver for ``switchboard doctor``."""
        return await check_credentials(self.settings)

    def health(self) -> ChannelHealth:
        synced = self._loop is not None and self._loop.synced.is_set()
        return ChannelHealth(
            connected=synced and self._last_error is None,
            last_error=self._last_error,
            last_message_at=self._last_message_at,
            detail=f"{self.client.user_id} on {self.settings.homeserver}",
        )

    def _status(self, error: str | None) -> None:
        self._last_error = error


def _after_joining(events: list[dict[str, Any]], user_id: str) -> list[dict[str, Any]]:
    """The events after the bot's own join among ``events`` (a room's timeline); all of them
    when the join is not among them (a room it was in already, seen again after a restart)."""
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if (
            event.get("type") == "m.room.member"
            and event.get("state_key") == user_id
            and (event.get("content") or {}).get("membership") == "join"
        ):
            return events[index + 1 :]
    return events
