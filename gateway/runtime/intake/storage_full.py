"""What the gateway does while the disk under its store is full.

An inbound message that cannot be journaled is not acknowledged: the channel keeps the
platform's offset, answers Slack with an error, leaves the email unseen, so the platform
delivers it again and nothing is lost. Meanwhile:

* the log says once, at ERROR, what happened and what to do (free space under the data
  directory), and once more when messages are taken in again;
* each chat that wrote during the outage gets at most one notice, sent straight through its
  channel (the outbox is in the full store), saying its message will be answered once space
  is back, so nobody resends. A notice that cannot be sent is only logged.

Inbound is not retried here: the platforms' redelivery does, and the first message journaled
after the outage ends it. A turn running when the disk fills is different: its steps
and its answer exist only in memory, so its writes (checkpoints, the commit) wait for space
(:func:`gateway.core.system.storage.until_stored`, reporting here) and the user gets that answer
exactly once when space is back (no second model call, no notice in between).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from gateway.core.messages import InboundMessage, OutboundKind, OutboundMessage

log = logging.getLogger(__name__)

NOTICE = (
    "I received your message but cannot store it right now: my disk is full. It will be "
    "answered once space is freed; there is no need to send it again."
)
NOTICE_TIMEOUT = 10.0

Send = Callable[[OutboundMessage], Awaitable[object]]


class StorageFullWatch:
    """The state of one outage: whether the log was told, and which chats were."""

    def __init__(self, data_dir: Path, send: Send) -> None:
        self._data_dir = data_dir
        self._send = send
        self.full = False
        self.outages = 0
        self.outage = asyncio.Event()  # set while the disk is full (status, tests)
        self._told: set[str] = set()

    async def refused(self, msg: InboundMessage) -> None:
        """``msg`` could not be journaled because the disk is full."""
        self.blocked()
        if msg.session_key in self._told:
            return
        self._told.add(msg.session_key)
        notice = OutboundMessage.reply_to(msg, NOTICE, kind=OutboundKind.NOTICE)
        try:
            async with asyncio.timeout(NOTICE_TIMEOUT):
                await self._send(notice)
        except Exception as exc:  # the notice is a courtesy; the message itself is safe
            log.warning("storage full: could not tell %s: %r", msg.session_key, exc)

    def blocked(self) -> None:
        """A write failed because the disk is full: say so once per outage."""
        if self.full:
            return
        self.full = True
        self.outages += 1
        self.outage.set()
        log.error(
            "storage full: the disk holding %s has no room, so new messages are not "
            "acknowledged and the platforms will deliver them again, and finished answers "
            "wait to be stored. Free space on that disk (`df -h %s`; old logs and "
            "attachments are safe to move); work resumes by itself, nothing needs restarting.",
            self._data_dir,
            self._data_dir,
        )

    def accepted(self) -> None:
        """A message was journaled: if the disk was full, it no longer is."""
        if self.full:
            self.full = False
            self.outage.clear()
            self._told.clear()
            log.warning("storage writable again: messages are being taken in")
