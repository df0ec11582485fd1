"""Outbound delivery to Slack: split, mapped onto the gateway's errors, never blindly repeated.

The ``AsyncWebClient`` is built with no retry handlers: the SDK's default retries a request
after a dropped connection, when ``chat.postMessage`` may already have posted (a peer's
double posts). Here every Web API call is made once, and failures become gateway errors:

* 429 / ``ratelimited`` → :class:`ChannelRateLimited` with Slack's ``Retry-After``; the outbox
  holds the chat, nothing sleeps here.
* Slack's definite refusals (``channel_not_found``, ``not_in_channel``, ``is_archived``,
  ``invalid_auth``, ``msg_too_long``, ...) → :class:`ChannelPermanentError`.
* A dropped connection, a timeout, a 5xx or ``internal_error``/``request_timeout`` → transient,
  and the message is marked *unsure*: a part may have been posted.

Every text part carries message metadata naming it (``switchboard_part`` = idempotency key
and index), every streamed draft metadata saying it is one (``switchboard_draft``). So a
message whose earlier attempts left no record (a crash, an unsure failure) is delivered by
:meth:`Sender.resend`: the conversation's recent history is read once
(``conversations.history``, or ``.replies`` in a thread, with ``include_all_metadata``); a
part found there counts as delivered, a draft found there that the store does not know (its
post lost its answer) is edited into the message or deleted, a file is found by its name and
our bot user; the rest is posted. The lookup failing is transient (nothing posted); without
the ``*:history`` scopes it is refused, and the message is posted again with a warning.

One outbound message can be several Slack messages (long text, files). Parts delivered are
remembered per ``idempotency_key`` in memory (bounded): a retry in the same process after
part 2 of 3 failed for sure resumes at part 2 without reading the history.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.render import NO_UNFURL, render_message
from gateway.core.channel import LostSend
from gateway.core.errors import ChannelPermanentError, ChannelRateLimited, ChannelTransientError
from gateway.core.messages import OutboundMessage

log = logging.getLogger(__name__)

EVENT_TYPE = "switchboard_part"
DRAFT_TYPE = "switchboard_draft"
DEFAULT_RETRY_AFTER = 1.0
_MAX_TRACKED = 1_000
_UNSURE_ERRORS = {"internal_error", "fatal_error", "request_timeout", "service_unavailable"}
LOOKBACK = 120.0  # seconds before the first lost attempt that the history lookup covers


@dataclass(frozen=True, slots=True)
class Part:
    text: str | None = None
    file: Path | None = None


@dataclass(slots=True)
class Progress:
    done: dict[int, str] = field(default_factory=dict)  # part index -> ts or file id
    unsure: bool = False  # a post failed in a way that may have posted it after all


@dataclass(frozen=True, slots=True)
class Found:
    """What the history shows of a message's earlier attempts."""

    parts: dict[int, str]  # part index -> ts (or file id) of parts that arrived
    drafts: tuple[str, ...]  # ts of draft messages the store does not know


class Unsure(Exception):
    """A failure after which the request may still have taken effect."""


