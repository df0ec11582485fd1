"""HTML-only mail as plain text, for the model. Quoted history is dropped while converting.

Mail clients mark the quoted original in HTML (``<blockquote>``, Gmail's ``gmail_quote``,
Outlook's ``divRplyFwdMsg``), which is easier to cut here than after flattening. Scripts,
styles and the head are never text.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_SKIP = frozenset({"script", "style", "head", "title", "blockquote"})
_QUOTE_CLASSES = ("gmail_quote", "yahoo_quoted", "moz-cite-prefix")
_QUOTE_IDS = ("divRplyFwdMsg", "appendonsend")
_BLOCK = frozenset(
    {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "table", "hr"}
)
_VOID = frozenset({"br", "hr", "img", "meta", "link", "input", "col", "area", "base", "wbr"})


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self._stack: list[tuple[str, bool]] = []  # (tag, starts a skipped region)
        self._skipping = 0
        self._cut = False  # everything after Outlook's reply header is the quoted original

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        classes = (values.get("class") or "").split()
        element_id = values.get("id") or ""
        if element_id in _QUOTE_IDS:
            self._cut = True
        if tag in _BLOCK and not self._skipping:
            self.chunks.append("\n")
        if tag in _VOID:
            return
        skip = tag in _SKIP or any(c in _QUOTE_CLASSES for c in classes)
        self._stack.append((tag, skip))
        if skip:
            self._skipping += 1

    def handle_endtag(self, tag: str) -> None:
        # Pop up to the matching tag; tolerate the unclosed tags real mail is full of.
        for position in range(len(self._stack) - 1, -1, -1):
            if self._stack[position][0] == tag:
                for _, skip in self._stack[position:]:
                    if skip:
                        self._skipping -= 1
                del self._stack[position:]
                break
        if tag in _BLOCK and not self._skipping:
            self.chunks.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping and not self._cut:
            self.chunks.append(data)


def html_to_text(html: str) -> str:
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    text = "".join(parser.chunks)
    lines = [" ".join(line.split()) for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
