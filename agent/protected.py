"""Workspace files that carry more weight than the turn that would write them.

Most of the workspace is data. A few files are not:

- ``HEARTBEAT.md``: its tasks run at every heartbeat as the owner, untainted, its text
  counting as the owner's own words;
- ``USER.md`` and the persona files (``AGENTS.md``, ``SOUL.md``, ``IDENTITY.md``,
  ``TOOLS.md``): part of every chat's system prompt, the owner's chats included;
- ``skills/``: listed in every chat's prompt and followed as instructions.

A turn that could write one of them could act later with more rights than it has: an
admin's turn would become the owner's, a web page read in a tainted turn would become a
standing, untainted job. So the rule, in one place:

- the persona files and skills are never written by the assistant (the owner edits them);
- ``HEARTBEAT.md`` and ``USER.md`` are written only in the owner's own untainted turn (the
  owner's direct chat, the terminal or the local web chat, before anything from outside
  was read), so "add 'check my inbox' to my heartbeat" still works;
- everyone else (admins, members, groups) and every tainted turn is refused.

:class:`agent.workspace.Workspace` enforces it on every file-tool write (the target's real
path, after symlinks), and the ``exec`` sandbox binds these files read-only for every turn
that may not change them.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.messages import ChatType
from gateway.core.principal import Principal


@dataclass(frozen=True, slots=True)
class Protected:
    """One protected path, relative to the workspace; a directory covers what is below it."""

    path: str
    reason: str  # why it matters; shown to the model when a write is refused
    owner_may_change: bool  # the owner's own untainted turns may write it
    directory: bool = False


PERSONA_FILES = ("AGENTS.md", "SOUL.md", "IDENTITY.md", "TOOLS.md")

PROTECTED: tuple[Protected, ...] = (
    *(
        Protected(name, "it is part of the assistant's persona, in every chat's prompt", False)
        for name in PERSONA_FILES
    ),
    Protected("skills", "installed skills are followed as instructions in every chat", False, True),
    Protected("HEARTBEAT.md", "its tasks run with the owner's rights at every heartbeat", True),
    Protected("USER.md", "it is part of every chat's system prompt", True),
)


def may_change_owner_files(principal: Principal, *, tainted: bool) -> bool:
    """Whether a turn may write ``HEARTBEAT.md`` and ``USER.md``: the owner's own direct
    chat, before the turn read anything from outside."""
    return principal.is_owner and principal.chat_type is ChatType.DM and not tainted


def refusal(protected: Protected, shown: str) -> str:
    """What the model is told when a write to a protected file is refused."""
    if not protected.owner_may_change:
        return f"{shown!r} is read-only: the owner edits it, not the assistant ({protected.reason})"
    return (
        f"{shown!r} is protected: {protected.reason}. Only the owner can change it, in their "
        "own chat, in a turn that has not read outside content (a web page, an email, a "
        "file someone sent, a message they forwarded or quoted, command output). Tell the "
        "user what you would change and let them ask for it in a new message."
    )
