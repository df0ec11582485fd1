"""The email channel's small persistent state: ``data_dir/channels/email.json``.

* ``uidvalidity`` + ``last_uid``: where reading the mailbox resumes after a restart.
* ``threads``: per conversation, what a reply needs to land in the same thread (subject,
  the Message-ID to answer, References), so an answer sent after a restart still threads.
* ``message_threads``: Message-ID -> thread, for clients that drop ``References``.
* ``sent``: idempotency key -> Message-ID of replies already handed to the server.
* ``replies``: send times per correspondent, for the hourly reply cap (kept across restarts
  so a crash loop cannot reset it).

Written atomically (temporary file, fsync, rename). A damaged file is logged and replaced:
the worst case is re-reading unseen mail, which the journal deduplicates by Message-ID.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gateway.core.system.fileutil import write_atomic

log = logging.getLogger(__name__)

MAX_THREADS = 2_000
MAX_MESSAGE_IDS = 10_000
MAX_SENT = 2_000
HOUR = 3600.0


@dataclass(slots=True)
class ThreadInfo:
    address: str  # the correspondent
    subject: str  # the thread's subject as the correspondent wrote it
    reply_to: str | None  # Message-ID of the latest inbound message in the thread
    references: list[str] = field(default_factory=list)
    updated: float = 0.0


@dataclass(slots=True)
class EmailState:
    uidvalidity: int | None = None
    last_uid: int = 0
    threads: dict[str, ThreadInfo] = field(default_factory=dict)
    message_threads: dict[str, str] = field(default_factory=dict)
    sent: dict[str, str] = field(default_factory=dict)
    replies: dict[str, list[float]] = field(default_factory=dict)

    # -- threads ----------------------------------------------------------------------------

    def thread_for(self, ids: list[str]) -> str | None:
        """The known thread any of ``ids`` (References, In-Reply-To) belongs to."""
        for message_id in reversed(ids):
            thread = self.message_threads.get(message_id)
            if thread is not None:
                return thread
        return None

    def remember_message(self, message_id: str, thread: str) -> None:
        self.message_threads[message_id] = thread
        _trim(self.message_threads, MAX_MESSAGE_IDS)

    def remember_thread(self, key: str, info: ThreadInfo) -> None:
        self.threads.pop(key, None)
        self.threads[key] = info  # most recent last
        _trim(self.threads, MAX_THREADS)

    def forget_thread(self, key: str, message_id: str | None) -> None:
        self.threads.pop(key, None)
        if message_id:
            self.message_threads.pop(message_id, None)

    # -- replies ----------------------------------------------------------------------------

    def replies_within_hour(self, address: str, now: float) -> int:
        recent = [t for t in self.replies.get(address, []) if now - t < HOUR]
        if recent:
            self.replies[address] = recent
        else:
            self.replies.pop(address, None)
        return len(recent)

    def hour_frees_in(self, address: str, now: float) -> float:
        """Seconds until the oldest reply to ``address`` of the last hour leaves it."""
        recent = self.replies.get(address) or [now]
        return max(1.0, HOUR - (now - min(recent)) + 1.0)

    def reserve_reply(self, address: str, now: float) -> None:
        """Count a reply before it is sent, so concurrent sends cannot overshoot the cap."""
        self.replies.setdefault(address, []).append(now)
        for other in list(self.replies):
            self.replies_within_hour(other, now)

    def release_reply(self, address: str, at: float) -> None:
        """Undo :meth:`reserve_reply` for a reply that was not sent."""
        with contextlib.suppress(KeyError, ValueError):
            self.replies[address].remove(at)

    def record_sent(self, key: str, message_id: str) -> None:
        self.sent[key] = message_id
        _trim(self.sent, MAX_SENT)

    # -- persistence ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["version"] = 1
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EmailState:
        return cls(
            uidvalidity=int(data["uidvalidity"]) if data.get("uidvalidity") is not None else None,
            last_uid=int(data.get("last_uid", 0)),
            threads={k: ThreadInfo(**v) for k, v in data.get("threads", {}).items()},
            message_threads=dict(data.get("message_threads", {})),
            sent=dict(data.get("sent", {})),
            replies={k: [float(t) for t in v] for k, v in data.get("replies", {}).items()},
        )

    @classmethod
    def load(cls, path: Path) -> EmailState:
        try:
            return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError, TypeError, KeyError) as exc:
            log.warning("email state %s is unreadable (%s); starting fresh", path, exc)
            return cls()

    def save(self, path: Path) -> None:
        write_atomic(path, json.dumps(self.to_dict()))


def _trim(mapping: dict[str, Any], limit: int) -> None:
    """Drop the oldest entries (dicts keep insertion order)."""
    for key in list(mapping)[: max(0, len(mapping) - limit)]:
        del mapping[key]
