"""Reading the per-turn traces (JSONL under ``data_dir/traces/<day>/<turn id>.jsonl``).

The agent writes them (agent/guards/trace.py); the control center lists recent turns with
their guard decisions and shows one turn's events; metrics follow new lines as they are
appended. Only this module knows the file layout on the web side. All functions here do
blocking file I/O: call them through ``asyncio.to_thread``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TURN_ID_RE = re.compile(r"[0-9A-Za-z_-]{6,80}")
DAY_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
FAILURE_EVENTS = frozenset({"llm_error", "internal_error"})
FAILURE_CODES = frozenset({"TURN_TIMEOUT", "TOKEN_LIMIT", "STEP_LIMIT"})
RECENT_DAYS = 7

Event = dict[str, Any]


def parse_lines(text: str) -> list[Event]:
    events = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line after a crash
        if isinstance(event, dict):
            events.append(event)
    return events


def read_events(path: Path) -> list[Event]:
    return parse_lines(path.read_text(encoding="utf-8", errors="replace"))


def find_trace(directory: Path, turn_id: str) -> Path | None:
    """The trace file of one turn by its exact id (no globbing of user input)."""
    if not TURN_ID_RE.fullmatch(turn_id) or not directory.is_dir():
        return None
    for day in sorted(day_dirs(directory), reverse=True):
        candidate = day / f"{turn_id}.jsonl"
        if candidate.is_file() and not candidate.is_symlink():
            return candidate
    return None


def day_dirs(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return [p for p in directory.iterdir() if p.is_dir() and DAY_RE.fullmatch(p.name)]


def segments(events: Iterable[Event]) -> list[list[Event]]:
    """Split a file's events into attempts: a resumed turn appends a new ``turn`` event."""
    out: list[list[Event]] = []
    for event in events:
        if event.get("event") == "turn" or not out:
            out.append([])
        out[-1].append(event)
    return out


@dataclass(frozen=True, slots=True)
class TurnSummary:
    turn_id: str
    session_key: str
    kind: str
    finished_at: float  # the file's modification time
    seconds: float
    failed: bool
    llm_calls: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    decisions: list[dict[str, str]] = field(default_factory=list)
    estimated: bool = False  # tokens counted by us: the server reported none

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "session_key": self.session_key,
            "kind": self.kind,
            "finished_at": self.finished_at,
            "seconds": self.seconds,
            "outcome": "failed" if self.failed else "done",
            "llm_calls": self.llm_calls,
            "tool_calls": self.tool_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "estimated": self.estimated,
            "decisions": self.decisions,
        }


def summarize(turn_id: str, events: list[Event], finished_at: float) -> TurnSummary:
    """One turn as the Health page lists it: its outcome is its last attempt's; its calls,
    tokens, decisions and time are all its attempts' (a turn that waited for an approval,
    or resumed after a crash, made calls in each)."""
    attempts = segments(events)
    last = attempts[-1] if attempts else []
    start = next((e for e in last if e.get("event") == "turn"), {})
    llm = [e for e in events if e.get("event") == "llm"]
    decisions = [
        {
            "guard": str(e.get("guard", "")),
            "code": str(e.get("code", "")),
            "reason": str(e.get("reason", "")),
        }
        for e in events
        if e.get("event") == "guard"
    ]
    failed = any(e.get("event") in FAILURE_EVENTS for e in last) or any(
        str(e.get("code", "")) in FAILURE_CODES for e in last if e.get("event") == "guard"
    )
    return TurnSummary(
        turn_id=turn_id,
        session_key=str(start.get("session_key", "")),
        kind=str(start.get("kind", "")),
        finished_at=finished_at,
        seconds=sum(
            max((float(e.get("t", 0) or 0) for e in attempt), default=0.0) for attempt in attempts
        ),
        failed=failed,
        llm_calls=len(llm),
        tool_calls=sum(1 for e in events if e.get("event") == "tool"),
        input_tokens=sum(int(e.get("input_tokens", 0) or 0) for e in llm),
        output_tokens=sum(int(e.get("output_tokens", 0) or 0) for e in llm),
        decisions=decisions,
        estimated=any(e.get("estimated") for e in llm),
    )


def recent_turns(directory: Path, limit: int = 20) -> list[TurnSummary]:
    """The newest ``limit`` turns of the last week, newest first."""
    files: list[tuple[float, Path]] = []
    for day in sorted(day_dirs(directory), reverse=True)[:RECENT_DAYS]:
        for path in day.glob("*.jsonl"):
            try:
                files.append((path.stat().st_mtime, path))
            except OSError:
                continue
    files.sort(reverse=True)
    summaries = []
    for mtime, path in files[:limit]:
        try:
            summaries.append(summarize(path.stem, read_events(path), mtime))
        except OSError:
            continue
    return summaries


def usage_from_traces(directory: Path, days: int = 30) -> list[TurnSummary]:
    """Every turn of the last ``days`` days (token totals when the usage table is empty)."""
    out = []
    for day in sorted(day_dirs(directory), reverse=True)[:days]:
        for path in day.glob("*.jsonl"):
            try:
                out.append(summarize(path.stem, read_events(path), path.stat().st_mtime))
            except OSError:
                continue
    return out
