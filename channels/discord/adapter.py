"""The Discord channel: gateway events in, REST messages out (discord.py 2.x).

Inbound: every ``MESSAGE_CREATE`` is converted (:mod:`.convert`), its files fetched
(:mod:`.media`) and handed to the gateway's access gate, one message at a time per chat so
the journal keeps the order people wrote in. Discord has no acknowledgement to withhold: a
message whose journaling fails (disk full) is logged and reported in ``health()``, and
Discord will not deliver it again. Files are fetched only for messages the access gate
admits (``InboundSink.admits``), so a busy channel's images and a stranger's uploads are not
downloaded.

Connection: :class:`.connection.GatewayClient` (discord.py's client with a bounded,
backed-off reconnect loop). ``start`` logs in (a rejected token is a :class:`ConfigError`
at once; a network failure retries in the background) and waits up to
``ready_timeout_seconds`` for READY, then returns either way.

Buttons (approval requests, :mod:`.buttons`): a press arrives as an interaction and takes the
same path as a message (converted, journaled in order), then is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import warnings
from collections.abc import Sequence
from dataclasses import replace

import aiohttp

# discord.py imports the stdlib ``audioop`` for voice support, which we never use; Python
# 3.11-3.12 warn about that module's removal, and the warning would only be noise in logs
# (and an error under ``-W error``). This module is where the gateway first imports the SDK.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord

from channels.discord import buttons, commands, drafts, recovery  # after the filter above
from channels.discord.connection import FatalGatewayError, GatewayClient, ReconnectPolicy
from channels.discord.convert import CHANNEL, convert
from channels.discord.media import MediaStore
from channels.discord.probe import probe as check_credentials
from channels.discord.render import render
from channels.discord.sender import Sender
from channels.discord.settings import DiscordSettings
from channels.keyed import KeyedLocks
from gateway.core.bus import Accepted, InboundSink
from gateway.core.channel import (
    ChannelContext,
    ChannelHealth,
    DirectoryEntry,
    LostSend,
    StartContext,
)
from gateway.core.errors import ChannelTransientError, ConfigError, not_set
from gateway.core.messages import ChatRef, OutboundKind, OutboundMessage

log = logging.getLogger(__name__)

_LOGIN_ERRORS = (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError)


class DiscordChannel:
    name = CHANNEL

    def __init__(
        self,
        section: DiscordSettings,
        context: ChannelContext,
        *,
        policy: ReconnectPolicy | None = None,
        guild_ready_timeout: float = 2.0,
    ) -> None:
        if not section.enabled or section.token is None:
            raise not_set("discord.token", secret=True)
        self._settings = section
        self._token = section.token.get_secret_value().strip()
        self._policy = policy or ReconnectPolicy()
        self._guild_ready_timeout = guild_ready_timeout
        self._media = MediaStore(context.workspace_dir, max_bytes=section.max_attachment_bytes)
        self._state = context.data_dir / "channels" / "discord.json"  # commands registered
        self._registering: asyncio.Task[None] | None = None
        self._sink: InboundSink | None = None
        self._client: GatewayClient | None = None
        self._sender: Sender | None = None
        self._task: asyncio.Task[None] | None = None
        self._logged_in = asyncio.Event()
        self._in_order = KeyedLocks()  # one message at a time per chat, in arrival order
        self._reacted: dict[str, list[tuple[int, int]]] = {}  # session key -> (channel, message)
        self._last_error: str | None = None
        self._fatal: FatalGatewayError | None = None  # the close code that ended the gateway
        self._last_message_at: float | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, context: StartContext) -> None:
        self._sink = context.sink
        client = self._new_client()
        try:
            await client.login(self._token)
        except discord.LoginFailure as exc:
            await client.close()
            raise ConfigError(
                "Discord rejected the bot token (SWITCHBOARD_DISCORD__TOKEN)", field="discord.token"
            ) from exc
        except _LOGIN_ERRORS as exc:
            await client.close()
            self._last_error = f"login failed: {exc}"
            log.warning("discord: login failed (%s); retrying in the background", exc)
            self._policy.ended(ok=False, resumed=False, lasted=0.0)
            self._task = asyncio.create_task(self._run(None), name="discord-gateway")
            return
        self._logged_in.set()
        self._task = asyncio.create_task(self._run(client), name="discord-gateway")
        ready = asyncio.ensure_future(client.connected.wait())
        await asyncio.wait(  # READY, or the gateway refused us for good, or the time is up
            {ready, self._task},
            timeout=self._settings.ready_timeout_seconds,
            return_when=asyncio.FIRST_COMPLETED,
        )
        ready.cancel()
        if client.connected.is_set():  # once per process: the list is the same after a resume
            self._registering = asyncio.create_task(
                commands.register(client, self._state), name="discord-commands"
            )
        if self._task.done() and self._fatal is not None:  # 4004, 4014...: fix the setup
            fatal = self._fatal
            await self.stop()
            field = "discord.token" if fatal.code == 4004 else None
            raise ConfigError(str(fatal), field=field) from fatal

    async def stop(self) -> None:
        self._sink = None
        if self._registering is not None:
            self._registering.cancel()
            await asyncio.gather(self._registering, return_exceptions=True)
            self._registering = None
        if self._client is not None:
            await self._client.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _new_client(self) -> GatewayClient:
        intents = discord.Intents.default()
        intents.message_content = True  # privileged: enable it in the developer portal
        client = GatewayClient(
            policy=self._policy,
            on_message=self._on_message,
            on_interaction=self._on_interaction,
            on_edit=self._on_edit,
            intents=intents,
            guild_ready_timeout=self._guild_ready_timeout,
            max_ratelimit_timeout=30.0,  # longer 429 waits raise; the outbox holds the chat
        )
        self._client = client
        self._sender = Sender(client)
        return client

    async def _run(self, client: GatewayClient | None) -> None:
        while client is None:  # log in again, as the reconnect policy allows
            await asyncio.sleep(self._policy.delay())
            candidate = self._new_client()
            try:
                await candidate.login(self._token)
            except discord.LoginFailure:
                await candidate.close()
                self._last_error = "Discord rejected SWITCHBOARD_DISCORD__TOKEN; not retrying"
                log.error("discord: %s", self._last_error)  # noqa: TRY400
                return
            except _LOGIN_ERRORS as exc:
                await candidate.close()
                self._last_error = f"login failed: {exc}"
                self._policy.ended(ok=False, resumed=False, lasted=0.0)
            else:
                client = candidate
                self._logged_in.set()
        try:
            await client.connect()
        except FatalGatewayError as exc:
            self._fatal = exc
            self._last_error = str(exc)
            log.error("discord: %s", exc)  # noqa: TRY400 - the message says what to do

    # -- inbound --------------------------------------------------------------------------

    async def _on_edit(self, message: discord.Message) -> None:
        """A person changed a message: it arrives as an edit of the original (its own id
        names the edit, so a repeated update stays one)."""
        await self._on_message(message, edit=True)

    async def _on_message(self, message: discord.Message, *, edit: bool = False) -> None:
        client, sink = self._client, self._sink
        if client is None or client.user is None or sink is None:
            return
        converted = convert(message, client.user.id, client.get_channel)
        if converted is None:
            return
        if edit and message.edited_at is not None:
            original = converted.message.platform_message_id
            edited = f"{original}:edit:{message.edited_at.timestamp():.3f}"
            converted = replace(
                converted,
                message=replace(converted.message, edit_of=original, platform_message_id=edited),
            )
        inbound = converted.message
        async with self._in_order(inbound.session_key):
            try:
                if converted.files and await sink.admits(inbound):
                    inbound = replace(
                        inbound, attachments=await self._media.fetch(message, converted.files)
                    )
                accepted = await sink.publish_inbound(inbound)
            except Exception as exc:
                self._last_error = f"could not journal {inbound.platform_message_id}: {exc}"
                log.exception("discord: message %s was not journaled", inbound.platform_message_id)
                return
        self._last_message_at = time.time()
        log.debug("discord: message %s is %s", inbound.platform_message_id, accepted.value)
        if accepted is Accepted.NEW and self._settings.reactions and self._sender and not edit:
            await self._sender.react(
                message.channel.id, message.id, self._settings.reaction_emoji, add=True
            )
            self._reacted.setdefault(inbound.session_key, []).append(
                (message.channel.id, message.id)
            )

    async def _on_interaction(self, interaction: discord.Interaction) -> None:
        """A press of one of our buttons, or one of our commands invoked: journaled as the
        person's message, then answered."""
        sink = self._sink
        command = commands.convert(interaction)
        inbound = command or buttons.convert_press(interaction)
        if inbound is None or sink is None:
            return
        async with self._in_order(inbound.session_key):
            try:
                await sink.publish_inbound(inbound)
            except Exception as exc:  # unanswered: Discord tells the presser it failed
                self._last_error = f"could not journal {inbound.platform_message_id}: {exc}"
                log.exception("discord: press %s was not journaled", inbound.platform_message_id)
                return
        if command is not None:
            await commands.acknowledge(interaction, command.text)
            return
        await buttons.acknowledge(interaction)

    # -- outbound -------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> str | None:
        sender = self._sender
        if sender is None or self._client is None or not self._logged_in.is_set():
            raise ChannelTransientError("discord is not logged in yet")
        if message.actions:  # an approval request: with buttons
            return await buttons.send_with_buttons(self._client, message)
        receipt = await sender.send(message)
        await self._answered(sender, message)
        return receipt

    async def _answered(self, sender: Sender, message: OutboundMessage) -> None:
        if message.kind in (OutboundKind.REPLY, OutboundKind.NOTICE):
            for channel_id, message_id in self._reacted.pop(message.chat.session_key, []):
                await sender.react(channel_id, message_id, self._settings.reaction_emoji, add=False)

    # -- streaming by editing (gateway/runtime/outbound/drafts.py) ---------------------------------

    draft_interval = drafts.DRAFT_INTERVAL

    def draft_parts(self, text: str) -> list[str]:
        return drafts.parts(text)

    def _ready(self) -> discord.Client:
        if self._client is None or not self._logged_in.is_set():
            raise ChannelTransientError("discord is not logged in yet")
        return self._client

    async def post_draft(self, chat: ChatRef, text: str, *, reply_to: str | None) -> str:
        return await drafts.post(self._ready(), chat, text)

    async def edit_draft(self, chat: ChatRef, message_id: str, text: str) -> None:
        await drafts.edit(self._ready(), chat, message_id, text)

    async def delete_draft(self, chat: ChatRef, message_id: str) -> None:
        await drafts.delete(self._ready(), chat, message_id)

    async def finish_drafts(self, message: OutboundMessage, ids: Sequence[str]) -> str | None:
        client, sender = self._ready(), self._sender
        if sender is None:
            raise ChannelTransientError("discord is not logged in yet")
        receipt = await drafts.finish(client, message, ids)
        await self._answered(sender, message)
        return receipt

    # -- exactly once across a crash mid-send (gateway/runtime/outbound/attempt.py) ---------------

    def send_mark(self, chat: ChatRef) -> str | None:
        return None  # the attempt's time is enough: snowflakes carry theirs

    async def resend(self, lost: LostSend) -> str | None:
        """Read the channel back (channels/discord/recovery.py) and deliver the message
        into what the lost attempts left there."""
        client, sender, message = self._ready(), self._sender, lost.message
        if sender is None:
            raise ChannelTransientError("discord is not logged in yet")
        found = await recovery.find(client, lost)
        if message.actions:  # buttons: already there, or sent now
            texts = [part.content for part in render(message.text)]
            there = [f for f in found if f.content in texts]
            if there:
                return ",".join(str(f.id) for f in there)
            return await buttons.send_with_buttons(client, message)
        if found:
            log.info(
                "discord: an interrupted delivery to %s had left message(s) %s",
                message.chat_id,
                ", ".join(str(f.id) for f in found),
            )
        slots = sorted({*lost.drafts, *(str(f.id) for f in found)}, key=int)
        shown = {str(f.id): f.content for f in found}
        receipt = await drafts.finish(client, message, slots, shown)
        await self._answered(sender, message)
        return receipt

    async def typing(self, chat: ChatRef) -> None:
        if self._client is None or not self._logged_in.is_set():
            return
        channel = self._client.get_partial_messageable(int(chat.thread_id or chat.chat_id))
        await channel.typing()

    async def probe(self) -> str:
        """``GET /users/@me`` with the token (``switchboard doctor``); no gateway connection."""
        return await check_credentials(self._settings)

    async def directory(self) -> Sequence[DirectoryEntry]:
        """The text channels of the servers the bot is in, from discord.py's cache (what
        READY and GUILD_CREATE sent): ``#general (Server)``."""
        client = self._client
        if client is None or not client.is_ready():
            raise ChannelTransientError("discord is not connected")
        return [
            DirectoryEntry(str(channel.id), f"#{channel.name} ({guild.name})")
            for guild in client.guilds
            for channel in guild.text_channels
        ]

    def health(self) -> ChannelHealth:
        client = self._client
        connected = client is not None and client.connected.is_set()
        detail = f"{client.attempts} gateway connection(s)" if client is not None else ""
        return ChannelHealth(connected, self._last_error, self._last_message_at, detail)
