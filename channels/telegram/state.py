"""Small things the Telegram channel keeps between runs, and the one-poller-per-token lock.

The update offset is *not* stored here: Telegram keeps it server-side, and it only moves
when a ``getUpdates`` call confirms updates that are already journaled. What is stored is
the command list last registered with ``setMyCommands`` (per token), so a restart does not
re-register it (repeated registration on every restart has earned peers 429 lockouts).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from gateway.core.errors import AnotherInstanceRunning
from gateway.core.system.fileutil import write_atomic
from gateway.core.system.lock import ProcessLock

log = logging.getLogger(__name__)


def token_digest(token: str) -> str:
    """A short, non-reversible name for a token (safe in file names and state)."""
    return hashlib.sha256(token.encode()).hexdigest()[:24]


class ChannelState:
    """A JSON object in ``<data_dir>/channels/telegram.json``, written atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:  # a damaged file only costs a re-registration
            log.warning("ignoring unreadable %s: %s", self.path, exc)
            return {}
        return data if isinstance(data, dict) else {}

    def update(self, **values: Any) -> None:
        data = self.load()
        data.update(values)
        write_atomic(self.path, json.dumps(data, indent=2, sort_keys=True))


def lock_dir() -> Path:
    """A directory every Switchboard home of this user shares (not inside any home)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "switchboard"
    return Path(tempfile.gettempdir()) / f"switchboard-{os.getuid()}"


class TokenLock:
    """Only one process may receive updates for a bot token, whatever its data directory.

    Two pollers on one token make Telegram answer ``409 Conflict`` to both in turn, and two
    webhook owners overwrite each other; either way updates go to whichever asked last.
    """

    def __init__(self, token: str, directory: Path | None = None) -> None:
        self.path = (directory or lock_dir()) / f"telegram-{token_digest(token)}.lock"
        self._lock = ProcessLock(self.path)

    def acquire(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            self._lock.acquire()
        except AnotherInstanceRunning:
            try:
                holder = self.path.read_text(encoding="utf-8").strip() or "unknown"
            except OSError:
                holder = "unknown"
            raise AnotherInstanceRunning(
                f"another Switchboard gateway (pid {holder}) is already receiving updates for "
                f"this Telegram bot token (lock {self.path}). Telegram delivers each update to "
                "one receiver only: stop the other gateway, or give this one its own bot token."
            ) from None

    def release(self) -> None:
        self._lock.release()
