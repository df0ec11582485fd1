"""What people send, made readable once, for every channel: between the access gate and the
journal.

Channels store the files that come with a message (``workspace/attachments/<channel>/``)
and hand the message in; the gate lets it through; :class:`Understanding` then, before it
is journaled:

- transcribes voice notes and audio files (:mod:`gateway.runtime.intake.voice`), members within
  their daily minutes; the transcript is stored with the message (``Attachment.transcript``)
  and becomes its text when the person wrote nothing;
- reads documents (:mod:`agent.documents`): a short one's text goes with the message
  (``Attachment.text``, untrusted: it taints the turn), a longer one is announced with its
  page count, to be read with ``read_file``; a scanned PDF (no text, only images of its
  pages) comes with its first ``tools.documents.scan_pages`` pages drawn as pictures
  beside the file, for a model that sees images (``llm.vision``, unless its server
  refused a picture since: :meth:`~gateway.runtime.agents.models.ModelPool.sees_pictures`; ``Attachment.page_of``:
  outside content, so they taint the turn like a document's text); for a model that sees
  no images, OCR reads the scan instead (``tools.documents.ocr``), and the words in a
  picture someone sends (``Attachment.text``, untrusted too);
- finds the message a reply answers, where the platform names it without its text
  (WhatsApp, a Matrix reply without its quoted fallback): one of the bot's answers to that
  chat (the outbox, by the ids the platform gave it) or a message people sent there (the
  journal). It becomes ``InboundMessage.quote``, from the store, so after a restart and on
  every node of a cluster alike; another person's words stay context, not instructions.

Only messages the gate admitted reach it, so strangers cost nothing; a platform's
redelivery (already journaled) is passed on untouched, never transcribed twice. A failure
becomes a note on the attachment: the message itself always goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from agent.documents.reader import DocumentError, DocumentReader, document_kind
from gateway.config.channels import ChannelSection
from gateway.config.settings import Settings
from gateway.core.bus import Accepted, InboundSink
from gateway.core.messages import Attachment, ChatRef, InboundMessage, Said
from gateway.core.principal import Principal
from gateway.runtime.intake.access import principal_for
from gateway.runtime.intake.voice import (
    Allowance,
    Speech,
    SpeechError,
    SpokenReplies,
)
from gateway.store import Journal, Outbox

log = logging.getLogger(__name__)

QUOTE_CHARS = 4_000  # of a replied-to message found in the store, as channels cut theirs
# Seconds of OCR for a scan or a picture before its message is journaled (the platform
# waits for that): a page or two of dense text; the rest of a scan is read with read_file
INTAKE_OCR = 5.0
CHARS_PER_TOKEN = 4  # the inline budget is in tokens; documents are measured in characters
_PLAIN = {".txt", ".md", ".markdown", ".text", ".log", ".json", ".yaml", ".yml", ".toml"}
_HEARD = ("voice", "audio")


class Understanding:
    """The :class:`InboundSink` the access gate hands admitted messages to."""

    def __init__(
        self,
        inner: InboundSink,
        *,
        sections: Mapping[str, ChannelSection],
        documents: DocumentReader,
        journal: Journal,
        outbox: Outbox,
        sees_images: Callable[[], bool],
        speech: Speech | None = None,
        allowance: Allowance | None = None,
    ) -> None:
        self._inner = inner
        self._journal = journal
        self._outbox = outbox
        # whether the model is shown pictures now (llm.vision, unless its server refused
        # one since): a scan's pages are drawn for one that is, read by OCR for one that is not
        self._sees_images = sees_images
        self._sections = sections
        self._documents = documents
        self._speech = speech
        self._allowance = allowance
        self._inline_chars = documents.settings.inline_tokens * CHARS_PER_TOKEN

    async def publish_inbound(self, msg: InboundMessage) -> Accepted:
        files = any(a.path for a in msg.attachments)
        unquoted = msg.reply_to_message_id is not None and msg.quote is None
        if (files or unquoted) and await self._inner.admits(msg):
            if files:
                msg = await self._understood(msg)
            if unquoted:
                msg = replace(msg, quote=await self._replied_to(msg))
        return await self._inner.publish_inbound(msg)

    async def admits(self, msg: InboundMessage) -> bool:
        return await self._inner.admits(msg)

    async def settled(self, channel: str) -> None:
        await self._inner.settled(channel)

    async def _understood(self, msg: InboundMessage) -> InboundMessage:
        principal = principal_for(msg, self._sections.get(msg.channel))
        text = msg.text
        attachments: list[Attachment] = []
        for attachment in msg.attachments:
            understood = [attachment]
            if attachment.path is None:
                pass
            elif attachment.kind in _HEARD:
                heard = await self._heard(attachment, principal, msg)
                # A forwarded voice note's words are its author's, never the forwarder's.
                if heard.transcript and not text.strip() and not msg.forwarded:
                    text = heard.transcript
                understood = [heard]
            elif attachment.kind == "document":
                understood = await self._read(attachment)
            elif attachment.kind == "image":
                understood = [await self._words(attachment)]
            attachments.extend(understood)
        return replace(msg, text=text, attachments=tuple(attachments))

    async def _replied_to(self, msg: InboundMessage) -> Said | None:
        """The message ``msg`` replies to, in the same chat: an answer of the bot's or a
        message someone sent (``None``: not kept here)."""
        assert msg.reply_to_message_id is not None
        replied = msg.reply_to_message_id
        chats = dict.fromkeys([msg.session_key, ChatRef(msg.channel, msg.chat_id).session_key])
        for chat_key in chats:  # a thread's own answers, then the chat's it may start from
            sent = await self._outbox.sent_as(chat_key, replied)
            if sent is not None:
                return Said("", sent.text[:QUOTE_CHARS], at=sent.sent_at, by_bot=True)
        earlier = await self._journal.message(msg.channel, replied)
        if earlier is None or earlier.chat_id != msg.chat_id:
            return None
        text = earlier.text or ", ".join(f"[{a.kind}]" for a in earlier.attachments)
        author = earlier.sender_name or earlier.sender_id
        return Said(author, text[:QUOTE_CHARS], at=earlier.received_at.timestamp())

    async def _heard(
        self, attachment: Attachment, principal: Principal, msg: InboundMessage
    ) -> Attachment:
        what = "voice note" if attachment.kind == "voice" else "audio file"
        if self._speech is None or self._allowance is None:
            return replace(
                attachment,
                note=f"a {what} arrived; it was not transcribed (no transcription service "
                "is configured: [voice] base_url)",
            )
        refusal = await self._allowance.refusal(principal, msg.received_at)
        if refusal is not None:
            return replace(attachment, note=f"a {what} arrived; not transcribed: {refusal}")
        assert attachment.path is not None
        try:
            heard = await self._speech.transcribe(Path(attachment.path))
        except (SpeechError, OSError) as exc:  # never a reason to hold the message back
            log.warning("%s: transcription failed: %s", msg.channel, exc)
            return replace(attachment, note=f"a {what} arrived; transcription failed: {exc}")
        await self._allowance.charge(principal, msg.received_at, heard.seconds)
        if not heard.text:
            return replace(attachment, note=f"an empty {what} ({heard.seconds:.0f} s)")
        return replace(attachment, note=None, transcript=heard.text)

    async def _read(self, attachment: Attachment) -> list[Attachment]:
        """The document as read, and for a scan the pictures of its first pages."""
        assert attachment.path is not None
        path = Path(attachment.path)
        name = attachment.filename or path.name
        kind = await asyncio.to_thread(document_kind, path, attachment.mime_type)
        if kind is None:
            return [await asyncio.to_thread(self._plain, attachment, path)]
        try:
            reading = await self._documents.read(
                path, kind, max_chars=self._inline_chars + 1, name=name, ocr_seconds=INTAKE_OCR
            )
        except DocumentError as exc:
            return [replace(attachment, note=f"it could not be read: {exc}")]
        extract = reading.extract
        if extract.no_text_layer:
            return await self._scanned(attachment, path, f"{reading.header()}: no text layer")
        body = reading.render()
        if extract.truncated_after is None and len(body) <= self._inline_chars:
            return [replace(attachment, note=reading.header(), text=body)]
        note = (
            f"{reading.header()}; too long to go with the message: read it with read_file "
            "(pages or sheet to pick a part)"
        )
        return [replace(attachment, note=note)]

    async def _words(self, picture: Attachment) -> Attachment:
        """For a model that sees no images: the words in a picture (a photo of a letter,
        a screenshot), read by OCR where it runs; outside content, like a document's."""
        assert picture.path is not None
        try:
            words = await self._documents.words_of(Path(picture.path), seconds=INTAKE_OCR)
        except DocumentError as exc:
            return replace(picture, note=f"its words could not be read: {exc}")
        if words is None:  # the model sees it, or no OCR here
            return picture
        if not words:
            return replace(picture, note="no words in it (read by OCR)")
        return replace(
            picture,
            note="its words, read by OCR (may be misread)",
            text=words[: self._inline_chars],
        )

    async def _scanned(self, attachment: Attachment, path: Path, header: str) -> list[Attachment]:
        """A scan: its first pages drawn as pictures beside it, each an attachment."""
        name = attachment.filename or path.name
        scan = "a scanned document: images of pages, no text to read"
        if not self._sees_images():
            return [replace(attachment, note=f"{header} ({scan}; the model sees no images)")]
        count = self._documents.settings.scan_pages
        try:
            drawn = await self._documents.draw(path, range(1, count + 1))
        except (DocumentError, OSError) as exc:
            log.warning("a scan's pages could not be drawn: %s", exc)
            return [replace(attachment, note=f"{header} ({scan}; its pages could not be drawn)")]
        pages = [
            Attachment("image", str(picture), "image/png", f"{name}, page {number}", page_of=name)
            for number, picture in enumerate(drawn, start=1)
        ]
        shown = ""
        if len(pages) == 1:
            shown = "; its first page follows as a picture"
        elif pages:
            shown = f"; its first {len(pages)} pages follow as pictures"
        return [replace(attachment, note=f"{header} ({scan}{shown})"), *pages]

    def _plain(self, attachment: Attachment, path: Path) -> Attachment:
        """A short plain-text file goes with the message too; anything else stays a file."""
        mime = (attachment.mime_type or "").split(";")[0]
        if path.suffix.lower() not in _PLAIN and mime != "text/plain":
            return attachment
        try:
            with path.open("rb") as handle:
                data = handle.read(self._inline_chars + 1)
        except OSError:
            return attachment
        if b"\x00" in data:
            return attachment
        if len(data) > self._inline_chars:
            return replace(
                attachment, note="too long to go with the message: read it with read_file"
            )
        return replace(attachment, text=data.decode("utf-8", errors="replace"))


def speech_for(settings: Settings) -> Speech | None:
    """The one speech server of ``[voice]`` (or a channel's older transcription settings),
    or None when none is named."""
    voice = settings.speech()
    return Speech(voice) if voice.enabled else None


def spoken_replies(speech: Speech | None, workspace: Path) -> SpokenReplies | None:
    """The answers' voice (``voice.reply = "auto"``), or None."""
    if speech is None or speech.settings.reply != "auto":
        return None
    return SpokenReplies(speech, workspace / "attachments" / "voice-replies")
