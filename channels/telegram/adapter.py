"""The Telegram channel: python-telegram-bot's ``Bot`` for the API, our own intake loop.

Intake (polling or webhook) hands each update to :meth:`TelegramChannel._accept`, which
converts it, fetches its files and awaits the gateway's ``publish_inbound``; only after that
returns is the update acknowledged (offset advanced / HTTP 200). Access control is not done
here: the gateway's access gate sees every message with its numeric sender id.

Start order: take the per-token lock (one receiver per bot), connect (``getMe``; remove or
set the webhook; register commands if they changed), then start intake. A network failure
while connecting does not fail the gateway: the connection is retried in the background
with backoff. A rejected token does fail it, naming the setting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from telegram import Bot, BotCommand, InlineKeyboardMarkup, Update
from telegram.error import InvalidToken, TelegramError

from channels._text import split_message, utf16_length
from channels.telegram import buttons
from channels.telegram.convert import ALLOWED_UPDATES, BotIdentity, convert_update
from channels.telegram.media import MediaFetcher
from channels.telegram.pacing import Pacer
from channels.telegram.polling import Poller
from channels.telegram.probe import probe as check_credentials
from channels.telegram.recovery import Recovery
from channels.telegram.render import MAX_MESSAGE, render_message
from channels.telegram.sender import Pacing, Sender
from channels.telegram.settings import TelegramSettings
from channels.telegram.state import ChannelState, TokenLock, token_digest
from channels.telegram.transport import AiohttpRequest
from gateway.core.backoff import Backoff
from gateway.core.bus import InboundSink
from gateway.core.channel import ChannelContext, ChannelHealth, LostSend, StartContext
from gateway.core.commands import COMMANDS
from gateway.core.errors import ConfigError, not_set
from gateway.core.messages import ChatRef, OutboundMessage

if TYPE_CHECKING:
    from channels.telegram.webhook import WebhookServer

log = logging.getLogger(__name__)

DRAFT_INTERVAL = 1.0  # seconds between edits of a chat's streamed draft (Telegram: >= 1 s)


class TelegramChannel:
    name = "telegram"

    def __init__(
        self,
        section: TelegramSettings,
        context: ChannelContext,
        *,
        pacing: Pacing | None = None,
        pacer: Pacer | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        if section.token is None or not section.token.get_secret_value():
            raise not_set("telegram.token", secret=True)
        if section.mode == "webhook" and not section.webhook_url:
            raise ConfigError(
                "telegram.mode is webhook but telegram.webhook_url is not set "
                "(SWITCHBOARD_TELEGRAM__WEBHOOK_URL)",
                field="telegram.webhook_url",
            )
        self.settings = section
        self._connection_limits = context.connection_limits
        token = section.token.get_secret_value()
        self._token_digest = token_digest(token)
        root = section.base_url.rstrip("/")
        # 16 connections carry far more than the Bot API lets a bot send (about 30 messages a
        # second); over aiohttp rather than httpx (channels/telegram/transport.py)
        self._requests = (
            AiohttpRequest(connections=16, read_timeout=20, write_timeout=20, pool_timeout=10),
            AiohttpRequest(connections=2, read_timeout=10),
        )
        self.bot = Bot(
            token,
            base_url=f"{root}/bot",
            base_file_url=f"{root}/file/bot",
            request=self._requests[0],
            get_updates_request=self._requests[1],
        )
        self._backoff = backoff or Backoff(base=1.0, cap=60.0)
        pacing = pacing or Pacing.overall_rate(section.messages_per_second)
        self._sender = Sender(self.bot, pacing, pacer=pacer)
        self._recovery = Recovery(self._sender.is_ours, self._sender.ids)
        self._media = MediaFetcher(
            self.bot,
            context.workspace_dir / "attachments" / self.name,
            max_bytes=section.max_attachment_bytes,
        )
        self._state = ChannelState(context.data_dir / "channels" / f"{self.name}.json")
        self._lock = TokenLock(token)
        self._secret = (
            section.webhook_secret.get_secret_value()
            if section.webhook_secret
            else secrets.token_urlsafe(32)
        )
        self._sink: InboundSink | None = None
        self._identity: BotIdentity | None = None
        self._connected = asyncio.Event()
        self._connect_task: asyncio.Task[None] | None = None
        self._poller: Poller | None = None
        self.webhook: WebhookServer | None = None
        self._last_error: str | None = None
        self._last_message_at: float | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, context: StartContext) -> None:
        self._sink = context.sink
        self._lock.acquire()
        try:
            if self.settings.mode == "webhook":
                # aiohttp's web server only for webhook mode: polling starts without it
                from channels.telegram.webhook import WebhookServer  # noqa: PLC0415

                self.webhook = WebhookServer(
                    self.bot,
                    self._accept,
                    secret=self._secret,
                    listen=self.settings.webhook_listen,
                    port=self.settings.webhook_port,
                    path=self.settings.webhook_path,
                    limits=self._connection_limits,
                )
                try:
                    await self.webhook.start()
                except OSError as exc:  # the port taken: say which setting, no traceback
                    raise self.settings.webhook_listener().refused(exc) from exc
            try:
                await self._connect()
            except (TelegramError, OSError) as exc:
                self._status(f"could not reach Telegram: {exc}")
                log.warning("telegram: could not connect (%s); retrying in the background", exc)
                self._connect_task = asyncio.create_task(self._connect_until_done())
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        await self._recovery.stop()
        if self._connect_task is not None:
            self._connect_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._connect_task
            self._connect_task = None
        if self._poller is not None:
            await self._poller.stop()
            self._poller = None
        if self.webhook is not None:
            await self.webhook.stop()
            self.webhook = None
        with contextlib.suppress(Exception):
            await self.bot.shutdown()
        # a Bot never initialized (a cluster's standby only posts drafts, which open the
        # transport on first use) skips its transport in shutdown(): close it here
        for request in self._requests:
            await request.shutdown()
        self._connected.clear()
        self._lock.release()
        self._sink = None

    async def _connect_until_done(self) -> None:
        while True:
            await asyncio.sleep(self._backoff.next())
            try:
                await self._connect()
            except (TelegramError, OSError) as exc:
                self._status(f"could not reach Telegram: {exc}")
                continue
            except ConfigError as exc:
                self._status(str(exc))
                log.error("telegram: %s", exc)  # noqa: TRY400 - the message says it all
                return
            self._backoff.reset()
            return

    async def _connect(self) -> None:
        try:
            await self.bot.initialize()  # getMe; sending works even before this succeeded
        except InvalidToken:
            raise ConfigError(
                "Telegram rejected the bot token (SWITCHBOARD_TELEGRAM__TOKEN); "
                "copy it again from @BotFather",
                field="telegram.token",
            ) from None
        me = self.bot.bot
        self._identity = BotIdentity(me.id, me.username or "")
        if self.settings.mode == "webhook":
            assert self.settings.webhook_url is not None
            await self.bot.set_webhook(
                url=self.settings.webhook_url,
                secret_token=self._secret,
                allowed_updates=ALLOWED_UPDATES,
            )
        else:
            # getUpdates refuses to work while a webhook is set; pending updates are kept.
            await self.bot.delete_webhook(drop_pending_updates=False)
        await self._register_commands()
        self._connected.set()
        self._status(None)
        if self.settings.mode == "polling":
            self._poller = Poller(
                self.bot,
                self._accept,
                timeout=self.settings.poll_timeout_seconds,
                backoff=self._backoff,
                on_status=self._status,
            )
            self._poller.start()
        log.info("telegram connected as @%s (%s)", me.username, self.settings.mode)

    async def _register_commands(self) -> None:
        """``setMyCommands`` only when the list differs from the one registered last time."""
        wanted = [[name.lstrip("/"), text[:256]] for name, text in COMMANDS.items()]
        state = self._state.load()
        if state.get("commands") == wanted and state.get("token") == self._token_digest:
            return
        try:
            await self.bot.set_my_commands([BotCommand(name, text) for name, text in wanted])
        except TelegramError as exc:  # cosmetic: try again on the next start
            log.warning("telegram: could not register the command list: %s", exc)
            return
        self._state.update(commands=wanted, token=self._token_digest)

    # -- intake ---------------------------------------------------------------------------

    async def _accept(self, update: Update) -> None:
        """Journal one update. Returns normally for every update that may be acknowledged."""
        await self._connected.wait()
        assert self._identity is not None and self._sink is not None
        try:
            converted = convert_update(update, self._identity)
        except Exception:  # an update we cannot read must not block the ones after it
            log.exception("telegram: skipping update %s that could not be read", update.update_id)
            return
        if converted is None:
            log.debug("telegram: update %s carries nothing to answer", update.update_id)
            return
        # Files and transcription cost bandwidth and money: skip them for messages the access
        # gate will not answer. The gate still decides at publish; this only avoids waste.
        message = converted.message
        seen = update.message or update.channel_post
        if seen is not None:  # its id is a floor for the sends that follow (recovery.py)
            self._sender.ids.saw(seen.chat.id, seen.message_id)
        if converted.media:  # text alone costs nothing: no need to ask (a journal read)
            admitted = await self._sink.admits(message)  # pairings and redeliveries included
            message = await self._media.attach(converted, download=admitted)
        await self._sink.publish_inbound(message)  # raises -> not acknowledged
        self._last_message_at = time.time()
        if update.callback_query is not None:  # a button press: stop its spinner
            await buttons.acknowledge(self.bot, update.callback_query)

    # -- outbound -------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> str | None:
        return await self._sender.send(message, markup=_buttons(message))

    # -- exactly once across a crash mid-send (gateway/runtime/outbound/attempt.py) ---------------

    def send_mark(self, chat: ChatRef) -> str | None:
        return self._sender.ids.mark(chat.chat_id)

    async def resend(self, lost: LostSend) -> str | None:
        """Probe for what the lost attempts left (channels/telegram/recovery.py), then
        deliver the message into it. Attempts this process made and saw end are not probed
        for: it knows what they left."""
        message, sender = lost.message, self._sender
        progress = sender.progress(message.idempotency_key)
        known = progress is not None and not progress.unsure
        if progress is not None and known and all(map(sender.ids.ours, lost.attempts)):
            return await sender.finish(message, progress.slots, markup=_buttons(message))
        parts = len(render_message(message)) + len(message.attachments)
        settled = await self._recovery.find(lost, parts=parts)
        found = settled.ids
        if found:
            log.info(
                "telegram: an interrupted delivery to chat %s had left message(s) %s; "
                "delivering into them",
                message.chat_id,
                ", ".join(map(str, found)),
            )
        whole = parts == 1 and not message.attachments and not message.actions
        if (
            whole
            and len(found) == 1
            and not lost.drafts
            and not any(a.draft for a in lost.attempts)
        ):
            return sender.found_whole(message, found[0])  # sent by one call: as it should be
        drafts = [int(d) for d in lost.drafts if d.isdigit()]
        slots = sorted({*drafts, *found})
        return await sender.redeliver(message, slots, markup=_buttons(message), fresh=settled.fresh)

    async def typing(self, chat: ChatRef) -> None:
        await self._sender.typing(chat)

    # -- streaming: previews, or drafts edited (gateway/runtime/outbound/drafts.py) ----------------

    draft_interval = DRAFT_INTERVAL

    def draft_parts(self, text: str) -> list[str]:
        return split_message(text, MAX_MESSAGE, length=utf16_length)

    def previews_in(self, chat: ChatRef, *, group: bool) -> bool:
        """Private chats show ``sendMessageDraft`` previews, unless the Bot API refused."""
        return self._sender.previews and not group and not chat.chat_id.startswith("-")

    async def preview_draft(self, chat: ChatRef, preview_id: int, text: str) -> None:
        await self._sender.preview(chat, preview_id, text)

    async def post_draft(self, chat: ChatRef, text: str, *, reply_to: str | None) -> str:
        return str(await self._sender.post(chat, text, reply_to=reply_to))

    async def edit_draft(self, chat: ChatRef, message_id: str, text: str) -> None:
        await self._sender.edit(chat, int(message_id), text)

    async def delete_draft(self, chat: ChatRef, message_id: str) -> None:
        await self._sender.delete(chat, int(message_id))

    async def finish_drafts(self, message: OutboundMessage, drafts: Sequence[str]) -> str | None:
        return await self._sender.finish(message, [int(d) for d in drafts])

    async def probe(self) -> str:
        """``getMe`` with a client of its own (``switchboard doctor``); starts nothing."""
        return await check_credentials(self.settings)

    def health(self) -> ChannelHealth:
        detail = f"{self.settings.mode}"
        if self._identity is not None:
            detail += f" as @{self._identity.username}"
        if self._poller is not None and self._poller.offset is not None:
            detail += f", next update {self._poller.offset}"
        return ChannelHealth(
            connected=self._connected.is_set() and self._last_error is None,
            last_error=self._last_error,
            last_message_at=self._last_message_at,
            detail=detail,
        )

    def _status(self, error: str | None) -> None:
        self._last_error = error


def _buttons(message: OutboundMessage) -> InlineKeyboardMarkup | None:
    """An approval request's inline keyboard, under its last part."""
    return buttons.keyboard(message) if message.actions else None
