"""Markdown from the model → WhatsApp's own formatting, in messages of at most 4,096 characters.

WhatsApp knows ``*bold*``, ``_italic_``, ``~strike~``, ```` ```monospace``` ````, inline
`` `code` ``, ``> `` quotes and ``- `` / ``1. `` lists, and nothing else: no headings, no
links with a label, no tables. The answer is read as every channel reads it
(:mod:`channels._markdown`: ``**`` inside code, raw HTML such as ``Vec<String>``, ``2*3*4``
and ``__init__`` stay as written; no images) and each construct is written the WhatsApp
way: headings become bold lines, ``[label](url)`` becomes ``label (url)``, a task item
shows its box (☐, ☑) instead of the ``- ``, a table becomes one line per row.

Splitting happens on the markdown first (:func:`channels._text.split_message`, which keeps
code fences balanced per part), then each part is converted, so a retry yields the same
parts. A converted part can only get shorter (markers shrink: ``**`` → ``*``) except for
labelled links; one still over the limit is cut again as plain text.
"""

from __future__ import annotations

from markdown_it.token import Token

from channels._markdown import markdown
from channels._text import split_message

MAX_MESSAGE = 4096  # characters of a text message's body
_INLINE = {"strong": "*", "em": "_", "s": "~"}
_MD = markdown()


def render(markdown: str, *, limit: int = MAX_MESSAGE) -> list[str]:
    """The WhatsApp messages that carry ``markdown``; deterministic."""
    parts: list[str] = []
    for chunk in split_message(markdown, limit):
        try:
            text = to_whatsapp(chunk)
        except Exception:  # a converter bug must not cost the user the answer
            text = chunk
        if not text.strip():
            text = chunk
        parts.extend(split_message(text, limit) if len(text) > limit else [text])
    return parts


def to_whatsapp(markdown: str) -> str:
    lines: list[str] = []
    _blocks(_MD.parse(markdown), lines)
    return "\n".join(lines).strip("\n")


def _blocks(tokens: list[Token], out: list[str]) -> None:
    writer = _Writer(tokens, out)
    for token in tokens:
        writer.handle(token)


class _Writer:
    """Walks markdown-it's block tokens, writing WhatsApp lines into ``out``."""

    def __init__(self, tokens: list[Token], out: list[str]) -> None:
        self.tokens = tokens
        self.out = out
        self.lists: list[list[int]] = []  # per open list: [next number] (0 for bullets)
        self.quote = 0
        self.row: list[str] = []
        self.item = ""  # the marker of a list item whose text comes next

    @property
    def prefix(self) -> str:
        return "> " * self.quote

    def handle(self, token: Token) -> None:
        kind = token.type
        if kind in ("bullet_list_open", "ordered_list_open"):
            ordered = kind == "ordered_list_open"
            self.lists.append([int(token.attrGet("start") or 1) if ordered else 0])
        elif kind in ("bullet_list_close", "ordered_list_close"):
            self.lists.pop()
            if not self.lists:
                self.out.append("")
        elif kind == "list_item_open":
            self._item(token)
        elif kind in ("blockquote_open", "blockquote_close"):
            self._quote(opening=kind == "blockquote_open")
        elif kind == "inline":
            self._inline(token)
        elif kind in ("paragraph_close", "heading_close") and not self.lists:
            self.out.append(self.prefix.rstrip())
        elif kind in ("fence", "code_block"):
            body = token.content.rstrip("\n").split("\n")
            self.out.extend(self.prefix + line for line in ["```", *body, "```"])
            self.out.append("")
        elif kind == "tr_close":
            self.out.append(self.prefix + " | ".join(self.row))
            self.row = []
        elif kind == "table_close":
            self.out.append("")
        elif kind == "hr":
            self.out.extend([self.prefix + "———", ""])

    def _item(self, token: Token) -> None:
        indent = "  " * (len(self.lists) - 1)
        number = self.lists[-1][0]
        if number:
            self.item = f"{indent}{number}. "
            self.lists[-1][0] += 1
        else:  # a task item's box (☐, ☑) begins its text: no "- "
            self.item = indent if token.meta.get("task") else f"{indent}- "

    def _quote(self, *, opening: bool) -> None:
        if opening:
            self.quote += 1
            return
        self.quote -= 1
        if self.out and self.out[-1].strip(" >") == "":
            self.out[-1] = self.prefix

    def _inline(self, token: Token) -> None:
        text = _inline(token.children or [])
        parent = _parent(self.tokens, token)
        if parent == "heading_open" and text.strip():
            text = f"*{text}*"
        if parent in ("th_open", "td_open"):
            self.row.append(text)
            return
        if self.item:
            text, self.item = self.item + text, ""
        self.out.extend(self.prefix + line for line in text.split("\n"))


def _parent(tokens: list[Token], inline: Token) -> str:
    index = tokens.index(inline)
    return tokens[index - 1].type if index else ""


def _inline(children: list[Token]) -> str:
    text: list[str] = []
    link: list[str | None] = []
    for child in children:
        kind = child.type
        if kind == "text":
            text.append(child.content)
        elif kind == "code_inline":
            text.append(f"`{child.content}`")
        elif kind.endswith("_open") and kind[:-5] in _INLINE:
            text.append(_INLINE[kind[:-5]])
        elif kind.endswith("_close") and kind[:-6] in _INLINE:
            text.append(_INLINE[kind[:-6]])
        elif kind == "link_open":
            link.append(child.attrGet("href"))  # type: ignore[arg-type]
            text.append("\0")  # where the label starts
        elif kind == "link_close":
            href = link.pop() or ""
            start = len(text) - 1 - text[::-1].index("\0")
            label = "".join(text[start + 1 :])
            del text[start:]
            text.append(
                label if label in (href, f"mailto:{label}") or not href else f"{label} ({href})"
            )
        elif kind in {"softbreak", "hardbreak"}:
            text.append("\n")
    return "".join(text)
