"""Browser profiles: the cookies and site storage a ``browser`` session keeps between runs.

A profile is one file under the data directory, ``browser/<agent>/agent.json`` for the
agent's own session (the owner's and admins' turns) and ``browser/<agent>/people/<person>.json``
for a member's, holding what Playwright saves of a context (cookies, local storage). It is
made and deleted by the owner only (``switchboard browser create|delete``): a session
without one keeps its cookies while it is open and forgets them when it closes; a session
with one loads it when it opens and writes it after every step, so a site signed in to once
stays signed in, across restarts. The files hold sign-in cookies: mode 0600 in 0700
directories, in the data directory that the file tools and commands never reach.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

SHARED = "agent.json"
PEOPLE = "people"
_AGENT = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


class ProfileError(Exception):
    """A profile that cannot be made, read or deleted; the message says which and why."""


@dataclass(frozen=True, slots=True)
class ProfileInfo:
    agent: str
    person: str | None  # None: the agent's own profile (owner and admins)
    path: Path
    sites: tuple[str, ...]  # the domains it holds cookies for
    size: int


class Profiles:
    def __init__(self, root: Path) -> None:
        self.root = root  # <data>/browser

    def path(self, agent: str, person: str | None = None) -> Path:
        if not _AGENT.fullmatch(agent):
            raise ProfileError(f"{agent!r} is not an agent's name")
        base = self.root / agent
        return base / SHARED if person is None else base / PEOPLE / f"{quote(person, safe='')}.json"

    def exists(self, path: Path) -> bool:
        return path.is_file()

    def create(self, agent: str, person: str | None = None) -> Path:
        """An empty profile (nothing signed in yet); ProfileError if it exists."""
        path = self.path(agent, person)
        if path.exists():
            raise ProfileError(f"the profile {path} exists already")
        self.save(path, {"cookies": [], "origins": []}, create=True)
        return path

    def delete(self, agent: str, person: str | None = None) -> Path:
        """Remove a profile: every site it was signed in to is forgotten."""
        path = self.path(agent, person)
        try:
            path.unlink()
        except FileNotFoundError:
            raise ProfileError(f"there is no profile {path}") from None
        return path

    def listing(self) -> list[ProfileInfo]:
        found = []
        for path in sorted(self.root.glob(f"*/{SHARED}")) + sorted(
            self.root.glob(f"*/{PEOPLE}/*.json")
        ):
            shared = path.name == SHARED
            agent = path.parent.name if shared else path.parent.parent.name
            person = None if shared else unquote(path.stem)
            state = self.load(path) or {}
            sites = sorted(
                {str(c.get("domain", "")).lstrip(".") for c in state.get("cookies", ())} - {""}
            )
            found.append(ProfileInfo(agent, person, path, tuple(sites), path.stat().st_size))
        return found

    def load(self, path: Path) -> dict[str, Any] | None:
        """The saved state, or None when there is no profile (or it cannot be read)."""
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return state if isinstance(state, dict) else None

    def save(self, path: Path, state: dict[str, Any], *, create: bool = False) -> bool:
        """Write ``state`` whole (never half a file); only into a profile that still exists,
        unless ``create``. False when there was none to write into (the owner deleted it)."""
        if not create and not path.is_file():
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        directory = path.parent
        while directory != self.root.parent:  # browser/, the agent's, people/: 0700
            directory.chmod(0o700)
            directory = directory.parent
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=".profile-", suffix=".json")
        temp = Path(name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:  # mkstemp: mode 0600
                json.dump(state, out)
            temp.replace(path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        return True
