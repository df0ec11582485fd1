"""Page ranges as people and models write them: ``"3"``, ``"2-5"``, ``"1,3,7-9"``."""

from __future__ import annotations

import re

from agent.tools.base import ToolError

_PART = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


class RangeError(ToolError):
    """A page range that cannot be read; the message says how to write one."""


def parse_pages(spec: str, *, limit: int) -> tuple[int, ...]:
    """The 1-based page numbers ``spec`` names, in order, without repeats; at most ``limit``."""
    pages: list[int] = []
    for part in spec.split(","):
        match = _PART.match(part)
        if match is None:
            raise RangeError(f"pages {spec!r}: write page numbers like '3', '2-5' or '1,3,7-9'")
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if first < 1 or last < first:
            raise RangeError(f"pages {spec!r}: pages count from 1, ranges go upwards")
        if last - first + len(pages) >= limit:
            raise RangeError(f"pages {spec!r}: at most {limit} pages at a time")
        pages.extend(p for p in range(first, last + 1) if p not in pages)
    return tuple(pages)


def spans(pages: tuple[int, ...]) -> str:
    """``(1, 2, 3, 7)`` as ``"1-3, 7"``: how a range is shown back."""
    out: list[str] = []
    start = prev = None
    for page in [*pages, None]:
        if start is not None and (page is None or prev is None or page != prev + 1):
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if page is not None and start is None:
            start = page
        prev = page
    return ", ".join(out)
