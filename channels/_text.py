"""Pure text helpers every chat channel needs: split long answers at platform limits.

A platform counts length its own way (Telegram counts UTF-16 code units, Discord
characters), so the length function is a parameter. Chunks break at paragraph, line, then
word boundaries; a fenced code block cut in two is closed at the end of one chunk and
reopened, with its language, at the start of the next. Nothing is dropped.
"""

from __future__ import annotations

from collections.abc import Callable

Length = Callable[[str], int]
FENCE = "```"
_CLOSE = "\n" + FENCE


def utf16_length(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units (astral characters count twice)."""
    return len(text.encode("utf-16-le")) // 2


def split_message(text: str, limit: int, *, length: Length = len) -> list[str]:
    """Split ``text`` into chunks no longer than ``limit`` (measured by ``length``)."""
    if limit < 20:
        raise ValueError("limit too small to split sensibly")
    if length(text) <= limit:
        return [text] if text else []
    chunks: list[str] = []
    remaining = text
    fence: str | None = None  # the opening line of a code block left open by the last chunk
    while remaining:
        prefix = f"{fence}\n" if fence else ""
        if length(prefix + remaining) <= limit:
            chunks.append(prefix + remaining)
            break
        budget = limit - length(prefix) - length(_CLOSE)
        cut = _cut_point(remaining, budget, length)
        piece, remaining = remaining[:cut], remaining[cut:]
        fence_after = _fence_state(piece, fence)
        body = piece.rstrip("\n") if fence_after else piece.rstrip()
        chunk = prefix + body + (_CLOSE if fence_after else "")
        if chunk.strip():
            chunks.append(chunk)
        fence = fence_after
        if not fence_after:
            remaining = remaining.lstrip("\n")
        elif remaining.startswith("\n"):
            remaining = remaining[1:]
    return chunks


def _cut_point(text: str, budget: int, length: Length) -> int:
    """The best place to cut ``text`` so the first part fits ``budget``."""
    fits = _longest_prefix(text, budget, length)
    window = text[:fits]
    for separator in ("\n\n", "\n", " "):
        index = window.rfind(separator)
        if index > fits // 3:  # a boundary, and not one that leaves a tiny chunk
            return index + len(separator)
    return max(fits, 1)


def _longest_prefix(text: str, budget: int, length: Length) -> int:
    """Largest ``n`` with ``length(text[:n]) <= budget`` (binary search)."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if length(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return low


def _fence_state(piece: str, fence: str | None) -> str | None:
    """Which code block (if any) is open after ``piece``, given the one open before it."""
    for line in piece.split("\n"):
        stripped = line.strip()
        if stripped.startswith(FENCE):
            fence = None if fence else stripped
    return fence
