"""HTML-only mail as plain text, for the model, with its quotes marked as in plain text.

A ``<blockquote>`` becomes ``> `` lines, so :func:`channels.email.parse.trim_reply` reads
both alike: a quote with an answer below it keeps the lines the answer needs, a quote
nobody answered goes. Mail clients also mark the quoted original (Gmail's ``gmail_quote``,
Yahoo's ``yahoo_quoted``, Thunderbird's ``moz-cite-prefix``, Outlook's ``divRplyFwdMsg``):
such a container is dropped unless it holds a forwarded mail (its first line a "Forwarded
message" marker) or answers written between its quotes. Outlook's block is a reply's
quoted original, or, in a forward (``forward``), the forwarded mail: it then starts at a
"Forwarded message" marker. Scripts, styles and the head are never text.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

# the line a client writes over a forwarded mail (Gmail; Apple Mail; Thunderbird, Yahoo)
FORWARDED = re.compile(
    r"^\s*(-{2,}\s*Forwarded message\s*-{2,}|Begin forwarded message:|-{2,}\s*Forwarded Message\s*-{2,})\s*$",
    re.IGNORECASE,
)
FORWARD_MARK = "---------- Forwarded message ---------"

_SKIP = frozenset({"script", "style", "head", "title"})
_QUOTE_CLASSES = ("gmail_quote", "yahoo_quoted", "moz-cite-prefix")
_OUTLOOK_IDS = ("divRplyFwdMsg", "appendonsend")
_BLOCK = frozenset(
    {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "table", "hr"}
)
_VOID = frozenset({"br", "hr", "img", "meta", "link", "input", "col", "area", "base", "wbr"})
_ENTER, _LEAVE = "\ue000", "\ue001"  # a blockquote starts, ends: each a line of its own


class _TextExtractor(HTMLParser):
    def __init__(self, *, forward: bool) -> None:
        super().__init__(convert_charrefs=True)
        self._forward = forward
        self._texts: list[list[str]] = [[]]  # the text; each open quote container's on top
        self._stack: list[tuple[str, str]] = []  # (tag, what it opened: "", pre, skip, quote, box)
        self._skipping = 0
        self._cut = False  # everything after Outlook's reply header is the quoted original
        self._marked = False  # Outlook's header block in a forward: the marker is written
        self._pre = 0  # inside <pre>, where a line break in the source is one

    @property
    def text(self) -> str:
        return "".join(self._texts[0])

    def _emit(self, text: str) -> None:
        if not self._skipping and not self._cut:
            self._texts[-1].append(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        classes = (values.get("class") or "").split()
        if (values.get("id") or "") in _OUTLOOK_IDS:
            if not self._forward:
                self._cut = True
            elif not self._marked:
                self._marked = True
                self._emit(f"\n{FORWARD_MARK}\n")
        if tag in _BLOCK:
            self._emit("\n")
        if tag in _VOID:
            return
        opened = ""
        if tag == "pre":
            opened = "pre"
            self._pre += 1
        elif tag in _SKIP:
            opened = "skip"
            self._skipping += 1
        elif tag == "blockquote":  # Gmail's carries "gmail_quote" too
            opened = "quote"
            self._emit(f"\n{_ENTER}\n")
        elif any(c in _QUOTE_CLASSES for c in classes):
            opened = "box"
            self._texts.append([])
        self._stack.append((tag, opened))

    def handle_endtag(self, tag: str) -> None:
        # Pop up to the matching tag; tolerate the unclosed tags real mail is full of.
        for position in range(len(self._stack) - 1, -1, -1):
            if self._stack[position][0] == tag:
                self._close(len(self._stack) - position)
                break
        if tag in _BLOCK:
            self._emit("\n")

    def _close(self, count: int) -> None:
        for _ in range(count):
            _, opened = self._stack.pop()
            if opened == "pre":
                self._pre -= 1
            elif opened == "skip":
                self._skipping -= 1
            elif opened == "quote":
                self._emit(f"\n{_LEAVE}\n")
            elif opened == "box":
                box = "".join(self._texts.pop())
                if _kept(box):
                    self._texts[-1].append(box)

    def handle_data(self, data: str) -> None:
        data = data.replace(_ENTER, "").replace(_LEAVE, "")
        self._emit(data if self._pre else data.replace("\n", " "))  # a line break is a space

    def close(self) -> None:
        super().close()
        self._close(len(self._stack))  # what the mail left open ends with it


def _lines(text: str) -> list[tuple[int, str]]:
    """(how deep in quotes, the line with its spaces collapsed) for each line."""
    lines: list[tuple[int, str]] = []
    depth = 0
    for line in text.split("\n"):
        if line == _ENTER:
            depth += 1
        elif line == _LEAVE:
            depth = max(0, depth - 1)
        else:
            lines.append((depth, " ".join(line.split())))
    return lines


def _kept(box: str) -> bool:
    """Whether a quote container is more than quoted history: a forwarded mail, or answers
    written below its quotes (an inline reply)."""
    lines = [(depth, line) for depth, line in _lines(box) if line]
    if lines and FORWARDED.match(lines[0][1]):
        return True
    quoted = False
    for depth, _ in lines:
        if depth:
            quoted = True
        elif quoted:
            return True
    return False


def html_to_text(html: str, *, forward: bool = False) -> str:
    parser = _TextExtractor(forward=forward)
    parser.feed(html)
    parser.close()
    lines = [
        ("> " * depth + line) if depth and line else line for depth, line in _lines(parser.text)
    ]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
