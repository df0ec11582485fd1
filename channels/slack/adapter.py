"""The Slack channel: slack-bolt's ``AsyncApp`` for events, its ``AsyncWebClient`` for answers.

Two intakes, one handler. Socket Mode (default) opens an outbound websocket to the URL
``apps.connections.open`` returns — no public endpoint needed; the SDK reconnects by itself
(on a close frame at once, on a dead socket after a few missed pings). HTTP mode serves
bolt's aiohttp app; bolt verifies ``X-Slack-Signature`` (HMAC over the raw body) and refuses
timestamps more than 5 minutes off, answering 401 before any listener runs.

Button presses (``block_actions``, :mod:`.buttons`) take the same path as messages: converted,
journaled, then acknowledged.

Acknowledgement after journaling: the app is built with ``process_before_response=True``.
By default bolt acknowledges an event (HTTP 200, or the Socket Mode envelope ack) *before*
the listener runs, so a crash or a full disk in between loses the event although Slack
considers it delivered. With ``process_before_response=True`` the listener runs first —
convert, fetch files, ``publish_inbound`` (durable) — and bolt acknowledges only when it
returned. If it raised, bolt answers 500 (HTTP) or sends no ack (Socket Mode), and Slack
delivers the event again. Retries are never dropped by ``X-Slack-Retry-Num``: the journal
makes a repeat a duplicate (see :mod:`.convert` for the id), and a retry whose first
delivery never arrived is processed like a first delivery. Deliveries of one message that
overlap (a slow file download past Slack's 3-second window brings a retry) share one
journaling and all acknowledge once it is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.keyed import KeyedLocks
from channels.slack import buttons, drafts
from channels.slack.convert import CHANNEL, Converted, convert, convert_command
from channels.slack.lookups import SlackLookups
from channels.slack.media import MediaStore
from channels.slack.probe import probe as check_credentials
from channels.slack.requests import well_formed
from channels.slack.sender import Sender
from channels.slack.settings import SlackSettings
from channels.slack.working import WorkingMarks
from gateway.core.bus import Accepted, InboundSink
from gateway.core.channel import (
    ChannelContext,
    ChannelHealth,
    DirectoryEntry,
    LostSend,
    StartContext,
)
from gateway.core.commands import COMMANDS
from gateway.core.errors import ConfigError, not_set
from gateway.core.messages import ChatRef, OutboundMessage
from gateway.core.system.http_sites import LimitedSite, app_runner

log = logging.getLogger(__name__)

_BAD_TOKEN = {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"}
START_TIMEOUT = 30.0  # how long start() waits for the Socket Mode connection
SETTLE_TIMEOUT = 10.0  # how long stop() lets deliveries being journaled finish


class SlackChannel:
    name = CHANNEL

    def __init__(
        self, section: SlackSettings, context: ChannelContext, *, ping_interval: float = 10.0
    ) -> None:
        if not section.enabled or section.bot_token is None:
            raise not_set("slack.bot_token", secret=True)
        self._settings = section
        self._connection_limits = context.connection_limits
        self.mode = section.resolved_mode
        token = section.bot_token.get_secret_value().strip()
        # No retry handlers: a repeated chat.postMessage after a dropped connection may post
        # twice (see .sender); failures go to the outbox instead.
        self.client = AsyncWebClient(
            token=token, base_url=section.base_url, retry_handlers=[], timeout=30
        )
        secret = section.signing_secret.get_secret_value() if section.signing_secret else ""
        self.app = AsyncApp(
            name="switchboard",
            client=self.client,
            signing_secret=secret,
            process_before_response=True,  # acknowledge only after publish_inbound returned
            request_verification_enabled=self.mode == "http",
            logger=logging.getLogger("slack_bolt.switchboard"),
        )
        self.app.event("message")(self._on_event)
        self.app.event("app_mention")(self._on_event)
        self.app.action(re.compile(f"^{re.escape(buttons.ACTION_PREFIX)}"))(self._on_press)
        for command in COMMANDS:  # the ones the app's settings declare reach us (docs)
            self.app.command(command)(self._on_command)
        self._ping_interval = ping_interval
        self._sender = Sender(self.client, bot_user_id=lambda: self._bot_user_id)
        self._lookups = SlackLookups(self.client)  # thread parents, names, channels
        self._marks = WorkingMarks(self.client, enabled=section.working_reactions)
        self._media = MediaStore(
            context.workspace_dir,
            token=token,
            api_base_url=section.base_url,
            max_bytes=section.max_attachment_bytes,
        )
        self._sink: InboundSink | None = None
        self._bot_user_id: str | None = None
        self._socket: AsyncSocketModeHandler | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._runner: web.AppRunner | None = None
        self.port: int | None = None  # HTTP mode: the port actually bound
        self._in_flight: dict[str, asyncio.Future[Accepted]] = {}
        self._in_order = KeyedLocks()  # one message at a time per chat, in arrival order
        self._last_error: str | None = None
        self._last_message_at: float | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, context: StartContext) -> None:
        self._sink = context.sink
        await self._identify()
        if self.mode == "socket":
            await self._start_socket()
        else:
            await self._start_http()

    async def _identify(self) -> None:
        """``auth.test``: a rejected token fails start; a network error is retried by bolt."""
        try:
            auth = await self.client.auth_test()
        except SlackApiError as exc:
            error = str(exc.response.get("error") or "")
            if error in _BAD_TOKEN:
                raise ConfigError(
                    f"Slack rejected SWITCHBOARD_SLACK__BOT_TOKEN ({error})",
                    field="slack.bot_token",
                ) from exc
            self._last_error = f"auth.test failed: {error}"
            log.warning("slack: auth.test failed (%s); continuing", error)
        except Exception as exc:  # network: bolt authorizes again on the first event
            self._last_error = f"auth.test failed: {exc}"
            log.warning("slack: auth.test failed (%s); continuing", exc)
        else:
            self._bot_user_id = auth.get("user_id")

    async def _start_socket(self) -> None:
        app_token = self._settings.app_token
        assert app_token is not None  # SlackSettings refuses socket mode without it
        token = app_token.get_secret_value().strip()
        self._socket = AsyncSocketModeHandler(
            self.app, token, web_client=self.client, ping_interval=self._ping_interval
        )
        # Ask for the first websocket URL ourselves: the SDK would retry a rejected app token
        # every few seconds forever; here it fails the start, naming the setting.
        try:
            opened = await self.client.apps_connections_open(app_token=token)
        except SlackApiError as exc:
            error = str(exc.response.get("error") or "")
            if error in _BAD_TOKEN:
                raise ConfigError(
                    f"Slack rejected SWITCHBOARD_SLACK__APP_TOKEN ({error}); it needs the "
                    "connections:write scope",
                    field="slack.app_token",
                ) from exc
            log.warning("slack: apps.connections.open failed (%s); retrying", error)
        except Exception as exc:  # network: the SDK's connect loop retries
            log.warning("slack: apps.connections.open failed (%s); retrying", exc)
        else:
            self._socket.client.wss_uri = opened.get("url")
        # The SDK keeps trying until it connects; do not hold the gateway's start forever.
        self._connecting = asyncio.create_task(self._socket.connect_async())  # type: ignore[no-untyped-call]
        done, _ = await asyncio.wait({self._connecting}, timeout=START_TIMEOUT)
        if not done:
            log.warning("slack: Socket Mode is still connecting; continuing in the background")

    async def _start_http(self) -> None:
        web_app = self.app.web_app(path=self._settings.http_path)
        web_app.middlewares.append(well_formed)
        limits = self._connection_limits
        self._runner = app_runner(
            web_app, limits, handle_signals=False, access_log=None, shutdown_timeout=SETTLE_TIMEOUT
        )
        await self._runner.setup()
        site = LimitedSite(
            self._runner,
            limits,
            "slack: the Events API server",
            host=self._settings.http_listen,
            port=self._settings.http_port,
        )
        try:
            await site.start()
        except OSError as exc:  # the port taken: say which setting, no traceback
            raise self._settings.http_listener().refused(exc) from exc
        self.port = site.port
        log.info(
            "slack: Events API on http://%s:%s%s",
            self._settings.http_listen,
            self.port,
            self._settings.http_path,
        )

    async def stop(self) -> None:
        """Stop intake; deliveries being journaled finish (and are acknowledged) first."""
        if self._runner is not None:
            await self._runner.cleanup()  # stops listening, lets running requests answer
            self._runner = None
        pending = list(self._in_flight.values())
        if pending:
            await asyncio.wait(pending, timeout=SETTLE_TIMEOUT)
        if self._socket is not None:
            await self._socket.close_async()  # type: ignore[no-untyped-call]
        if self._connecting is not None:
            self._connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._connecting
        await self._media.close()
        self._sink = None

    # -- inbound --------------------------------------------------------------------------

    async def _on_event(self, event: dict[str, Any], context: AsyncBoltContext) -> None:
        """A bolt listener; raising makes bolt answer 500 / withhold the ack (Slack retries)."""
        bot_user_id = context.bot_user_id or self._bot_user_id
        converted = convert(event, bot_user_id)
        if converted is None:
            return
        key = converted.message.platform_message_id
        future = self._in_flight.get(key)
        if future is None:
            future = asyncio.ensure_future(self._journal(converted))
            self._in_flight[key] = future
            future.add_done_callback(lambda _: self._in_flight.pop(key, None))
        accepted = await asyncio.shield(future)
        log.debug("slack: message %s is %s", key, accepted.value)
        message = converted.message
        if accepted is Accepted.NEW and message.mentioned and message.edit_of is None:
            channel, _, ts = key.partition(":")
            await self._marks.started(message.session_key, channel, ts)

    async def _on_press(self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
        """A press of one of our buttons (``block_actions``): journaled as the presser's
        message, then acknowledged; raising leaves it unacknowledged (Slack shows an error)."""
        inbound = buttons.convert_press(body, action)
        if inbound is not None:
            accepted = await self._journal(Converted(inbound))
            log.debug("slack: press %s is %s", inbound.platform_message_id, accepted.value)
        await ack()
        if inbound is not None:
            await buttons.clear_buttons(self.client, body)

    async def _on_command(self, ack: AsyncAck, command: dict[str, Any]) -> None:
        """A slash command the app declares (``/stop``, ``/status``, ...): journaled as the
        person's own message in that conversation, then acknowledged; the answer comes as a
        message like any other."""
        inbound = convert_command(command)
        if inbound is not None:
            accepted = await self._journal(Converted(inbound))
            log.debug("slack: command %s is %s", inbound.platform_message_id, accepted.value)
        await ack()

    async def _journal(self, converted: Converted) -> Accepted:
        sink = self._sink
        if sink is None:
            raise RuntimeError("slack channel is stopped")  # not acknowledged: redelivered
        msg = converted.message
        async with self._in_order(msg.session_key):
            try:
                if msg.thread_id is not None and msg.mentioned and msg.quote is None:
                    parent = await self._lookups.thread_parent(msg, self._bot_user_id)
                    msg = replace(msg, quote=parent)
                if converted.files and await sink.admits(msg):
                    msg = replace(msg, attachments=await self._media.fetch(msg, converted.files))
                accepted = await sink.publish_inbound(msg)
            except Exception as exc:
                self._last_error = f"could not journal {msg.platform_message_id}: {exc}"
                raise
        self._last_message_at = time.time()
        return accepted

    # -- outbound -------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> str | None:
        if message.actions:  # an approval request: Block Kit buttons
            return await buttons.send_with_buttons(self.client, message)
        receipt = await self._sender.send(message)
        await self._marks.answered(message)
        return receipt

    # -- streaming by editing (gateway/runtime/outbound/drafts.py) ---------------------------------

    draft_interval = drafts.DRAFT_INTERVAL

    def draft_parts(self, text: str) -> list[str]:
        return drafts.parts(text)

    async def post_draft(self, chat: ChatRef, text: str, *, reply_to: str | None) -> str:
        return await drafts.post(self.client, chat, text)

    async def edit_draft(self, chat: ChatRef, message_id: str, text: str) -> None:
        await drafts.edit(self.client, chat, message_id, text)

    async def delete_draft(self, chat: ChatRef, message_id: str) -> None:
        await self._sender.delete(chat.chat_id, message_id)

    async def finish_drafts(self, message: OutboundMessage, ids: Sequence[str]) -> str | None:
        receipt = await self._sender.send(message, ids)
        await self._marks.answered(message)
        return receipt

    # -- exactly once across a crash mid-send (gateway/runtime/outbound/attempt.py) ---------------

    def send_mark(self, chat: ChatRef) -> str | None:
        return self._sender.run  # which process made the attempt: the rest is in metadata

    async def resend(self, lost: LostSend) -> str | None:
        message = lost.message
        if message.actions:  # buttons: there already (by their text), or posted now
            found = await self._sender.look(message, lost)
            if found.parts:
                return ",".join(found.parts[i] for i in sorted(found.parts))
            return await buttons.send_with_buttons(self.client, message)
        return await self._sender.resend(message, lost)

    async def probe(self) -> str:
        """``auth.test`` (and the app token in Socket Mode) for ``switchboard doctor``."""
        return await check_credentials(self._settings)

    async def directory(self) -> Sequence[DirectoryEntry]:
        return await self._lookups.channels()

    def health(self) -> ChannelHealth:
        if self.mode == "socket":
            client = self._socket.client if self._socket is not None else None
            session = client.current_session if client is not None else None
            connected = session is not None and not session.closed
            detail = "Socket Mode"
        else:
            connected = self._runner is not None
            detail = f"HTTP Events API on port {self.port}"
        return ChannelHealth(connected, self._last_error, self._last_message_at, detail)
