"""Outbound delivery to Signal: styled parts, files, quotes; never doubled where Signal can
tell; errors typed.

**Parts.** One outbound message can be several Signal messages (a long text, files): each
is one ``send``, whose result names it by its timestamp. The parts already delivered are
remembered per ``idempotency_key`` in memory, so a retry after part 2 of 3 failed resumes
at part 2, and the receipt lists every part's timestamp.

**A send whose outcome is unknown** (the process died during the call, the call timed out
or lost its connection after signal-cli had it): :meth:`Sender.resend` counts the parts
the recipients' devices acknowledged (:mod:`.recovery`) and sends only the rest. After a
definite failure (signal-cli answered with an error, or was not reached at all) the
process continues from what it knows, without waiting.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import mimetypes
from collections import OrderedDict
from collections.abc import Collection
from pathlib import Path
from typing import Any

from channels.signal import render
from channels.signal.recovery import Finder
from channels.signal.rpc import RpcError, SignalRpc, Unreachable
from channels.signal.settings import is_person
from gateway.core.channel import LostSend
from gateway.core.errors import ChannelPermanentError, ChannelTransientError
from gateway.core.messages import Attachment, ChatRef, OutboundMessage

log = logging.getLogger(__name__)

_MAX_TRACKED = 1_000
Step = dict[str, Any]


def target(chat_id: str) -> dict[str, Any]:
    """Where a chat's messages go: a person (number or UUID) or a group (its id)."""
    return {"recipient": [chat_id]} if is_person(chat_id) else {"groupId": chat_id}


def timestamps(receipt: str | None) -> list[int]:
    """The Signal timestamps a receipt (``send``'s return value) lists."""
    return [int(part) for part in (receipt or "").split(",") if part.isdigit()]


class Sender:
    def __init__(self, rpc: SignalRpc, finder: Finder) -> None:
        self._rpc = rpc
        self._finder = finder
        self._done: OrderedDict[str, list[int]] = OrderedDict()  # key -> parts' timestamps
        self._uncertain: set[str] = set()  # keys whose last call may have reached signal-cli

    async def send(self, message: OutboundMessage) -> str | None:
        return await self._deliver(message, await asyncio.to_thread(self._steps, message))

    async def resend(self, lost: LostSend, people: Collection[str]) -> str | None:
        """Deliver ``lost.message`` once: parts its lost attempts delivered count as sent."""
        message = lost.message
        steps = await asyncio.to_thread(self._steps, message)
        key = message.idempotency_key
        done = self._done.get(key)
        if done is None or key in self._uncertain:
            done = list(done or ())
            known = {t for k in lost.known for t in timestamps(k.message_id)} | set(done)
            found = await self._finder.arrived(
                people, since=lost.since, parts=len(steps) - len(done), known=known
            )
            if found:
                log.info(
                    "signal: %d part(s) of %s arrived before the outcome was lost; not sent again",
                    len(found),
                    key,
                )
            self._remember(key, [*done, *found])
            self._uncertain.discard(key)
        return await self._deliver(message, steps)

    async def _deliver(self, message: OutboundMessage, steps: list[Step]) -> str | None:
        key = message.idempotency_key
        done = self._remember(key, self._done.get(key, []))
        for step in steps[len(done) :]:
            done.append(await self._call(key, step))
        return ",".join(str(t) for t in done) or None

    def _remember(self, key: str, done: list[int]) -> list[int]:
        self._done[key] = done
        self._done.move_to_end(key)
        while len(self._done) > _MAX_TRACKED:
            self._done.popitem(last=False)
        return done

    async def _call(self, key: str, step: Step) -> int:
        try:
            result = await self._rpc.call("send", step)
        except RpcError as exc:
            raise exc.channel_error() from exc
        except Unreachable as exc:
            if exc.sent:
                self._uncertain.add(key)
            raise ChannelTransientError(str(exc)) from exc
        stamp = result.get("timestamp") if isinstance(result, dict) else None
        if not isinstance(stamp, int):
            raise ChannelPermanentError(f"signal-cli's send answered without a timestamp: {result}")
        return stamp

    def _steps(self, message: OutboundMessage) -> list[Step]:
        """The ``send`` calls the message takes, in order (text parts, then files)."""
        where = target(message.chat_id)
        steps: list[Step] = []
        for index, part in enumerate(render.parts(message.text)):
            step: Step = {**where, "message": part.text}
            if part.styles:
                step["textStyle"] = list(part.styles)
            if index == 0 and message.reply_to_message_id:
                step.update(_quote(message.reply_to_message_id))
            steps.append(step)
        for attachment in message.attachments:
            step = {**where, "attachment": [_data_uri(attachment)]}
            if attachment.kind == "voice":
                step["voiceNote"] = True
            steps.append(step)
        return steps

    async def typing(self, chat: ChatRef) -> None:
        try:
            await self._rpc.call("sendTyping", target(chat.chat_id))
        except (RpcError, Unreachable) as exc:
            log.debug("signal: typing in %s failed: %s", chat.chat_id, exc)

    async def react(
        self, chat_id: str, author: str, timestamp: int, emoji: str, *, remove: bool
    ) -> None:
        """Add or take back our reaction to a person's message; cosmetic: failures are logged."""
        params = {
            **target(chat_id),
            "emoji": emoji,
            "targetAuthor": author,
            "targetTimestamp": timestamp,
            "remove": remove,
        }
        try:
            await self._rpc.call("sendReaction", params)
        except (RpcError, Unreachable) as exc:
            log.debug("signal: reaction on %s failed: %s", timestamp, exc)


def _quote(reply_to: str) -> dict[str, Any]:
    """A quote of the message ``<author>:<timestamp>`` (the platform id we gave it)."""
    author, _, stamp = reply_to.rpartition(":")
    if not author or not stamp.isdigit():
        return {}
    return {"quoteTimestamp": int(stamp), "quoteAuthor": author}


def _data_uri(attachment: Attachment) -> str:
    """The file as a data URI (RFC 2397 with signal-cli's ``filename``): it reaches
    signal-cli wherever it runs, where a path would have to be on its own disk."""
    path = Path(attachment.path) if attachment.path else None
    if path is None or not path.is_file():
        raise ChannelPermanentError(
            f"could not attach {attachment.filename or attachment.kind}: file not found"
        )
    name = (attachment.filename or path.name).replace(";", "_").replace(",", "_")
    mime = attachment.mime_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f"data:{mime};filename={name};base64,{data}"