class Sender:
    def __init__(
        self,
        client: AsyncWebClient,
        *,
        bot_user_id: Callable[[], str | None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._bot_user_id = bot_user_id
        self._clock = clock
        self._progress: OrderedDict[str, Progress] = OrderedDict()
        self.run = secrets.token_hex(6)  # the mark of this process's attempts

    def progress(self, key: str) -> Progress | None:
        return self._progress.get(key)

    async def send(self, message: OutboundMessage, drafts: Sequence[str] = ()) -> str | None:
        """Deliver ``message``; with ``drafts`` (the ts of a streamed draft's messages), its
        text parts are edited into those first, and drafts left over are deleted."""
        parts = _parts(message)
        progress = self._progress_for(message.idempotency_key)
        for index, part in enumerate(parts):
            if index in progress.done:
                continue
            if index < len(drafts) and part.text and await self._edit(message, drafts[index], part):
                progress.done[index] = drafts[index]
                continue
            try:
                progress.done[index] = await self._post(message, part, index)
            except Unsure as exc:
                progress.unsure = True
                raise ChannelTransientError(f"slack: {exc}") from exc.__cause__
        used = set(progress.done.values())
        for ts in drafts:  # left over, or gone when edited
            if ts not in used:
                await self.delete(message.chat_id, ts)
        self._progress.pop(message.idempotency_key, None)
        return ",".join(progress.done[i] for i in sorted(progress.done)) or None

    async def resend(self, message: OutboundMessage, lost: LostSend) -> str | None:
        """Deliver ``message`` after attempts whose outcome is unknown: what they posted is
        read back from the history and kept (see the module docstring)."""
        progress = self._progress.get(message.idempotency_key)
        mine = all((a.mark or "") == self.run and not a.draft for a in lost.attempts)
        if progress is not None and not progress.unsure and mine:
            return await self.send(message, lost.drafts)  # this process knows what it did
        found = await self.look(message, lost)
        progress = Progress(done=dict(found.parts))
        self._progress[message.idempotency_key] = progress
        if found.parts or found.drafts:
            log.info(
                "slack: an interrupted delivery of %s had left part(s) %s and draft(s) %s",
                message.idempotency_key,
                sorted(found.parts),
                list(found.drafts),
            )
        slots = sorted({*lost.drafts, *found.drafts}, key=float)
        return await self.send(message, slots)

    async def _edit(self, message: OutboundMessage, ts: str, part: Part) -> bool:
        """Edit a draft into ``part``; ``False`` when the draft is gone (post it instead)."""
        try:
            with mapped_errors(unsure_possible=False):
                # blocks=[]: the draft's Stop button goes with the final text
                await self._client.chat_update(
                    channel=message.chat_id, ts=ts, text=part.text, blocks=[], **NO_UNFURL
                )
        except ChannelPermanentError as exc:
            log.info("slack: draft %s not edited (%s); posting the part", ts, exc)
            return False
        return True

    async def delete(self, channel: str, ts: str) -> None:
        try:
            with mapped_errors(unsure_possible=False):
                await self._client.chat_delete(channel=channel, ts=ts)
        except ChannelPermanentError as exc:  # already gone
            log.info("slack: draft %s not deleted: %s", ts, exc)

    def _progress_for(self, key: str) -> Progress:
        progress = self._progress.setdefault(key, Progress())
        self._progress.move_to_end(key)
        while len(self._progress) > _MAX_TRACKED:
            self._progress.popitem(last=False)
        return progress

    async def _post(self, message: OutboundMessage, part: Part, index: int) -> str:
        with mapped_errors(unsure_possible=True):
            if part.file is not None:
                response = await self._client.files_upload_v2(
                    channel=message.chat_id,
                    thread_ts=message.thread_id,
                    file=str(part.file),
                    filename=part.file.name,
                )
                files = response.get("files") or [{}]
                return str(files[0].get("id") or "")
            response = await self._client.chat_postMessage(
                channel=message.chat_id,
                text=part.text or "",
                thread_ts=message.thread_id,
                metadata={
                    "event_type": EVENT_TYPE,
                    "event_payload": {"part": f"{message.idempotency_key}:{index}"},
                },
                **NO_UNFURL,
            )
            return str(response.get("ts") or "")

    async def look(self, message: OutboundMessage, lost: LostSend) -> Found:
        """Read the conversation back from just before the first lost attempt."""
        query: dict[str, Any] = {
            "channel": message.chat_id,
            "oldest": f"{lost.since - LOOKBACK:.6f}",
            "inclusive": True,
            "include_all_metadata": True,
            "limit": 200,
        }
        try:
            with mapped_errors(unsure_possible=False):
                if message.thread_id:
                    response = await self._client.conversations_replies(
                        ts=message.thread_id, **query
                    )
                else:
                    response = await self._client.conversations_history(**query)
        except ChannelPermanentError as exc:
            log.warning("slack: cannot check whether a message arrived (%s); sending it again", exc)
            return Found({}, ())
        posted = response.get("messages") or []
        known = {k.message_id for k in lost.known} | set(lost.drafts)
        parts = _parts(message)
        found: dict[int, str] = {}
        drafts: list[str] = []
        for item in posted:
            metadata = item.get("metadata") or {}
            payload = metadata.get("event_payload") or {}
            ts = str(item.get("ts"))
            if metadata.get("event_type") == DRAFT_TYPE and ts not in known:
                drafts.append(ts)
                continue
            for index, part in enumerate(parts):
                if part.file is None:
                    wanted = f"{message.idempotency_key}:{index}"
                    if metadata.get("event_type") == EVENT_TYPE and payload.get("part") == wanted:
                        found[index] = ts
                elif item.get("user") == self._bot_user_id() and any(
                    f.get("name") == part.file.name for f in item.get("files") or []
                ):
                    found[index] = ts
        return Found(found, tuple(drafts))


def _parts(message: OutboundMessage) -> list[Part]:
    parts = [Part(text=text) for text in render_message(message)]
    parts += [Part(file=Path(a.path)) for a in message.attachments if a.path]
    for part in parts:
        if part.file is not None and not part.file.is_file():
            raise ChannelPermanentError(f"attachment not found: {part.file}")
    return parts


@contextlib.contextmanager
def mapped_errors(*, unsure_possible: bool) -> Iterator[None]:
    """Translate slack_sdk and network errors; :class:`Unsure` for ambiguous ones if allowed."""

    def ambiguous(what: str, exc: BaseException) -> NoReturn:
        if unsure_possible:
            raise Unsure(f"may or may not have been posted ({what})") from exc
        raise ChannelTransientError(f"slack: {what}") from exc

    try:
        yield
    except SlackApiError as exc:
        response = exc.response
        status = getattr(response, "status_code", 0)
        error = str(response.get("error") or "")
        if status == 429 or error == "ratelimited":
            raise ChannelRateLimited(retry_after(response)) from exc
        if status >= 500 or error in _UNSURE_ERRORS:
            ambiguous(f"{status} {error}".strip(), exc)
        raise ChannelPermanentError(f"slack refused: {error or status}") from exc
    except aiohttp.ClientConnectorError as exc:  # never connected: nothing was sent
        raise ChannelTransientError(f"slack unreachable: {exc}") from exc
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        ambiguous(repr(exc), exc)
    except SlackClientError as exc:
        raise ChannelPermanentError(f"slack client error: {exc}") from exc


def retry_after(response: Any) -> float:
    headers = getattr(response, "headers", None) or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else DEFAULT_RETRY_AFTER
    except ValueError:
        return DEFAULT_RETRY_AFTER
