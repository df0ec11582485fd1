"""Small text predicates shared by the agent and the gateway."""

from __future__ import annotations


def only_headings(text: str) -> bool:
    """True for a template with nothing written into it yet (headings, comments, blanks)."""
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
            return False
    return True
