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
        cut = _keep_code_whole(remaining, _cut_point(remaining, budget, length), fence)
        piece, remaining = remaining[:cut], remaining[cut:]
        fence_after = _fence_state(piece, fence, ends_line=remaining.startswith("\n"))
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


def _keep_code_whole(text: str, cut: int, fence: str | None) -> int:
    """Move ``cut`` back so it splits no run of backticks, and leaves no ``` written inside
    a line (``see ```this```: Discord and Slack render it as code) open in the first part:
    the cut moves to the start of that line (or, on the first line, to the backticks). Fence lines are the splitter's own business
    (closed and reopened at the cut); inside a code block, backticks are just code."""
    moved = _before_backticks(text, cut)
    inline = _inline_fences(text, moved, fence)
    if len(inline) % 2:
        line_start = text.rfind("\n", 0, inline[-1]) + 1
        moved = _before_backticks(text, line_start or inline[-1])
    return moved if moved > 0 else cut  # a first part of nothing would never end


def _before_backticks(text: str, cut: int) -> int:
    while 0 < cut < len(text) and text[cut - 1] == "`" and text[cut] == "`":
        cut -= 1
    return cut


def _inline_fences(text: str, end: int, fence: str | None) -> list[int]:
    """Where, in ``text[:end]``, ``` is written inside a line outside a code block."""
    found, line_start = [], 0
    for line in text[:end].split("\n"):  # the last line may be cut short
        if _is_fence_line(line) and line_start + len(line) < end:  # a whole fence line
            fence = None if fence else line
        elif fence is None:
            at = line.find(FENCE)
            while at != -1:
                found.append(line_start + at)
                at = line.find(FENCE, at + len(FENCE))
        line_start += len(line) + 1
    return found


def _is_fence_line(line: str) -> bool:
    """A code fence: a line of ``` and an optional language (CommonMark: no backticks in it)."""
    stripped = line.strip()
    return stripped.startswith(FENCE) and FENCE not in stripped[len(FENCE) :]


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


def _fence_state(piece: str, fence: str | None, *, ends_line: bool) -> str | None:
    """Which code block (if any) is open after ``piece``, given the one open before it. A
    last line cut short (``ends_line`` false) is no fence: the rest of it follows."""
    lines = piece.split("\n")
    for line in lines if ends_line else lines[:-1]:
        if _is_fence_line(line):
            fence = None if fence else _opener(line.strip())
    return fence


def _opener(line: str) -> str:
    """The fence to reopen a block with: the backticks and its language, if it names one
    (a code line written on the fence's own line stays in the first part only)."""
    language = line[len(FENCE) :].split(maxsplit=1)
    tag = language[0] if language else ""
    return (
        FENCE + tag if len(tag) <= 20 and tag.replace("-", "").replace("+", "").isalnum() else FENCE
    )
