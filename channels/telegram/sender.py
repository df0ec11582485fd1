"""Outbound delivery: paced, split, mapped onto the gateway's error types, never doubled.

Pacing follows Telegram's published guidance for *sustained* rates: about one message a
second per chat, 20 a minute per group, 30 a second overall (``telegram.messages_per_second``).
Telegram tolerates short bursts, so these are token buckets (channels/telegram/pacing.py) with a
burst allowance: a reply that follows the previous one closely leaves at once; only a chat
(or the bot) that keeps sending faster than the sustained rate waits. A wait longer than
``max_wait`` is not slept inside ``send``: it becomes :class:`ChannelRateLimited`, so the
outbox holds that chat and other chats go on. ``RetryAfter`` (a 429) from Telegram is the
same, for that chat only.

One outbound message can be several Telegram messages (long text, files). The parts already
delivered are remembered per ``idempotency_key`` (:class:`Progress`) so a retry after part 2
of 3 failed resumes at part 2. That record is in memory only, and lost with a failure whose
outcome is unknown (a time-out, a 5xx): then, as after a restart, the message is delivered
by :meth:`Sender.redeliver` into the messages :mod:`channels.telegram.recovery` found.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from telegram import (
    Bot,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    LinkPreviewOptions,
    Message,
    MessageEntity,
    ReplyParameters,
)
from telegram.constants import ChatAction
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)

from channels.buckets import Rate
from channels.telegram.convert import telegram_message_id
from channels.telegram.pacing import Pacer
from channels.telegram.recovery import MessageIds
from channels.telegram.render import Part, render_message
from gateway.core.errors import ChannelPermanentError, ChannelRateLimited, ChannelTransientError
from gateway.core.messages import Attachment, ChatRef, OutboundMessage

log = logging.getLogger(__name__)

# Under a streamed draft while the answer is written: a press sends /stop from the presser
# (channels/telegram/convert.py), whom the gateway checks; the final edit takes it away.
STOP_BUTTON = InlineKeyboardMarkup([[InlineKeyboardButton("Stop", callback_data="/stop")]])

# Every text the bot sends or edits asks Telegram for no link preview: Telegram's servers
# would fetch the first link at once, no click needed, so an address holding data
# (https://evil.example/?d=...) that a page talked the model into writing would carry it
# out (docs/security.md, "Links in answers"). sendMessageDraft takes no such option.
NO_PREVIEW = LinkPreviewOptions(is_disabled=True)

MAX_PHOTO_BYTES = 10_000_000  # larger images go as documents
_MAX_TRACKED = 1_000
PER_CHAT = Rate(1.0, burst=20)  # a long answer in parts, files, a quick exchange
PER_GROUP = Rate.per_minute(20, burst=20)  # Telegram: 20 messages a minute in a group
OVERALL = Rate(30.0, burst=100)  # a stampede of chats answered at once
PROBES = Rate(30.0, burst=30)  # settling lost sends (recovery.py), apart from the answers
PROBE_MAX_WAIT = 600.0  # a probe waits for its slot: the scans are bounded


@dataclass(frozen=True, slots=True)
class Pacing:
    """Sustained rates and the bursts Telegram tolerates above them."""

    per_chat: Rate = PER_CHAT
    per_group: Rate = PER_GROUP
    overall: Rate = OVERALL
    max_wait: float = 5.0  # longer waits hold the chat in the outbox instead
    probes: Rate = PROBES

    @classmethod
    def overall_rate(cls, per_second: float) -> Pacing:
        """The defaults with another overall rate (paid broadcasts allow up to 1000/s)."""
        return cls(overall=Rate(per_second, burst=max(OVERALL.burst, per_second)))


Step = Callable[[], Awaitable[int]]  # one Bot API call; returns the message id it sent


@dataclass(frozen=True, slots=True)
class _Target:
    chat_id: str
    thread: int | None
    reply: ReplyParameters | None


@dataclass(slots=True)
class Progress:
    """How far this process got with one outbound message."""

    slots: tuple[int, ...] = ()  # the messages its text parts are edited into (drafts)
    done: list[int] = field(default_factory=list)  # message ids of the steps that went out
    unsure: bool = False  # a step failed in a way that may have delivered it after all


T = TypeVar("T")


class Sender:
    def __init__(
        self,
        bot: Bot,
        pacing: Pacing | None = None,
        *,
        pacer: Pacer | None = None,
        ids: MessageIds | None = None,
    ) -> None:
        self._bot = bot
        self.ids = ids or MessageIds()  # the highest id seen per id space (recovery.py)
        self._pacing = pacing or Pacing()
        # Tests pass a pacer with their own clock; its overall rate is then the pacer's.
        self._pacer = pacer or Pacer(self._pacing.overall)
        self._probes = Pacer(self._pacing.probes)  # never the answers' share
        # idempotency_key -> how far its delivery got (bounded: the oldest go first)
        self._progress: OrderedDict[str, Progress] = OrderedDict()
        self.previews = True  # sendMessageDraft not refused so far

    def progress(self, key: str) -> Progress | None:
        """What this process knows of the delivery of the message with ``key``."""
        return self._progress.get(key)

    async def send(
        self, message: OutboundMessage, *, markup: InlineKeyboardMarkup | None = None
    ) -> str | None:
        """Deliver ``message`` (``markup``: buttons under its last part)."""
        return await self.finish(message, (), markup=markup)

    async def finish(
        self,
        message: OutboundMessage,
        drafts: Sequence[int],
        *,
        markup: InlineKeyboardMarkup | None = None,
    ) -> str | None:
        """Deliver ``message`` into the streamed draft messages ``drafts``: each text part
        edits a draft (now with its formatting), parts beyond them and files are sent, and
        drafts left over are deleted. Repeating it after a failure edits the same messages."""
        progress = self._track(message.idempotency_key)
        if not progress.done:
            progress.slots = tuple(drafts)
        return await self._into(message, progress, markup)

    async def redeliver(
        self,
        message: OutboundMessage,
        slots: Sequence[int],
        *,
        markup: InlineKeyboardMarkup | None = None,
        fresh: bool = False,
    ) -> str | None:
        """Deliver ``message`` afresh into ``slots``: the bot's messages in the chat that
        earlier attempts left (its parts that arrived, drafts), oldest first. Parts are
        edited into them ("not modified" where they already show it), the rest is sent and
        slots left over are deleted: the chat ends up showing the message once. ``fresh``:
        every part is sent as a new message and the slots are deleted (recovery.Found)."""
        self._progress.pop(message.idempotency_key, None)
        progress = self._track(message.idempotency_key)
        progress.slots = tuple(slots)
        return await self._into(message, progress, markup, fresh=fresh)

    def found_whole(self, message: OutboundMessage, message_id: int) -> str:
        """An earlier attempt left ``message`` whole in ``message_id``: nothing to redo
        (one part, sent by one call, without buttons the probe took off)."""
        self._progress.pop(message.idempotency_key, None)
        return str(message_id)

    def _track(self, key: str) -> Progress:
        progress = self._progress.setdefault(key, Progress())
        self._progress.move_to_end(key)
        while len(self._progress) > _MAX_TRACKED:
            self._progress.popitem(last=False)
        return progress

    async def _into(
        self,
        message: OutboundMessage,
        progress: Progress,
        markup: InlineKeyboardMarkup | None,
        *,
        fresh: bool = False,
    ) -> str | None:
        to = _Target(message.chat_id, _thread(message.chat), _reply(message))
        parts = render_message(message)
        slots = progress.slots
        editable = () if fresh else slots
        steps: list[Step] = []
        for i, part in enumerate(parts):
            buttons = markup if i == len(parts) - 1 else None
            if i < len(editable):
                steps.append(self._edit_step(part, to, slots[i], buttons))
            else:
                steps.append(self._text_step(part, to, buttons))
        steps.extend(self._file_step(attachment, to) for attachment in message.attachments)
        receipt = await self._deliver(message, progress, steps)
        for slot in slots:  # drafts left over, and drafts that could not hold a part
            if slot not in progress.done:
                await self.delete(message.chat, slot)
        self._progress.pop(message.idempotency_key, None)
        return receipt

    async def edit(self, chat: ChatRef, message_id: int, text: str) -> None:
        """Replace a draft's text (plain); paced, never waiting: a busy chat raises
        :class:`ChannelRateLimited` and the next edit carries the text."""
        await self._pace(chat.chat_id, max_wait=0.0)
        try:
            await _mapped(
                lambda: self._bot.edit_message_text(
                    text,
                    chat_id=chat.chat_id,
                    message_id=message_id,
                    reply_markup=STOP_BUTTON,
                    link_preview_options=NO_PREVIEW,
                )
            )
        except ChannelPermanentError as exc:
            if not _unchanged(exc):
                raise

    async def preview(self, chat: ChatRef, draft_id: int, text: str) -> None:
        """Show ``text`` as the private chat's draft preview (``sendMessageDraft``); paced
        like :meth:`edit`. A refusal (a Bot API server without the method, a chat that
        cannot show it) turns previews off for this bot: the drafts are edited instead."""
        await self._pace(chat.chat_id, max_wait=0.0)

        async def show() -> bool:
            try:
                return await self._bot.send_message_draft(
                    int(chat.chat_id), draft_id, text, message_thread_id=_thread(chat)
                )
            except InvalidToken as exc:  # 404: a Bot API server without the method
                raise ChannelPermanentError(f"sendMessageDraft: {exc.message}") from exc

        try:
            await _mapped(show)
        except ChannelPermanentError:
            self.previews = False
            raise

    async def post(self, chat: ChatRef, text: str, *, reply_to: str | None) -> int:
        """Post a new draft message (plain text); paced like :meth:`edit`."""
        await self._pace(chat.chat_id, max_wait=0.0)
        target = None if reply_to is None else telegram_message_id(reply_to)
        to = _Target(
            chat.chat_id,
            _thread(chat),
            None
            if target is None
            else ReplyParameters(message_id=target, allow_sending_without_reply=True),
        )
        began = time.time()
        message_id = (await _mapped(lambda: self._text(to, text, markup=STOP_BUTTON))).message_id
        self.ids.made(chat.chat_id, message_id, began)
        return message_id

    async def delete(self, chat: ChatRef, message_id: int) -> None:
        """Delete a draft nobody needs; one already gone (or too old to delete) stays."""
        try:
            await _mapped(
                lambda: self._bot.delete_message(chat_id=chat.chat_id, message_id=message_id)
            )
        except ChannelPermanentError as exc:
            log.info("telegram: draft %s not deleted: %s", message_id, exc)

    async def _deliver(
        self, message: OutboundMessage, progress: Progress, steps: list[Step]
    ) -> str | None:
        done = progress.done
        for step in steps[len(done) :]:
            await self._pace(message.chat_id)
            began = time.time()
            try:
                message_id = await _mapped(step)
            except ChannelTransientError:  # a time-out, a 5xx: it may have gone out
                progress.unsure = True
                raise
            done.append(message_id)
            if message_id in progress.slots:  # an edit of a message that was there
                self.ids.saw(message.chat_id, message_id)
            else:
                self.ids.made(message.chat_id, message_id, began)
        return ",".join(str(i) for i in done) or None

    async def is_ours(self, chat_id: str, message_id: int) -> bool:
        """Whether ``message_id`` is the bot's own message in the chat, asked by setting
        its buttons to none: "not modified" (or a change) means it is; "can't be edited"
        (someone else's) or "not found" (no such message there) means it is not. A message
        without buttons is left as it was (channels/telegram/recovery.py)."""
        await self._probes.acquire([], max_wait=PROBE_MAX_WAIT, what="probes paced by the bot")
        try:
            await _mapped(
                lambda: self._bot.edit_message_reply_markup(
                    chat_id=chat_id, message_id=message_id, reply_markup=None
                )
            )
        except ChannelPermanentError as exc:
            return _unchanged(exc)
        return True

    async def typing(self, chat: ChatRef) -> None:
        await _mapped(
            lambda: self._bot.send_chat_action(
                chat_id=chat.chat_id, action=ChatAction.TYPING, message_thread_id=_thread(chat)
            )
        )

    # -- building the parts ---------------------------------------------------------------

    def _text_step(
        self, part: Part, to: _Target, markup: InlineKeyboardMarkup | None = None
    ) -> Step:
        async def step() -> int:
            try:
                return (await self._text(to, part.text, part.entities, markup)).message_id
            except BadRequest as exc:
                if not part.entities or "entit" not in exc.message.lower():
                    raise
                log.info("telegram rejected formatting (%s); sending plain text", exc.message)
            return (await self._text(to, part.plain, (), markup)).message_id

        return step

    def _edit_step(
        self, part: Part, to: _Target, draft: int, markup: InlineKeyboardMarkup | None = None
    ) -> Step:
        """The final text of a part into the draft message ``draft``; a draft that cannot
        hold it (deleted by the user, too old, a file) is replaced by a new message."""

        async def edit(text: str, entities: tuple[MessageEntity, ...] = ()) -> int:
            try:
                await self._bot.edit_message_text(
                    text,
                    chat_id=to.chat_id,
                    message_id=draft,
                    entities=entities or None,
                    reply_markup=markup,
                    link_preview_options=NO_PREVIEW,
                )
            except BadRequest as exc:
                if "not modified" not in exc.message.lower():
                    raise
            return draft

        async def step() -> int:
            try:
                try:
                    return await edit(part.text, part.entities)
                except BadRequest as exc:
                    if not part.entities or "entit" not in exc.message.lower():
                        raise
                    log.info(
                        "telegram rejected formatting (%s); editing in plain text", exc.message
                    )
                return await edit(part.plain)
            except BadRequest as exc:
                if "edit" not in exc.message.lower():  # "message to edit not found", ...
                    raise
                log.info("telegram: draft %s gone (%s); sending the part anew", draft, exc.message)
            return await self._text_step(part, to, markup)()

        return step

    def _file_step(self, attachment: Attachment, to: _Target) -> Step:
        async def step() -> int:
            return (await self._file(attachment, to)).message_id

        return step

    async def _file(self, attachment: Attachment, to: _Target) -> Message:
        path = Path(attachment.path) if attachment.path else None
        if path is None or not path.is_file():
            name = attachment.filename or attachment.path or attachment.kind
            return await self._text(to, f"[could not attach {name}: file not found]")
        name = attachment.filename or path.name
        if attachment.kind == "image" and path.stat().st_size <= MAX_PHOTO_BYTES:
            return await self._bot.send_photo(
                chat_id=to.chat_id,
                photo=path,
                filename=name,
                message_thread_id=to.thread,
                reply_parameters=to.reply,
            )
        if attachment.kind == "voice" and path.suffix in (".ogg", ".oga", ".opus"):
            return await self._bot.send_voice(  # played in the chat, like the person's own
                chat_id=to.chat_id,
                voice=path,
                filename=name,
                message_thread_id=to.thread,
                reply_parameters=to.reply,
            )
        return await self._bot.send_document(
            chat_id=to.chat_id,
            document=path,
            filename=name,
            message_thread_id=to.thread,
            reply_parameters=to.reply,
        )

    async def _text(
        self,
        to: _Target,
        text: str,
        entities: tuple[MessageEntity, ...] = (),
        markup: InlineKeyboardMarkup | None = None,
    ) -> Message:
        return await self._bot.send_message(
            chat_id=to.chat_id,
            text=text,
            entities=entities or None,
            message_thread_id=to.thread,
            reply_parameters=to.reply,
            reply_markup=markup,
            link_preview_options=NO_PREVIEW,
        )

    # -- pacing ---------------------------------------------------------------------------

    async def _pace(self, chat_id: str, *, max_wait: float | None = None) -> None:
        keys = [("chat", chat_id, self._pacing.per_chat)]
        if chat_id.startswith("-"):  # group, supergroup and channel ids are negative
            keys.append(("group", chat_id, self._pacing.per_group))
        wait = self._pacing.max_wait if max_wait is None else max_wait
        await self._pacer.acquire(keys, max_wait=wait, what="paced by the bot")


def _unchanged(exc: ChannelPermanentError) -> bool:
    """Telegram refuses an edit that changes nothing; for a draft that is success."""
    return "not modified" in str(exc).lower()


def _thread(chat: ChatRef) -> int | None:
    return int(chat.thread_id) if chat.thread_id and chat.thread_id.isdigit() else None


def _reply(message: OutboundMessage) -> ReplyParameters | None:
    if message.reply_to_message_id is None:
        return None
    target = telegram_message_id(message.reply_to_message_id)
    if target is None:
        return None
    # If the message was deleted meanwhile, answer anyway instead of failing.
    return ReplyParameters(message_id=target, allow_sending_without_reply=True)


async def _mapped(call: Callable[[], Awaitable[T]]) -> T:
    """Run one Bot API call, translating its errors for the outbox."""
    try:
        result = await call()
    except RetryAfter as exc:
        raise ChannelRateLimited(retry_after_seconds(exc), "Telegram flood control") from exc
    except ChatMigrated as exc:
        raise ChannelPermanentError(
            f"the group became a supergroup with id {exc.new_chat_id}; "
            "add that id to telegram.group_allow_from"
        ) from exc
    except Forbidden as exc:  # blocked by the user, kicked from the group
        raise ChannelPermanentError(exc.message) from exc
    except BadRequest as exc:  # chat not found, thread not found, message too long ...
        raise ChannelPermanentError(exc.message) from exc
    except NetworkError as exc:  # includes TimedOut and 5xx answers
        raise ChannelTransientError(exc.message) from exc
    except TelegramError as exc:  # InvalidToken, Conflict, ...: retry with backoff
        raise ChannelTransientError(exc.message) from exc
    return result


def retry_after_seconds(exc: RetryAfter) -> float:
    with warnings.catch_warnings():  # PTB 22 warns about the int/timedelta migration
        warnings.simplefilter("ignore")
        value = exc.retry_after
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return float(value)
