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
        # a block reopens with its language, unless that would crowd out what it holds
        prefix = f"{fence if length(fence) * 3 <= limit else FENCE}\n" if fence else ""
        if length(prefix + remaining) <= limit:
            chunks.append(prefix + remaining)
            break
        budget = limit - length(prefix) - length(_CLOSE)
        cut = _keep_code_whole(remaining, _cut_point(remaining, budget, length))
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


def _keep_code_whole(text: str, cut: int) -> int:
    """Move ``cut`` back so it splits no run of backticks; and when the first part would end
    with a ``` opened inside a line (``see ```this```: Discord and Slack render it as code),
    to the start of that line (on the first line, to the backticks), so the span goes whole
    to the next part."""
    moved = _before_backticks(text, cut)
    piece = text[:moved]
    last = piece.rfind(FENCE)
    tag = piece[last + len(FENCE) :] if last != -1 else ""
    if tag.isalnum() and moved < len(text) and text[moved].isalnum():  # ```pyt|hon
        moved = _before_backticks(text, last) if last > 0 else cut  # a language stays whole
        piece = text[:moved]
        last = piece.rfind(FENCE)
    if last != -1 and piece.count(FENCE) % 2:
        line_start = piece.rfind("\n", 0, last) + 1
        if piece[line_start:last].strip():  # on the first line: cut before the backticks
            moved = line_start or last
    return moved if moved > 0 else cut  # a first part of nothing would never end


def _before_backticks(text: str, cut: int) -> int:
    while 0 < cut < len(text) and text[cut - 1] == "`" and text[cut] == "`":
        cut -= 1
    return cut


def _is_fence_line(line: str) -> bool:
    """A code fence: three or more backticks and an optional language (CommonMark: with no
    backticks in it)."""
    stripped = line.strip()
    ticks = len(stripped) - len(stripped.lstrip("`"))
    return ticks >= len(FENCE) and "`" not in stripped[ticks:]


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
    """Which code block (if any) is open after ``piece``, given the one open before it.
    Every ``` toggles, as on Discord and Slack, so each part holds its fences in pairs once
    the splitter closes and reopens the block at the cut."""
    if piece.count(FENCE) % 2 == 0:
        return fence
    if fence:
        return None
    last = piece.rfind(FENCE)
    line_end = piece.find("\n", last)
    if line_end == -1:  # cut short: its language may go on in the next part
        return FENCE
    line = piece[piece.rfind("\n", 0, last) + 1 : line_end]
    return _opener(line.strip()) if _is_fence_line(line) else FENCE


def _opener(line: str) -> str:
    """The fence to reopen a block with: the backticks and its language, if it names one
    (a code line written on the fence's own line stays in the first part only)."""
    language = line[len(FENCE) :].split(maxsplit=1)
    tag = language[0] if language else ""
    return (
        FENCE + tag if len(tag) <= 20 and tag.replace("-", "").replace("+", "").isalnum() else FENCE
    )
