"""Skills the assistant drafts: saved under ``skills/.proposed/``, used only once approved.

After a turn that worked out a procedure, the assistant may propose it as a skill
(``skill_propose``). The draft is ``skills/.proposed/<name>/SKILL.md`` with a note of who
asked and when beside it (``skills/.proposed/<name>.json``). The library never lists or
loads a folder whose name starts with a dot, the file tools and the sandbox cannot write
under ``skills/`` at all, so the only way a draft becomes a skill is the owner's: ``/skills
approve NAME`` in the chat (or ``edit`` it, or ``drop`` it). Approving pins its files in the
lock file like an install, and from then on it is held to what it declares.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from agent.skills.library import SKILL_NAME, FrontMatterError, SkillLibrary, read_skill
from agent.skills.lock import LockEntry, now
from agent.skills.permissions import DeclarationError
from agent.skills.review import Review, ReviewError, inspect, pin
from agent.skills.unpack import SKILL_FILE
from gateway.core.system.fileutil import write_atomic

PROPOSED = ".proposed"
MAX_PENDING = 20
MAX_CHARS = 20_000


class ProposalError(Exception):
    """The proposal cannot be saved, changed or approved; the message says why."""


@dataclass(frozen=True, slots=True)
class Proposal:
    name: str
    folder: Path
    by: str  # the person whose turn proposed it (their key: an address)
    session: str
    at: str
    by_owner: bool = False  # that person is the owner
    by_name: str = ""  # their display name, as their channel gave it

    @property
    def path(self) -> Path:
        return self.folder / SKILL_FILE

    def for_whom(self, *, reader: str = "", reader_is_owner: bool = True) -> str:
        """Whom the assistant proposed it for, as ``reader`` (a person's key) reads it:
        "you", "the owner", or the person's name (their address when it is not known)."""
        if self.by == reader or (self.by_owner and reader_is_owner):
            return "you"
        return "the owner" if self.by_owner else (self.by_name or self.by)

    def when(self) -> str:
        """``at`` as a person reads it (``2026-12-07 23:44 UTC``)."""
        day, _, time = self.at.partition("T")
        return f"{day} {time[:5]} UTC" if time else self.at


class Proposals:
    def __init__(self, library: SkillLibrary) -> None:
        self.library = library
        self.directory = library.directory / PROPOSED

    def propose(
        self,
        name: str,
        text: str,
        *,
        by: str,
        session: str,
        by_owner: bool = False,
        by_name: str = "",
    ) -> Proposal:
        if not SKILL_NAME.match(name):
            raise ProposalError(
                f"{name!r} cannot be a skill's name: lower-case letters, digits, ., - and _"
            )
        if (self.library.directory / name).exists() or self.library.lock.get(name):
            raise ProposalError(f"a skill named {name} is already installed; pick another name")
        if self.get(name) is not None:
            raise ProposalError(f"a proposal named {name} already waits for the owner")
        if len(self.pending()) >= MAX_PENDING:
            raise ProposalError(
                f"{MAX_PENDING} proposals already wait for the owner; they decide on those first"
            )
        folder = self.directory / name
        self._write(folder, text)
        by_name = " ".join(by_name.split())[:80]
        proposal = Proposal(name, folder, by, session, now(), by_owner, by_name)
        meta = {
            "by": by,
            "session": session,
            "at": proposal.at,
            "by_owner": by_owner,
            "by_name": by_name,
        }
        write_atomic(self.directory / f"{name}.json", json.dumps(meta) + "\n")
        return proposal

    def pending(self) -> list[Proposal]:
        if not self.directory.is_dir():
            return []
        found = [self.get(p.name) for p in sorted(self.directory.iterdir()) if p.is_dir()]
        return [p for p in found if p is not None]

    def get(self, name: str) -> Proposal | None:
        folder = self.directory / name
        if not SKILL_NAME.match(name) or folder.is_symlink() or not (folder / SKILL_FILE).is_file():
            return None
        try:
            meta = json.loads((self.directory / f"{name}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        return Proposal(
            name,
            folder,
            str(meta.get("by", "?")),
            str(meta.get("session", "")),
            str(meta.get("at", "")),
            meta.get("by_owner") is True,
            str(meta.get("by_name", "")),
        )

    def text(self, proposal: Proposal) -> str:
        return proposal.path.read_text(encoding="utf-8", errors="replace")

    def edit(self, name: str, text: str) -> Proposal:
        """The owner's own wording replaces the draft (checked like a new one)."""
        proposal = self._existing(name)
        self._write(proposal.folder, text)
        return proposal

    def drop(self, name: str) -> None:
        proposal = self._existing(name)
        shutil.rmtree(proposal.folder, ignore_errors=True)
        (self.directory / f"{name}.json").unlink(missing_ok=True)

    def review(self, name: str) -> Review:
        proposal = self._existing(name)
        try:
            return inspect(proposal.folder, name, mcp_servers=self.library.mcp_servers)
        except ReviewError as exc:
            raise ProposalError(str(exc)) from None

    def approve(self, name: str) -> LockEntry:
        """Make the draft a skill: pinned first, then moved into ``skills/<name>``."""
        proposal = self._existing(name)
        final = self.library.directory / name
        if final.exists() or self.library.lock.get(name) is not None:
            raise ProposalError(f"a skill named {name} is already installed; drop this proposal")
        review = self.review(name)
        entry = LockEntry(
            name=name,
            kind="proposal",
            source=f"proposed by the assistant for {proposal.for_whom()}, {proposal.when()}",
        )
        pinned = pin(self.library.lock, review, entry)
        try:
            proposal.folder.rename(final)
        except OSError as exc:
            self.library.lock.drop(name)
            raise ProposalError(f"{name} could not be moved into place: {exc}") from None
        (self.directory / f"{name}.json").unlink(missing_ok=True)
        return pinned

    def _existing(self, name: str) -> Proposal:
        proposal = self.get(name)
        if proposal is None:
            waiting = ", ".join(p.name for p in self.pending()) or "none"
            raise ProposalError(f"no proposal named {name!r} (waiting: {waiting})")
        return proposal

    def _write(self, folder: Path, text: str) -> None:
        if len(text) > MAX_CHARS:
            raise ProposalError(f"a skill is at most {MAX_CHARS} characters")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / SKILL_FILE
        previous = path.read_text(encoding="utf-8") if path.exists() else None
        write_atomic(path, text)
        try:  # the same checks as any skill: readable front matter, sane permissions
            read_skill(path, pinned=True)
        except (FrontMatterError, DeclarationError) as exc:
            if previous is None:
                shutil.rmtree(folder, ignore_errors=True)
            else:
                write_atomic(path, previous)
            raise ProposalError(f"the skill cannot be read: {exc}") from None
