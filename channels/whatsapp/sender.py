"""Outbound delivery to WhatsApp: formatted, split, within the 24-hour window, typed errors.

**The customer-service window.** A business may send free text to a person only within 24
hours of that person's last message (Meta answers 131047 otherwise, often only later, in a
status webhook). The gateway records when each person last wrote, refused or not
(:class:`gateway.core.bus.ChannelRecords`, shared by a cluster's nodes), so the window is
checked *before* sending. Outside it:

* with ``whatsapp.window_template`` set, that template goes instead, its one body variable
  filled with the start of the message (Meta allows no line breaks there);
* without one, nothing is sent, the owner gets a note saying who missed what and why, and
  the outbox records the failure (:class:`WindowClosed`).

**Parts.** One outbound message can be several WhatsApp messages (long text, files). The
parts already delivered are remembered per ``idempotency_key`` in memory, so a retry after
part 2 of 3 failed resumes at part 2 (after a restart a half-sent message starts again at
part 1). WhatsApp has no idempotency key for sends: a send that timed out after Meta took it
is retried and may arrive twice.
"""

from __future__ import annotations

import logging
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from channels.whatsapp.errors import RE_ENGAGEMENT, WindowClosed, channel_error, explain
from channels.whatsapp.graph import GraphClient, GraphError, GraphUnreachable
from channels.whatsapp.render import render
from gateway.config.channels import WhatsAppSettings
from gateway.core.bus import ChannelRecords, is_owner_note
from gateway.core.errors import ChannelPermanentError
from gateway.core.messages import Attachment, OutboundMessage

log = logging.getLogger(__name__)

WINDOW_SECONDS = 24 * 3600
WINDOW_MARGIN = 120.0  # do not start a send the window may close under
TEMPLATE_TEXT_LIMIT = 900  # Meta: a template's body is 1,024 characters with its variables
_MAX_TRACKED = 1_000
_SPACES = re.compile(r"\s+")
_FILE_TYPES = {"image": "image", "video": "video", "audio": "audio", "voice": "audio"}

Step = Callable[[], Awaitable[str]]
Records = Callable[[], ChannelRecords | None]


class Sender:
    def __init__(
        self,
        graph: GraphClient,
        settings: WhatsAppSettings,
        *,
        records: Records,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._graph = graph
        self._settings = settings
        self._records = records
        self._clock = clock
        self._delivered: OrderedDict[str, list[str]] = OrderedDict()
        self.sent_texts: OrderedDict[str, str] = OrderedDict()  # wamid -> start of its text

    async def send(self, message: OutboundMessage) -> str | None:
        if await self._window_open(message.chat_id) is False:
            return await self._outside_window(message)
        steps = [self._text_step(message, part) for part in render(message.text)]
        steps += [self._file_step(message, a) for a in message.attachments]
        done = self._delivered.setdefault(message.idempotency_key, [])
        self._delivered.move_to_end(message.idempotency_key)
        while len(self._delivered) > _MAX_TRACKED:
            self._delivered.popitem(last=False)
        for step in steps[len(done) :]:
            try:
                done.append(await step())
            except (GraphError, GraphUnreachable) as exc:
                error = channel_error(exc)
                if isinstance(error, WindowClosed) and not done:
                    return await self._outside_window(message)
                raise error from exc
        self._delivered.pop(message.idempotency_key, None)
        return ",".join(done) or None

    async def _window_open(self, chat_id: str) -> bool | None:
        """Whether the person wrote within 24 hours; None when the gateway cannot say."""
        records = self._records()
        if records is None:
            return None
        heard = await records.last_heard("whatsapp", chat_id)
        return heard is not None and self._clock() - heard < WINDOW_SECONDS - WINDOW_MARGIN

    async def _outside_window(self, message: OutboundMessage) -> str:
        template = self._settings.window_template
        if template:
            return await self._send_template(message, template)
        reason = explain(RE_ENGAGEMENT)
        records = self._records()
        if records is not None and not is_owner_note(message):
            await records.tell_owner(
                "whatsapp",
                f"WhatsApp: a message to +{message.chat_id} was not sent: {reason}. "
                f"It began: “{excerpt(message.text, 200)}”",
                key=f"whatsapp-window:{message.idempotency_key}",
                about=message.chat_id,
            )
        raise WindowClosed(f"not sent to +{message.chat_id}: {reason}")

    async def _send_template(self, message: OutboundMessage, template: str) -> str:
        text = excerpt(message.text, TEMPLATE_TEXT_LIMIT) or "…"
        payload = {
            "to": message.chat_id,
            "type": "template",
            "template": {
                "name": template,
                "language": {"code": self._settings.window_template_language},
                "components": [{"type": "body", "parameters": [{"type": "text", "text": text}]}],
            },
        }
        try:
            wamid = await self._graph.send(payload)
        except (GraphError, GraphUnreachable) as exc:
            error = channel_error(exc)
            if isinstance(error, ChannelPermanentError) and isinstance(exc, GraphError):
                raise ChannelPermanentError(
                    f"the window template {template!r} was refused ({exc}); check "
                    "whatsapp.window_template and whatsapp.window_template_language"
                ) from exc
            raise error from exc
        log.info(
            "whatsapp: +%s is outside the 24-hour window; sent template %s",
            message.chat_id,
            template,
        )
        self._remember(wamid, text)
        return wamid

    # -- the parts ------------------------------------------------------------------------

    def _text_step(self, message: OutboundMessage, text: str) -> Step:
        async def step() -> str:
            payload: dict[str, Any] = {
                "to": message.chat_id,
                "type": "text",
                "text": {"body": text, "preview_url": False},
            }
            if message.reply_to_message_id:
                payload["context"] = {"message_id": message.reply_to_message_id}
            wamid = await self._graph.send(payload)
            self._remember(wamid, text)
            return wamid

        return step

    def _file_step(self, message: OutboundMessage, attachment: Attachment) -> Step:
        async def step() -> str:
            path = Path(attachment.path) if attachment.path else None
            if path is None or not path.is_file():
                name = attachment.filename or attachment.path or attachment.kind
                return await self._text_step(
                    message, f"[could not attach {name}: file not found]"
                )()
            media_id = await self._graph.upload(path, attachment.mime_type)
            kind = _FILE_TYPES.get(attachment.kind, "document")
            body: dict[str, Any] = {"id": media_id}
            if kind == "document":
                body["filename"] = attachment.filename or path.name
            return await self._graph.send({"to": message.chat_id, "type": kind, kind: body})

        return step

    def _remember(self, wamid: str, text: str) -> None:
        self.sent_texts[wamid] = excerpt(text, 120)
        while len(self.sent_texts) > _MAX_TRACKED:
            self.sent_texts.popitem(last=False)


def excerpt(text: str, limit: int) -> str:
    """``text`` on one line (a template variable allows no line breaks), cut at ``limit``."""
    flat = _SPACES.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
