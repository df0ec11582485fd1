"""Long-term memory (MEMORY.md) and daily notes (memory/YYYY-MM-DD.md) in the workspace."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path


@dataclass(slots=True)
class _Cached:
    stamp: tuple[int, int]
    text: str


class FileCache:
    """Reads small text files, re-reading only when their mtime or size changed."""

    def __init__(self) -> None:
        self._entries: dict[Path, _Cached] = {}

    def read(self, path: Path, max_chars: int) -> str | None:
        try:
            info = path.stat()
        except OSError:
            self._entries.pop(path, None)
            return None
        stamp = (info.st_mtime_ns, info.st_size)
        cached = self._entries.get(path)
        if cached is not None and cached.stamp == stamp:
            return cached.text
        try:
            with path.open(encoding="utf-8", errors="replace") as handle:
                text = handle.read(max_chars + 1)
        except OSError:
            return None
        text = text.strip()
        if len(text) > max_chars:
            text = text[:max_chars] + f"\n[... {path.name} truncated at {max_chars} characters]"
        self._entries[path] = _Cached(stamp, text)
        return text


class MemoryStore:
    def __init__(
        self, root: Path, *, cache: FileCache | None = None, max_chars: int = 8_000
    ) -> None:
        self.root = root
        self._cache = cache or FileCache()
        self._max_chars = max_chars

    @property
    def long_term_path(self) -> Path:
        return self.root / "MEMORY.md"

    def daily_path(self, day: date) -> Path:
        return self.root / "memory" / f"{day.isoformat()}.md"

    def long_term(self) -> str:
        return self._cache.read(self.long_term_path, self._max_chars) or ""

    def daily(self, day: date) -> str:
        return self._cache.read(self.daily_path(day), self._max_chars // 2) or ""

    def context(self, today: date) -> str:
        """The memory block of the prompt: long-term memory, then yesterday and today."""
        parts = []
        long_term = self.long_term()
        if long_term and not only_headings(long_term):
            parts.append(f"## Long-term memory (MEMORY.md)\n{long_term}")
        for day in (today - timedelta(days=1), today):
            note = self.daily(day)
            if note:
                parts.append(f"## Notes {day.isoformat()}\n{note}")
        return "\n\n".join(parts)


def only_headings(text: str) -> bool:
    """True for a template with nothing written into it yet (headings and comments only)."""
    in_comment = False
    for raw in text.splitlines():
        line = raw.strip()
        if in_comment:
            in_comment = "-->" not in line
            continue
        if line.startswith("<!--"):
            in_comment = "-->" not in line
            continue
        if line and not line.startswith("#"):
            return False
    return True
