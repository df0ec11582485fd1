"""The email channel: reads an IMAP mailbox, answers by SMTP in the same thread.

Reading: IDLE when the server offers it, polling otherwise. Each new UID is looked at
header-first; mail we must never answer (loops, bounces, failed sender authentication)
is marked seen and skipped without downloading the body. Everything else becomes one
:class:`InboundMessage` (chat = the correspondent's address, thread = the email thread),
published to the gateway, and only after ``publish_inbound`` returned is it marked
``\\Seen`` and the UID cursor moved (persisted with UIDVALIDITY). A crash in between means
the same Message-ID is published again next start and the journal calls it a duplicate.

A refused sender's mail is read no further than its headers; one that answers mail the
assistant sent is left unread, and the owner is told (:meth:`EmailChannel._tell_owner_of_answer`).

Sending: gateway/core/system/mail.py builds the reply (In-Reply-To, References, "Re:", a Message-ID from
the outbox key); replies handed to the server are remembered, and past ``max_replies_per_hour``
to one correspondent the rest wait in the outbox for the hour (the owner's never do).
With ``email.sent_folder`` each reply is filed there (IMAP APPEND, unless the SMTP server
files sent mail itself: ``email.append_sent = false``), and a reply whose send was cut short
(:meth:`EmailChannel.resend`) is looked for there by its Message-ID before it is sent again.
Sent again, it carries the same Message-ID, by which mail clients and Gmail show it once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import time
from collections import deque
from collections.abc import Callable
from email.message import EmailMessage

from channels.email.files import read_outbound, remove_stored, store_files
from channels.email.imap import CONNECTION_ERRORS, ImapAuthError, ImapSession
from channels.email.parse import (
    ParsedMail,
    auth_failure,
    from_headers,
    header,
    loop_reason,
    message_id_of,
    message_ids,
    oversized,
    parse_headers,
    parse_mail,
    reply_subject,
    sender_of,
)
from channels.email.probe import probe as check_credentials
from channels.email.settings import EmailSettings
from channels.email.state import EmailState, ThreadInfo
from gateway.core.backoff import Backoff
from gateway.core.bus import Accepted, ChannelRecords, InboundSink
from gateway.core.channel import ChannelContext, ChannelHealth, LostSend, StartContext
from gateway.core.errors import ChannelPermanentError, ChannelRateLimited, ChannelTransientError
from gateway.core.lifecycle import waited
from gateway.core.messages import ChatRef, ChatType, InboundMessage, OutboundKind, OutboundMessage
from gateway.core.system.mail import (
    MailError,
    MailTransientError,
    build_message,
    deliver,
    message_id_for,
    normalize_address,
    one_line,
    sent_by_us,
)

log = logging.getLogger(__name__)

DAY = 86_400.0
OWNER_NOTES_PER_DAY = 20  # notes of answers from refused senders (see _tell_owner_of_answer)
FOR_THE_OWNER = "left unread for the owner"  # a refused answer to the assistant's mail

Clock = Callable[[], float]


class EmailChannel:
    name = "email"

    def __init__(
        self,
        settings: EmailSettings,
        context: ChannelContext,
        *,
        clock: Clock = time.time,
    ) -> None:
        self._settings = settings
        self._state_path = context.data_dir / "channels" / "email.json"
        self._workspace_dir = context.workspace_dir
        self._sender_name = context.agent_name
        self._zone = context.zone  # forwarded mails' dates that name no zone are the owner's
        self._clock = clock
        self._state = EmailState()
        self._loaded = False  # the saved state is read on first need (_load)
        self._lock = asyncio.Lock()  # guards state changes and saves
        self._own = {
            a.lower()
            for a in (settings.from_address, settings.imap_username, *settings.own_addresses)
            if a and "@" in a
        }
        self._sink: InboundSink | None = None
        self._records: ChannelRecords | None = None
        self._owner_notes: deque[float] = deque()  # when owners were told of answers
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._connected = False
        self._last_error: str | None = None
        self._last_message_at: float | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, context: StartContext) -> None:
        async with self._lock:
            await self._load()
        self._sink = context.sink
        self._records = context.records
        self._stop.clear()
        self._task = asyncio.create_task(self._run(), name="email:imap")

    async def stop(self) -> None:
        """Finish the message in hand (publish + \\Seen), then disconnect."""
        self._stop.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 5)
            except TimeoutError:
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._sink = None

    async def probe(self) -> str:
        """SMTP and IMAP logins (``switchboard doctor``); no IDLE, nothing read or sent."""
        return await check_credentials(self._settings)

    def health(self) -> ChannelHealth:
        return ChannelHealth(
            connected=self._connected,
            last_error=self._last_error,
            last_message_at=self._last_message_at,
            detail=f"{self._settings.imap_mailbox} at uid {self._state.last_uid}",
        )

    # -- reading --------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = Backoff(base=1.0, cap=300.0)
        while not self._stop.is_set():
            try:
                await self._session(backoff)
            except asyncio.CancelledError:
                raise
            except ImapAuthError as exc:
                self._last_error = str(exc)
                log.error("email: %s", exc)  # noqa: TRY400 - the reason is the message
            except Exception as exc:  # network, server, parse: reconnect with backoff
                self._last_error = f"{type(exc).__name__}: {exc}"
                log.warning("email: IMAP session ended: %s", self._last_error)
            if self._stop.is_set():
                return
            await waited(self._stop.wait(), backoff.next())

    async def _session(self, backoff: Backoff) -> None:
        settings = self._settings
        session = await ImapSession.open(settings)
        try:
            await self._check_uidvalidity(session.uidvalidity)
            self._connected, self._last_error = True, None
            backoff.reset()
            idle = settings.idle and session.supports_idle
            log.info(
                "email: reading %s as %s (%s)",
                settings.imap_mailbox,
                settings.imap_username,
                "IDLE" if idle else f"polling every {settings.poll_interval_seconds:g}s",
            )
            while not self._stop.is_set():
                for uid in await session.new_uids(self._state.last_uid):
                    if self._stop.is_set():
                        return
                    await self._process(session, uid)
                if idle:
                    await session.wait_for_mail(self._stop, renew=settings.idle_renew_seconds)
                else:
                    await waited(self._stop.wait(), settings.poll_interval_seconds)
        finally:
            self._connected = False
            await session.close()

    async def _check_uidvalidity(self, uidvalidity: int | None) -> None:
        if uidvalidity is not None and uidvalidity != self._state.uidvalidity:
            if self._state.uidvalidity is not None:
                log.warning("email: UIDVALIDITY changed; re-reading unseen mail")
            async with self._lock:
                self._state.uidvalidity, self._state.last_uid = uidvalidity, 0
                await self._save()

    async def _process(self, session: ImapSession, uid: int) -> None:
        """Look at one message; mark it seen once it is handled (published or skipped)."""
        try:
            parsed, skip = await self._read(session, uid)
        except CONNECTION_ERRORS:
            raise  # the connection, not the message: reconnect and try again
        except Exception:  # a message we cannot parse must not block the mailbox forever
            log.exception("email: uid %d could not be read; skipped", uid)
            parsed, skip = None, "unreadable"
        if parsed is not None and parsed.sender is not None and skip in (None, FOR_THE_OWNER):
            await self._publish(parsed, uid)  # raises (disk full): not marked seen
        if skip not in ("gone", FOR_THE_OWNER):
            await session.mark_seen(uid)
        await self._advance(uid)

    async def _read(self, session: ImapSession, uid: int) -> tuple[ParsedMail | None, str | None]:
        """(the message, or None) and why it is skipped (None: publish it)."""
        fetched = await session.fetch_header(uid)
        if fetched is None:  # expunged meanwhile
            return None, "gone"
        raw_header, size = fetched
        headers = parse_headers(raw_header)
        settings = self._settings
        reason = loop_reason(headers, self._own)
        if reason is None:
            failure = auth_failure(
                headers,
                trusted_ids=settings.trusted_authserv_ids,
                require=settings.require_authentication,
            )
            reason = f"sender not authenticated ({failure})" if failure else None
        if reason is not None:
            sender = sender_of(headers)
            log.info(
                "email: not answering uid %d from %s: %s", uid, sender[0] if sender else "?", reason
            )
            return None, reason
        if not await self._admits(headers):
            # Refused anyway: the gate only needs the sender (to audit, or to pair), so the
            # body and attachments of a stranger's mail are never downloaded or stored.
            told = await self._tell_owner_of_answer(headers)
            return from_headers(headers), FOR_THE_OWNER if told else None
        if size is not None and size > settings.max_message_bytes:
            return oversized(headers, size, settings.max_message_bytes), None
        raw = await session.fetch_message(uid)
        if raw is None:
            return None, "gone"
        return parse_mail(raw, zone=self._zone), None

    async def _tell_owner_of_answer(self, headers: EmailMessage) -> bool:
        """A refused sender answered mail the assistant sent (``send_email`` for the owner,
        or a reply): the owner is told, in their chat, and the mail is left unread for them.
        At most :data:`OWNER_NOTES_PER_DAY` such notes a day, since the form of the
        assistant's Message-IDs can be copied. Whether the owner was told."""
        sender, records = sender_of(headers), self._records
        from_address = self._settings.from_address
        if sender is None or records is None or from_address is None:
            return False
        answered = [
            *message_ids(header(headers, "In-Reply-To")),
            *message_ids(header(headers, "References")),
        ]
        ours = next((m for m in answered if sent_by_us(m, from_address)), None)
        now = self._clock()
        while self._owner_notes and self._owner_notes[0] < now - DAY:
            self._owner_notes.popleft()
        if ours is None or len(self._owner_notes) >= OWNER_NOTES_PER_DAY:
            return False
        self._owner_notes.append(now)
        subject = one_line(header(headers, "Subject"))[:120] or "(no subject)"
        settings = self._settings
        await records.tell_owner(
            self.name,
            f"{sender[0]} answered an email the assistant sent (“{subject}”). They may not "
            "write to the assistant, so it did not read or answer it; the mail is left unread "
            f"in {settings.imap_username}'s {settings.imap_mailbox}. To let them write to it, "
            f"add {sender[0]} to email.allow_from.",
            key=f"email-answer:{message_id_of(headers) or ours}:{sender[0]}",
            about=sender[0],
        )
        log.info("email: %s answered %s but may not write; the owner is told", sender[0], ours)
        return True

    async def _admits(self, headers: EmailMessage) -> bool:
        sender = sender_of(headers)
        sink = self._sink
        if sender is None or sink is None:
            return False
        probe = InboundMessage(
            channel=self.name,
            chat_id=sender[0],
            sender_id=sender[0],
            text="",
            platform_message_id=message_id_of(headers) or "",
            chat_type=ChatType.DM,
            mentioned=True,
        )
        return await sink.admits(probe)

    async def _publish(self, parsed: ParsedMail, uid: int) -> None:
        assert parsed.sender is not None
        attachments = await asyncio.to_thread(
            store_files,
            parsed.files,
            workspace=self._workspace_dir,
            limit=self._settings.max_attachment_bytes,
        )
        async with self._lock:
            thread_id, new_thread = self._thread_of(parsed, uid)
            self._state.remember_thread(
                f"{parsed.sender}:{thread_id}",
                ThreadInfo(
                    address=parsed.sender,
                    subject=parsed.subject,
                    reply_to=parsed.message_id,
                    references=_unique([*parsed.references, parsed.in_reply_to])[-20:],
                    updated=self._clock(),
                ),
            )
            await self._save()
        text = parsed.text or ("" if attachments or parsed.forwarded else "(empty message)")
        if not parsed.text and parsed.subject.startswith("/"):
            text = parsed.subject  # the command is the subject: "/status", nothing below
        elif new_thread and parsed.subject and not text.startswith("/"):
            # a command on the first line stays first: the gateway answers it, not the model
            text = f"Subject: {parsed.subject}\n\n{text}".rstrip()
        msg = InboundMessage(
            channel=self.name,
            chat_id=parsed.sender,
            sender_id=parsed.sender,
            sender_name=parsed.sender_name or parsed.sender,
            text=text,
            platform_message_id=parsed.message_id or f"{self._state.uidvalidity}:{uid}",
            chat_type=ChatType.DM,
            thread_id=thread_id,
            mentioned=True,  # an email to the bot is always addressed to it
            attachments=attachments,
            forwarded=parsed.forwarded,  # someone else's words, labelled with their origin
        )
        sink = self._sink
        assert sink is not None
        accepted = await sink.publish_inbound(msg)
        self._last_message_at = self._clock()
        log.info("email: uid %d from %s: %s", uid, parsed.sender, accepted.value)
        if accepted in (Accepted.REFUSED, Accepted.DUPLICATE) and attachments:
            await asyncio.to_thread(remove_stored, attachments)
        if accepted is Accepted.REFUSED and self._settings.dm_policy != "pairing":
            # No conversation with a refused stranger: nothing may be sent there later, and
            # spam cannot push real threads out of the bounded state.
            async with self._lock:
                self._state.forget_thread(f"{parsed.sender}:{thread_id}", parsed.message_id)
                await self._save()

    def _thread_of(self, parsed: ParsedMail, uid: int) -> tuple[str, bool]:
        """(thread id, whether it is new): known ids first, else a hash of the thread root."""
        ids = [*parsed.references, *filter(None, [parsed.in_reply_to])]
        thread = self._state.thread_for(ids)
        new = thread is None
        if thread is None:
            root = ids[0] if ids else parsed.message_id or f"{self._state.uidvalidity}:{uid}"
            thread = hashlib.sha256(root.encode()).hexdigest()[:12]
        if parsed.message_id:
            self._state.remember_message(parsed.message_id, thread)
        return thread, new

    async def _advance(self, uid: int) -> None:
        async with self._lock:
            if uid > self._state.last_uid:
                self._state.last_uid = uid
                await self._save()

    async def _load(self) -> None:
        """Read the saved state once, under the lock: at start, or at a send the outbox makes
        before the channel started (a reply to a thread must know the thread, and a save must
        never write an empty state over the saved one)."""
        if not self._loaded:
            self._state = await asyncio.to_thread(EmailState.load, self._state_path)
            self._loaded = True

    async def _save(self) -> None:
        await asyncio.to_thread(self._state.save, self._state_path)

    # -- sending --------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> str | None:
        settings = self._settings
        if not settings.can_send or settings.from_address is None:
            raise ChannelPermanentError("email replies need email.smtp_host and email.from_address")
        try:
            address = normalize_address(message.chat_id)
        except ValueError as exc:
            raise ChannelPermanentError(str(exc)) from exc
        key = f"{address}:{message.thread_id}" if message.thread_id else address
        async with self._lock:
            await self._load()
            already = self._state.sent.get(message.idempotency_key)
            if already is not None:
                return already
            thread = self._state.threads.get(key)
            known = address in (*settings.allow_from, *settings.admins, *settings.owners)
            if known and message.kind is OutboundKind.PROACTIVE:
                # a check-in or a reminder is a mail of its own, not a reply in the thread
                # the person wrote in last (where their home chat is)
                thread = None
            if thread is None and not known:
                raise ChannelPermanentError(f"no email conversation with {address}; not sending")
            now = self._clock()
            count = self._state.replies_within_hour(address, now)
            if count >= settings.max_replies_per_hour and address not in settings.owners:
                # held, not dropped: it goes out when the oldest of them is an hour old
                wait = self._state.hour_frees_in(address, now)
                log.warning(
                    "email: reply cap reached for %s (%d in the last hour): held %.0f s",
                    address,
                    count,
                    wait,
                )
                raise ChannelRateLimited(wait, f"reply cap: {count} emails to {address} this hour")
            self._state.reserve_reply(address, now)
        try:
            message_id, mail = await self._deliver(message, address, thread)
        except BaseException:
            async with self._lock:
                self._state.release_reply(address, now)
            raise
        await self._sent(message, message_id)
        if settings.sent_folder and settings.append_sent:
            await self._file(mail.as_bytes())
        return message_id

    async def _sent(self, message: OutboundMessage, message_id: str) -> None:
        async with self._lock:
            self._state.record_sent(message.idempotency_key, message_id)
            if message.thread_id:
                self._state.remember_message(message_id, message.thread_id)
            await self._save()

    async def _file(self, raw: bytes) -> None:
        """Keep a copy of a reply in the sent folder; the reply went out either way."""
        folder = self._settings.sent_folder
        try:
            session = await ImapSession.open(self._settings, mailbox=folder)
            try:
                await session.append(raw)
            finally:
                await session.close()
        except CONNECTION_ERRORS as exc:
            log.warning("email: reply sent but not filed in %s: %s", folder, exc)

    # -- exactly once across a crash mid-send (gateway/runtime/outbound/attempt.py) ---------------

    def send_mark(self, chat: ChatRef) -> str | None:
        return None  # the Message-ID comes from the outbox key

    async def resend(self, lost: LostSend) -> str | None:
        """Send a reply whose earlier attempt was cut short, unless it went out: the state
        file or the sent folder (``email.sent_folder``) has it by its Message-ID."""
        message, settings = lost.message, self._settings
        async with self._lock:
            await self._load()
            already = self._state.sent.get(message.idempotency_key)
        if already is not None or not settings.sent_folder or not settings.from_address:
            return await self.send(message)
        message_id = message_id_for(message.idempotency_key, settings.from_address)
        try:
            session = await ImapSession.open(settings, mailbox=settings.sent_folder)
            try:
                found = await session.holds_message_id(message_id)
            finally:
                await session.close()
        except CONNECTION_ERRORS as exc:  # not sure it went: ask again later, send nothing
            raise ChannelTransientError(f"cannot look in {settings.sent_folder}: {exc}") from exc
        if not found:
            return await self.send(message)
        log.info(
            "email: reply %s had gone out before the restart; not sending it again", message_id
        )
        await self._sent(message, message_id)
        return message_id

    async def _deliver(
        self, message: OutboundMessage, address: str, thread: ThreadInfo | None
    ) -> tuple[str, EmailMessage]:
        settings = self._settings
        assert settings.from_address is not None
        files = await asyncio.to_thread(
            read_outbound, message.attachments, limit=settings.max_attachment_bytes
        )
        message_id = message_id_for(message.idempotency_key, settings.from_address)
        mail = build_message(
            sender=settings.from_address,
            sender_name=self._sender_name,
            to=[address],
            subject=reply_subject(thread.subject) if thread else _subject_from(message.text),
            markdown=message.text,
            message_id=message_id,
            files=files,
            in_reply_to=thread.reply_to if thread else None,
            references=thread.references if thread else (),
            # RFC 3834: other robots must not answer ours, so loops cannot start; a mail
            # that answers none (a check-in, an approval request) is "auto-generated"
            auto_submitted="auto-replied"
            if thread is not None and message.kind is not OutboundKind.PROACTIVE
            else "auto-generated",
        )
        try:
            await deliver(settings, mail, [address])
        except MailTransientError as exc:
            raise ChannelTransientError(str(exc)) from exc
        except MailError as exc:
            raise ChannelPermanentError(str(exc)) from exc
        return message_id, mail


_MARKS = re.compile(r"\*\*|__|`|^#+ ")  # bold, code, a heading's marks


def _subject_from(text: str) -> str:
    """A new mail's subject: its first line, without markdown's marks."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    return _MARKS.sub("", first).strip(" #")[:70] or "Message"


def _unique(ids: list[str | None]) -> list[str]:
    return list(dict.fromkeys(i for i in ids if i))
