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
part 2 of 3 failed resumes at part 2.

**A send whose outcome is unknown** (the process died during the call, the call timed out:
:meth:`Sender.resend`). The Cloud API has no idempotency key and cannot list what was sent,
but every send carries a tag naming its outbox message and part (``biz_opaque_callback_data``,
:func:`tag_of`), and Meta reports each message it took (``sent``, later ``delivered``, or
``failed``) by webhook with that tag, redelivering the report until it gets a 200. The
reports are stored (``delivery_status.tag``, shared by a cluster), so a resend first waits
for them, until ``whatsapp.resend_wait_seconds`` after the first lost attempt began or, when
this process started later, after it began taking webhooks (Meta redelivers a report only
to a gateway that answers): a part with a report arrived and is not sent again; the rest is
sent. After a definite refusal
(Meta answered with an error) nothing waits. So WhatsApp is *at least once*: a part is sent
twice only when Meta took it but its report did not reach the gateway within the wait.
"""

from __future__ import annotations

import asyncio
import hashlib
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
from channels.whatsapp.settings import WhatsAppSettings
from gateway.core.bus import ChannelRecords, is_owner_note
from gateway.core.channel import LostSend
from gateway.core.errors import ChannelPermanentError
from gateway.core.lifecycle import waited
from gateway.core.messages import Attachment, OutboundMessage

log = logging.getLogger(__name__)

WINDOW_SECONDS = 24 * 3600
WINDOW_MARGIN = 120.0  # do not start a send the window may close under
TEMPLATE_TEXT_LIMIT = 900  # Meta: a template's body is 1,024 characters with its variables
_MAX_TRACKED = 1_000
_SPACES = re.compile(r"\s+")
_FILE_TYPES = {"image": "image", "video": "video", "audio": "audio", "voice": "audio"}
TEMPLATE_PART = "t"  # the tag's part for the window template sent instead of the parts
REPORT_POLL = 1.0  # seconds: look for reports another node recorded at least this often

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
        self._delivered: OrderedDict[str, dict[int, str]] = OrderedDict()  # key -> part: id
        self._refused: OrderedDict[str, None] = OrderedDict()  # last attempt refused outright
        self._news = asyncio.Event()  # a tagged report arrived at this node
        self.listening_since: float | None = None  # when this process began taking webhooks
        self.sent_texts: OrderedDict[str, str] = OrderedDict()  # wamid -> start of its text

    async def send(self, message: OutboundMessage) -> str | None:
        return await self._deliver(message, {})

    async def resend(self, lost: LostSend) -> str | None:
        """Deliver a message some attempt of which has no recorded outcome: the parts Meta
        reported on arrived; the rest is sent (after waiting for the reports)."""
        message = lost.message
        key = message.idempotency_key
        count = len(self._steps(message))
        tags = [tag_of(key, part) for part in (*range(count), TEMPLATE_PART)]
        # this process saw Meta refuse the last attempt: nothing to wait for
        since = None if key in self._refused else lost.since
        found = await self._reports(tags, count, since)
        template = found.get(tag_of(key, TEMPLATE_PART))
        if template is not None:
            log.info("whatsapp: the window template for %s was sent already", key)
            return template
        arrived = {
            part: found[tag_of(key, part)] for part in range(count) if tag_of(key, part) in found
        }
        if arrived:
            log.info("whatsapp: %d of %d parts of %s arrived before", len(arrived), count, key)
        return await self._deliver(message, arrived)

    async def _deliver(self, message: OutboundMessage, arrived: dict[int, str]) -> str | None:
        key = message.idempotency_key
        if not arrived and await self._window_open(message.chat_id) is False:
            return await self._outside_window(message)
        steps = self._steps(message)
        done = self._delivered.setdefault(key, {})
        done.update(arrived)
        self._delivered.move_to_end(key)
        while len(self._delivered) > _MAX_TRACKED:
            self._delivered.popitem(last=False)
        self._refused.pop(key, None)
        for part, step in enumerate(steps):
            if part in done:
                continue
            try:
                done[part] = await step()
            except (GraphError, GraphUnreachable) as exc:
                if (isinstance(exc, GraphError) and exc.status < 500) or (
                    isinstance(exc, GraphUnreachable) and not exc.sent
                ):  # Meta answered, or never heard: this attempt left nothing
                    self._refused[key] = None
                    while len(self._refused) > _MAX_TRACKED:
                        self._refused.popitem(last=False)
                error = channel_error(exc)
                if isinstance(error, WindowClosed) and not done:
                    return await self._outside_window(message)
                raise error from exc
        self._delivered.pop(key, None)
        return ",".join(done[part] for part in sorted(done)) or None

    def _steps(self, message: OutboundMessage) -> list[Step]:
        texts = render(message.text)
        steps = [self._text_step(message, text, part) for part, text in enumerate(texts)]
        steps += [
            self._file_step(message, attachment, part)
            for part, attachment in enumerate(message.attachments, start=len(texts))
        ]
        return steps

    def reported(self) -> None:
        """A report with a tag was recorded here: a waiting resend looks again at once."""
        self._news.set()

    async def _reports(self, tags: list[str], count: int, since: float | None) -> dict[str, str]:
        """The reported message of each tag, waiting until every part (or the template)
        has one, or until ``resend_wait_seconds`` after ``since`` (``None``: no wait) or
        after this process began taking webhooks, whichever is later: Meta redelivers a
        report only to a gateway that answers. Reports may arrive at another node of a
        cluster, so the store is read again at least every :data:`REPORT_POLL` seconds."""
        while True:
            self._news.clear()
            records = self._records()  # None until the channel is started
            found = {} if records is None else await records.reported("whatsapp", tags)
            if records is not None and (len(found) >= count or tags[-1] in found or since is None):
                return found
            remaining = REPORT_POLL  # not taking webhooks yet: wait for that first
            listening = self.listening_since if records is not None else None
            if listening is not None and since is not None:
                start = max(since, listening)
                remaining = start + self._settings.resend_wait_seconds - self._clock()
            if remaining <= 0:
                return found
            await waited(self._news.wait(), min(remaining, REPORT_POLL))

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
            "biz_opaque_callback_data": tag_of(message.idempotency_key, TEMPLATE_PART),
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

    def _text_step(self, message: OutboundMessage, text: str, part: int) -> Step:
        async def step() -> str:
            payload: dict[str, Any] = {
                "to": message.chat_id,
                "biz_opaque_callback_data": tag_of(message.idempotency_key, part),
                "type": "text",
                "text": {"body": text, "preview_url": False},
            }
            if message.reply_to_message_id:
                payload["context"] = {"message_id": message.reply_to_message_id}
            wamid = await self._graph.send(payload)
            self._remember(wamid, text)
            return wamid

        return step

    def _file_step(self, message: OutboundMessage, attachment: Attachment, part: int) -> Step:
        async def step() -> str:
            path = Path(attachment.path) if attachment.path else None
            if path is None or not path.is_file():
                name = attachment.filename or attachment.path or attachment.kind
                return await self._text_step(
                    message, f"[could not attach {name}: file not found]", part
                )()
            media_id = await self._graph.upload(path, attachment.mime_type)
            kind = _FILE_TYPES.get(attachment.kind, "document")
            body: dict[str, Any] = {"id": media_id}
            if kind == "document":
                body["filename"] = attachment.filename or path.name
            return await self._graph.send(
                {
                    "to": message.chat_id,
                    "biz_opaque_callback_data": tag_of(message.idempotency_key, part),
                    "type": kind,
                    kind: body,
                }
            )

        return step

    def _remember(self, wamid: str, text: str) -> None:
        self.sent_texts[wamid] = excerpt(text, 120)
        while len(self.sent_texts) > _MAX_TRACKED:
            self.sent_texts.popitem(last=False)


def excerpt(text: str, limit: int) -> str:
    """``text`` on one line (a template variable allows no line breaks), cut at ``limit``."""
    flat = _SPACES.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def tag_of(key: str, part: int | str) -> str:
    """The tag a part of outbox message ``key`` carries (Meta allows 512 characters; keys
    are hashed so any key fits)."""
    digest = hashlib.blake2b(key.encode(), digest_size=12, person=b"sb-wa-part").hexdigest()
    return f"sb1:{digest}:{part}"
