"""The WhatsApp channel: Meta's Cloud API, webhooks on the gateway's web server.

Intake (:mod:`.webhook`) verifies each POST's signature, then hands the body to
:meth:`WhatsAppChannel._accept`: every sender is recorded as having written (the 24-hour
window, :mod:`.sender`), each message is converted, its files fetched when the gate would
admit it, and journaled through ``publish_inbound``, one chat at a time in order; delivery
reports are recorded and a failed one tells the owner. Only then does Meta get its 200.

Start checks the token and the phone number id (``GET /<phone number id>``): a refused token
fails the start, naming the setting; no answer only logs (the webhook keeps working and
sending is retried by the outbox).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from channels.keyed import KeyedLocks
from channels.whatsapp.convert import CHANNEL, Converted, Reaction, StatusReport, parse
from channels.whatsapp.errors import explain
from channels.whatsapp.graph import GraphClient, GraphError, GraphUnreachable
from channels.whatsapp.media import MediaStore
from channels.whatsapp.probe import probe as check_credentials
from channels.whatsapp.sender import Sender, excerpt
from channels.whatsapp.settings import WhatsAppSettings
from channels.whatsapp.webhook import Webhook
from gateway.core.bus import Accepted, ChannelRecords, InboundSink
from gateway.core.channel import ChannelContext, ChannelHealth, LostSend, StartContext
from gateway.core.errors import ConfigError, not_set
from gateway.core.messages import ChatRef, OutboundMessage

log = logging.getLogger(__name__)

TYPING_EVERY = 20.0  # seconds: WhatsApp shows "typing…" for up to 25 s per request
SETTLE_TIMEOUT = 10.0
_MAX_CONTEXT = 1_000


class WhatsAppChannel:
    name = CHANNEL
    receives_on_every_node = True  # webhooks: any node of a cluster journals them

    def __init__(
        self, section: WhatsAppSettings, context: ChannelContext, *, clock: Any = time.time
    ) -> None:
        if not section.enabled or section.access_token is None:
            raise not_set("whatsapp.access_token", secret=True)
        if not context.web_server:
            raise ConfigError(
                "WhatsApp delivers messages by webhook to the web server, which is off: set "
                "web.enabled = true (SWITCHBOARD_WEB__ENABLED)",
                field="web.enabled",
            )
        assert section.phone_number_id and section.app_secret and section.verify_token
        self.settings = section
        self._clock = clock
        self.graph = GraphClient(
            section.base_url,
            section.access_token.get_secret_value().strip(),
            phone_number_id=section.phone_number_id,
        )
        self._media = MediaStore(
            self.graph,
            context.workspace_dir / "attachments" / self.name,
            max_bytes=section.max_attachment_bytes,
        )
        self._sender = Sender(self.graph, section, records=self._records, clock=clock)
        self.webhook = Webhook(
            section.webhook_path,
            app_secret=section.app_secret.get_secret_value().strip(),
            verify_token=section.verify_token.get_secret_value().strip(),
            accept=self._accept,
        )
        self._running: StartContext | None = None  # the gateway's side, while running
        self._in_order = KeyedLocks()  # one message at a time per chat, in arrival order
        self._last_inbound: OrderedDict[str, str] = OrderedDict()  # chat -> newest wamid
        self._typed_at: dict[str, float] = {}
        self._reactions: defaultdict[str, list[str]] = defaultdict(list)
        self._background: set[asyncio.Task[None]] = set()
        self._identity = ""
        self._connected = False
        self._last_error: str | None = None
        self._last_message_at: float | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, context: StartContext) -> None:
        self._running = context
        try:
            number = await self.graph.request(
                "GET",
                self.graph.phone_number_id,
                params={"fields": "display_phone_number,verified_name"},
            )
        except GraphError as exc:
            if exc.code == 190 or exc.status in (401, 403):
                raise ConfigError(
                    "WhatsApp refused the access token (SWITCHBOARD_WHATSAPP__ACCESS_TOKEN): "
                    f"{exc.message}",
                    field="whatsapp.access_token",
                ) from None
            if exc.code == 100 and exc.status in (400, 404):
                raise ConfigError(
                    f"WhatsApp does not know phone number id {self.graph.phone_number_id} for "
                    "this token (SWITCHBOARD_WHATSAPP__PHONE_NUMBER_ID)",
                    field="whatsapp.phone_number_id",
                ) from None
            self._last_error = f"phone number check failed: {exc}"
        except GraphUnreachable as exc:
            self._last_error = f"cannot reach WhatsApp: {exc}"
            log.warning("whatsapp: %s; receiving anyway, sending is retried", self._last_error)
        else:
            self._identity = str(number.get("display_phone_number") or "")
        self._connected = True
        self._sender.listening_since = self._clock()
        log.info("whatsapp: number %s, webhook at %s", self._identity or "?", self.webhook.path)

    async def stop(self) -> None:
        self._connected = False
        if self._background:
            await asyncio.wait(self._background, timeout=SETTLE_TIMEOUT)
        await self.graph.close()
        self._running = None

    def webhook_routes(self) -> Sequence[web.RouteDef]:
        return self.webhook.routes()

    def _records(self) -> ChannelRecords | None:
        return None if self._running is None else self._running.records

    # -- inbound --------------------------------------------------------------------------

    async def _accept(self, body: Any) -> None:
        """Journal and record everything in a webhook body; raising means "send it again"."""
        if self._running is None:
            raise RuntimeError("whatsapp channel is not running")  # 500: Meta redelivers
        sink, records = self._running.sink, self._running.records
        batch = parse(body, self.graph.phone_number_id)
        for sender in dict.fromkeys(batch.senders):
            await records.heard_from(self.name, sender)
        for reaction in batch.reactions:
            self._note_reaction(reaction)
        chats: defaultdict[str, list[Converted]] = defaultdict(list)
        for converted in batch.messages:
            chats[converted.message.chat_id].append(converted)
        await asyncio.gather(*(self._journal_chat(sink, items) for items in chats.values()))
        for report in batch.statuses:
            await self._report(records, report)

    async def _journal_chat(self, sink: InboundSink, items: list[Converted]) -> None:
        async with self._in_order(items[0].message.chat_id):
            for converted in items:
                message = self._with_context(converted)
                if converted.media:
                    admitted = await sink.admits(message)
                    files = await self._media.attach(converted, download=admitted)
                    message = replace(message, attachments=files)
                accepted = await sink.publish_inbound(message)  # raises -> 500 -> redelivery
                self._last_message_at = self._clock()
                if accepted is Accepted.NEW:
                    self._last_inbound[message.chat_id] = message.platform_message_id
                    self._last_inbound.move_to_end(message.chat_id)
                    while len(self._last_inbound) > _MAX_CONTEXT:
                        self._last_inbound.popitem(last=False)
                    if self.settings.read_receipts:
                        self._in_background(self._read(message.chat_id))

    def _with_context(self, converted: Converted) -> Any:
        """The message with the reactions since the last one (the message a reply answers
        is found by the gateway, from the store: ``InboundMessage.reply_to_message_id``)."""
        message = converted.message
        notes = self._reactions.pop(message.chat_id, [])
        if not notes:
            return message
        return replace(message, text="\n".join([*notes, message.text]).strip())

    def _note_reaction(self, reaction: Reaction) -> None:
        if not reaction.emoji:
            return
        quoted = self._sender.sent_texts.get(reaction.message_id)
        what = f"your message “{quoted}”" if quoted else "an earlier message"
        pending = self._reactions[reaction.sender]
        pending.append(f"[reacted {reaction.emoji} to {what}]")
        del pending[:-5]
        while len(self._reactions) > _MAX_CONTEXT:
            del self._reactions[next(iter(self._reactions))]

    async def _report(self, records: ChannelRecords, report: StatusReport) -> None:
        error = None
        if report.status == "failed":
            error = f"{report.error_code}: {report.error_text}".strip(": ")
        news = await records.delivery_report(
            self.name, report.message_id, report.recipient, report.status, error, tag=report.tag
        )
        if report.tag is not None:
            self._sender.reported()  # a resend waiting for Meta's word looks again
        if not news or report.status != "failed":
            return
        log.warning(
            "whatsapp: message %s to +%s failed: %s", report.message_id, report.recipient, error
        )
        day = datetime.now(UTC).strftime("%Y-%m-%d")
        await records.tell_owner(
            self.name,
            f"WhatsApp could not deliver a message to +{report.recipient}: "
            f"{explain(report.error_code, report.error_text)}",
            key=f"whatsapp-failed:{report.recipient}:{report.error_code}:{day}",
            about=report.recipient,
        )

    def _in_background(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _read(self, chat_id: str) -> None:
        """Blue ticks and "typing…" for the chat's newest message; cosmetic."""
        wamid = self._last_inbound.get(chat_id)
        if wamid is None:
            return
        self._typed_at[chat_id] = self._clock()
        try:
            await self.graph.mark_read(wamid, typing=True)
        except (GraphError, GraphUnreachable) as exc:
            log.debug("whatsapp: read receipt for %s failed: %s", wamid, exc)

    # -- outbound -------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> str | None:
        return await self._sender.send(message)

    def send_mark(self, chat: ChatRef) -> str | None:
        """Nothing beyond the time: every part carries its tag (channels/whatsapp/sender.py)."""
        return None

    async def resend(self, lost: LostSend) -> str | None:
        """A send of unknown outcome: Meta's tagged reports say which parts arrived."""
        return await self._sender.resend(lost)

    async def typing(self, chat: ChatRef) -> None:
        """WhatsApp's indicator hangs on the person's message and lasts up to 25 s, so it is
        renewed every 20 s rather than at every call of the gateway's 4 s rhythm."""
        if self._clock() - self._typed_at.get(chat.chat_id, 0.0) < TYPING_EVERY:
            return
        await self._read(chat.chat_id)

    async def probe(self) -> str:
        """Token, phone number id and webhook subscription (``switchboard doctor``)."""
        return await check_credentials(self.settings)

    def health(self) -> ChannelHealth:
        detail = f"webhook {self.webhook.path}"
        if self._identity:
            detail = f"number {self._identity}, {detail}"
        return ChannelHealth(
            connected=self._connected and self._last_error is None,
            last_error=self._last_error,
            last_message_at=self._last_message_at,
            detail=detail,
        )


__all__ = ["WhatsAppChannel", "excerpt"]
