"""Outbound delivery to Discord: split, mapped onto the gateway's error types, never doubled.

Rate limits: discord.py keeps Discord's per-route buckets and waits for a bucket to refill
before a request (that wait happens in the outbox worker, never inside a turn). A 429 is
retried by discord.py only when it came through Discord's proxy (``Via`` header) and its
``retry_after`` is under ``max_ratelimit_timeout``; otherwise it raises, and this module
turns a 429 into :class:`ChannelRateLimited` so the outbox holds the chat for
``Retry-After`` seconds. Forbidden (403), NotFound (404) and other 4xx are permanent; 5xx
and network failures are transient (discord.py has already retried 500/502/504 with the
same nonce, so Discord itself drops the repeats).

One outbound message can be several Discord messages. The parts already delivered are
remembered per ``idempotency_key``, in memory (bounded): a retry after part 2 of 3 failed
resumes at part 2. After a restart a half-sent message starts again at part 1 — and each
part's nonce makes Discord answer a repeat within a few minutes with the message it
already has.
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict
from collections.abc import Iterator

import aiohttp
import discord

from channels.discord.render import ALLOWED_MENTIONS, Part, nonce, render
from gateway.core.errors import ChannelPermanentError, ChannelRateLimited, ChannelTransientError
from gateway.core.messages import OutboundMessage

log = logging.getLogger(__name__)

DEFAULT_RETRY_AFTER = 5.0
_MAX_TRACKED = 1_000


class Sender:
    def __init__(self, client: discord.Client) -> None:
        self._client = client
        self._delivered: OrderedDict[str, dict[int, int]] = OrderedDict()

    async def send(self, message: OutboundMessage) -> str | None:
        parts = render(message.text, message.attachments)
        for part in parts:
            missing = [path for path in part.files if not path.is_file()]
            if missing:
                raise ChannelPermanentError(f"attachment not found: {missing[0]}")
        target = self._client.get_partial_messageable(int(message.thread_id or message.chat_id))
        done = self._delivered.setdefault(message.idempotency_key, {})
        self._delivered.move_to_end(message.idempotency_key)
        while len(self._delivered) > _MAX_TRACKED:
            self._delivered.popitem(last=False)
        for index, part in enumerate(parts):
            if index in done:
                continue
            reference = None
            # A slash command or button press is no message (its id is "interaction:..."):
            # its answer is a plain message, not a reply.
            if index == 0 and (message.reply_to_message_id or "").isdigit():
                reference = discord.MessageReference(
                    message_id=int(message.reply_to_message_id or 0),
                    channel_id=target.id,
                    fail_if_not_exists=False,
                )
            with mapped_errors():
                sent = await send_part(target, part, message.idempotency_key, index, reference)
            done[index] = sent.id
        return ",".join(str(done[i]) for i in sorted(done)) or None

    async def react(self, channel_id: int, message_id: int, emoji: str, *, add: bool) -> None:
        """Add or remove our reaction; cosmetic, so failures are only logged."""
        partial = self._client.get_partial_messageable(channel_id).get_partial_message(message_id)
        try:
            if add:
                await partial.add_reaction(emoji)
            elif self._client.user is not None:
                await partial.remove_reaction(emoji, self._client.user)
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.debug("discord: reaction on %s failed: %s", message_id, exc)


async def send_part(
    target: discord.PartialMessageable,
    part: Part,
    key: str,
    index: int,
    reference: discord.MessageReference | None,
) -> discord.Message:
    files = [discord.File(path) for path in part.files]
    try:
        return await target.send(
            content=part.content,
            files=files,
            nonce=nonce(key, index),
            reference=reference,  # type: ignore[arg-type] # None is accepted at runtime
            allowed_mentions=ALLOWED_MENTIONS,
            suppress_embeds=True,
        )
    finally:
        for file in files:
            file.close()


@contextlib.contextmanager
def mapped_errors() -> Iterator[None]:
    """Translate discord.py and network errors into the gateway's channel errors."""
    try:
        yield
    except discord.RateLimited as exc:
        raise ChannelRateLimited(exc.retry_after) from exc
    except (discord.Forbidden, discord.NotFound) as exc:
        raise ChannelPermanentError(f"discord refused: {exc}") from exc
    except discord.HTTPException as exc:
        if exc.status == 429:
            raise ChannelRateLimited(retry_after(exc)) from exc
        if exc.status >= 500:
            raise ChannelTransientError(f"discord server error: {exc}") from exc
        raise ChannelPermanentError(f"discord rejected the message: {exc}") from exc
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise ChannelTransientError(f"discord unreachable: {exc!r}") from exc


def retry_after(exc: discord.HTTPException) -> float:
    """Seconds Discord asked us to wait (``Retry-After`` header), with a safe default."""
    headers = getattr(exc.response, "headers", None) or {}
    for name in ("Retry-After", "X-RateLimit-Reset-After"):
        value = headers.get(name)
        if value is None:
            continue
        with contextlib.suppress(ValueError):
            return max(0.0, float(value))
    return DEFAULT_RETRY_AFTER
