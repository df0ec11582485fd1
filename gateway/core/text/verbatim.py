"""Text shown exactly as it is, whatever the chat's markdown would make of it.

An approval prompt shows arguments a member (or a prompt-injected model) wrote. Rendered as
markdown, a value could close the code block it sits in and format the rest of the prompt
("**Why it needs approval: harmless**", a spoiler over the real command). So:

* :func:`visible` spells out characters that change how text *looks* without being seen:
  bidirectional overrides and isolates, zero-width characters, other format and control
  characters (``<U+202E>``); newlines and tabs stay.
* :func:`fenced` puts text in a code block no value can close: a fence closes only on a run
  of three backticks (CommonMark, Discord, Slack alike), and a zero-width space goes between
  any two backticks of the text, so none is left. The space is ours, added after
  :func:`visible`, and only there; a value's own zero-width spaces show as ``<U+200B>``.
* Telegram does better with :attr:`gateway.core.messages.OutboundMessage.verbatim`: the
  text goes into one ``pre`` entity by offsets, never through markdown.
"""

from __future__ import annotations

import unicodedata

KEEP = frozenset("\n\t")
BACKTICK_GAP = "\u200b"
# Seen as spacing or joiners, but they move or hide what follows.
ALSO_HIDDEN = frozenset("\u2028\u2029\u3164\u115f\u1160\u034f")


def hidden(char: str) -> bool:
    if char in KEEP:
        return False
    return char in ALSO_HIDDEN or unicodedata.category(char) in ("Cf", "Cc", "Co", "Cs", "Zl", "Zp")


def visible(text: str) -> str:
    """``text`` with every invisible or reordering character spelled out (``<U+202E>``)."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(f"<U+{ord(c):04X}>" if hidden(c) else c for c in text)


def unclosable(text: str) -> str:
    """``text`` with a zero-width space between any two backticks: no fence can end in it."""
    return text.replace("``", f"`{BACKTICK_GAP}`").replace("``", f"`{BACKTICK_GAP}`")


def fenced(text: str) -> str:
    """A markdown code block showing ``text`` (already :func:`visible`) and nothing else."""
    return f"```\n{unclosable(text)}\n```"
