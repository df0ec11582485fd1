"""Small text predicates shared by the agent and the gateway."""

from __future__ import annotations


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


def only_headings(text: str) -> bool:
    """True for a template with nothing written into it yet (headings, comments, blanks)."""
    return not written_lines(text)
