"""Small text predicates shared by the agent and the gateway."""

from __future__ import annotations

import unicodedata

# Characters a name may hold that change how the text around it is shown: controls
# (escape sequences, carriage return, newline), bidirectional overrides and isolates,
# line and paragraph separators; zero width joiners stay (emoji are made with them).
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})
_KEPT = frozenset({"\u200d"})
NAME_CHARS = 64


def written_lines(text: str) -> list[str]:
    """The lines of a Markdown note that say something (stripped): not headings, comments
    or blanks."""
    written = []
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
            written.append(line)
    return written


def without_comments(text: str) -> str:
    """A Markdown note without its HTML comments (a template's examples and hints, which
    the model would read as facts: "Name: Alex"), and without the blank lines they leave."""
    kept: list[str] = []
    in_comment = False
    for raw in text.splitlines():
        line = raw
        if in_comment:
            if "-->" not in line:
                continue
            line, in_comment = line.split("-->", 1)[1], False
        while "<!--" in line:
            head, _, rest = line.partition("<!--")
            if "-->" in rest:
                line = head + rest.split("-->", 1)[1]
            else:
                line, in_comment = head, True
        if line.strip() or (kept and kept[-1].strip()):
            kept.append(line.rstrip() if not line.strip() else line)
    return "\n".join(kept).strip()


def only_headings(text: str) -> bool:
    """True for a template with nothing written into it yet (headings, comments, blanks)."""
    return not written_lines(text)


def shown_name(name: str, limit: int = NAME_CHARS) -> str:
    """A name someone chose (a platform's display name, an email's From) as one line that
    shows what it is, for a terminal or a list: each control, format or separator
    character written as its escape (``\\x1b``, ``\\u202e``, ``\\n``), so a name can
    neither clear or recolour the screen, nor draw a line of its own (a fake "approved as
    owner"), nor reverse the text after it; cut at ``limit`` characters."""
    shown = "".join(
        c.encode("unicode_escape").decode("ascii")
        if unicodedata.category(c) in _HIDDEN and c not in _KEPT
        else c
        for c in name
    )
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
