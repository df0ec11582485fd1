"""Per-turn trace: every model call, tool call and guard decision, written as JSONL.

Read it back with ``switchboard trace <turn id>``. Lines are redacted before they are
written; the files live in the data directory, never in the agent's workspace.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.core.system.fileutil import private_folders
from gateway.core.turns import TurnKind

Redact = Callable[[str], str]


class TurnTrace:
    def __init__(
        self,
        turn_id: str,
        *,
        session_key: str = "",
        kind: TurnKind = TurnKind.CHAT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.turn_id = turn_id
        self._clock = clock
        self._start = clock()
        self.events: list[dict[str, Any]] = []
        self.add("turn", session_key=session_key, kind=kind)

    def add(self, event: str, **fields: Any) -> None:
        self.events.append({"t": round(self._clock() - self._start, 4), "event": event, **fields})

    def decision(self, guard: str, code: str, reason: str, **fields: Any) -> None:
        self.add("guard", guard=guard, code=code, reason=reason, **fields)

    def decisions(self, guard: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.events
            if e["event"] == "guard" and (guard is None or e["guard"] == guard)
        ]

    def write(self, directory: Path, redact: Redact = lambda s: s) -> Path:
        day = time.strftime("%Y-%m-%d", time.localtime(self._start))
        path = directory / day / f"{self.turn_id}.jsonl"
        lines = [redact(json.dumps(e, ensure_ascii=False, default=str)) for e in self.events]
        data = ("\n".join(lines) + "\n").encode()
        # Created private (0600) in one call; the day's folder (0700, and the traces' own
        # when it is missing too) only when it is missing.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            private_folders(path.parent)
            fd = os.open(path, flags, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return path


def find_trace(directory: Path, turn_id: str) -> Path | None:
    """The trace file of a turn, by full id or a unique prefix."""
    matches = sorted(directory.glob(f"*/{turn_id}*.jsonl"))
    return matches[0] if len(matches) == 1 else None


def read_trace(path: Path) -> list[dict[str, Any]]:
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn last line after a crash
    return events


def latest_trace(directory: Path) -> Path | None:
    paths = list(directory.glob("*/*.jsonl"))
    return max(paths, key=lambda p: p.stat().st_mtime) if paths else None
