"""How an answer's markdown is read, the same for every channel that formats it from markdown
(the web chat and Matrix as HTML, Telegram and Signal as text with styled ranges through
:mod:`channels._styled`, WhatsApp in its own markup), so what a person sees does not depend
on where they read it. Each parses with an instance of :func:`markdown` of its own, and with
no other parser. (Slack, Discord, IRC, email and the terminal chat convert answers their own
way.)

CommonMark (markdown-it-py) with tables and ``~~strikethrough~~``, and these rules, because
a model's answer is not a document written for a markdown renderer: whatever is not markup
is shown as written, never dropped.

* **Raw HTML is text.** ``Vec<String>``, ``<your-name>``, ``a <b>tag</b>`` are shown with
  their angle brackets (no HTML block or inline HTML is recognized); ``<https://…>`` is
  still a link.
* **No images** (an image URL would make a client fetch it, a way to leak data); links only
  to http(s) and mailto (others stay as written).
* **A ``*`` between two ASCII letters or digits is text**: ``2*3*4 = 24`` keeps its
  asterisks (CommonMark would make the 3 italic and the sum read as ``234``). CommonMark
  already reads ``_`` that way (``snake_case_name``); here ``*`` follows, except between
  characters of scripts written without spaces (``这是**重要**的`` stays bold).
* **A dunder name is text**: ``__init__``, ``__name__.py`` (one word between double
  underscores) are Python names, not bold; ``__two words__`` is still bold.
* **Task lists**: a list item starting ``[ ]`` shows ☐, ``[x]`` ☑ (its ``list_item_open``
  token gets ``meta["task"]``, so a renderer can leave out the bullet).
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.rules_core.state_core import StateCore
from markdown_it.rules_inline.state_inline import Delimiter, StateInline

LINK_SCHEMES = ("http://", "https://", "mailto:")
OPEN_BOX, DONE_BOX = "☐", "☑"
_DUNDER = re.compile(r"__[A-Za-z0-9_]*?[A-Za-z0-9]__(?![A-Za-z0-9_])")
_TASK = re.compile(r"\[([ xX])\](?=\s|$)")


def markdown() -> MarkdownIt:
    """A parser with the rules above (each caller its own: render rules are per parser)."""
    md = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False})
    md.enable(["table", "strikethrough"]).disable(["image", "html_block", "html_inline"])
    md.validateLink = _link_allowed  # type: ignore[method-assign]
    md.inline.ruler.at("emphasis", _emphasis)
    md.inline.ruler.before("emphasis", "dunder", _dunder)
    md.core.ruler.push("task_boxes", _task_boxes)
    return md


def _link_allowed(url: str) -> bool:
    return url.strip().lower().startswith(LINK_SCHEMES)


def _ascii_word(char: str) -> bool:
    return char.isascii() and char.isalnum()


def _emphasis(state: StateInline, silent: bool) -> bool:
    """markdown-it's emphasis rule, except that a ``*`` run between two ASCII letters or
    digits can neither open nor close (as CommonMark has it for ``_``)."""
    start = state.pos
    marker = state.src[start]
    if silent or marker not in ("_", "*"):
        return False
    end = start
    while end < state.posMax and state.src[end] == marker:
        end += 1
    before = state.src[start - 1] if start > 0 else " "
    after = state.src[end] if end < state.posMax else " "
    inside_word = _ascii_word(before) and _ascii_word(after)
    scanned = state.scanDelims(start, marker == "*" and not inside_word)
    for _ in range(scanned.length):
        token = state.push("text", "", 0)
        token.content = marker
        state.delimiters.append(
            Delimiter(
                marker=ord(marker),
                length=scanned.length,
                token=len(state.tokens) - 1,
                end=-1,
                open=scanned.can_open,
                close=scanned.can_close,
            )
        )
    state.pos += scanned.length
    return True


def _dunder(state: StateInline, silent: bool) -> bool:
    """``__name__`` at the start of a word: text, as written."""
    start = state.pos
    if state.src[start] != "_" or (start > 0 and _word_char(state.src[start - 1])):
        return False
    match = _DUNDER.match(state.src, start, state.posMax)
    if match is None:
        return False
    if not silent:
        state.push("text", "", 0).content = match.group()
    state.pos = match.end()
    return True


def _word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _task_boxes(state: StateCore) -> None:
    """``[ ]`` / ``[x]`` at the start of a list item's text: a box, and the item marked."""
    tokens = state.tokens
    for index, token in enumerate(tokens[:-2]):
        if token.type != "list_item_open":
            continue
        inline = tokens[index + 2]  # list_item_open, paragraph_open, inline
        if tokens[index + 1].type != "paragraph_open" or inline.type != "inline":
            continue
        first = inline.children[0] if inline.children else None
        if first is None or first.type != "text":
            continue
        match = _TASK.match(first.content)
        if match is None:
            continue
        done = match.group(1) != " "
        first.content = (DONE_BOX if done else OPEN_BOX) + first.content[match.end() :]
        token.meta["task"] = "done" if done else "open"
