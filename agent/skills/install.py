"""Installing, updating, removing and verifying skills in an agent's ``skills/`` folder.

An install is two steps, so the owner decides between them: :meth:`Installer.plan` fetches
the source into a staging folder inside ``skills/`` (ignored by the library: its name starts
with a dot) and reviews it (:mod:`agent.skills.review`); :meth:`Installer.commit` then pins
the files in the lock file and renames the folder into place. The lock entry is written
*before* the rename, so the library never sees the new files without it: for a moment it
sees old files with a new entry, which it leaves out as changed, never an unpinned skill.
Leaving the plan without committing removes the staging folder.
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agent.skills.downloads import DownloadError, Downloads
from agent.skills.git import GitError
from agent.skills.library import SKILL_NAME, FrontMatterError, SkillLibrary, parse_front_matter
from agent.skills.lock import LockEntry, LockError
from agent.skills.registry import Registries, RegistryError
from agent.skills.review import Review, ReviewError, inspect, pin
from agent.skills.sources import Fetched, Source, SourceError, fetch, parse_source
from agent.skills.unpack import SKILL_FILE, Limits, UnsafeArchive

FAILURES = (
    SourceError,
    DownloadError,
    GitError,
    RegistryError,
    UnsafeArchive,
    ReviewError,
    LockError,
    OSError,
)


class InstallError(Exception):
    """The skill cannot be installed, updated or removed; the message says why."""


@dataclass(frozen=True, slots=True)
class Plan:
    source: Source
    review: Review
    entry: LockEntry  # what commit pins
    staged: Path
    update: bool  # replaces the installed skill of that name

    @property
    def name(self) -> str:
        return self.review.name

    def lines(self) -> list[str]:
        entry = self.entry
        version = f" {entry.version}" if entry.version else ""
        head = f"{'Update' if self.update else 'Install'} {self.name}{version} from {entry.source}"
        lines = [head, *self.review.lines()]
        if entry.sha256:
            lines.append(f"  sha256 of the archive: {entry.sha256}")
        elif entry.kind == "git":
            lines.append(f"  commit: {entry.origin.rsplit('@', 1)[-1]}")
        return lines


State = Literal["ok", "changed", "missing", "unpinned", "broken"]


@dataclass(frozen=True, slots=True)
class Status:
    name: str
    state: State
    detail: str = ""
    entry: LockEntry | None = None


class Installer:
    def __init__(
        self,
        library: SkillLibrary,
        *,
        downloads: Downloads,
        registries: Registries,
        limits: Limits | None = None,
    ) -> None:
        self.library = library
        self.directory = library.directory
        self.lock = library.lock
        self.downloads = downloads
        self.registries = registries
        self.limits = limits or Limits()

    @asynccontextmanager
    async def plan(
        self, text: str, *, sha256: str | None = None, when: tuple[str, ...] = ()
    ) -> AsyncIterator[Plan]:
        """Fetch and review ``text`` (a SOURCE) for a new install."""
        source = _parsed(text)
        async with self._staged(source, sha256) as fetched:
            staged = fetched.folder
            name = self._name(source, staged)
            if (self.directory / name).exists() or self.lock.get(name) is not None:
                raise InstallError(
                    f"a skill named {name} is already in {self.directory} "
                    f"(update it with: switchboard skills update {name}, or remove it first)"
                )
            review = self._review(staged, name, when=when)
            entry = LockEntry(
                name=name,
                kind=source.kind,
                source=source.text,
                version=fetched.version or _version(staged),
                origin=fetched.origin,
                sha256=fetched.sha256,
                when=when,
            )
            yield Plan(source, review, entry, staged, update=False)

    @asynccontextmanager
    async def update_plan(self, name: str) -> AsyncIterator[Plan | None]:
        """Fetch ``name``'s source again; ``None`` when it has nothing new."""
        installed = self.lock.get(name)
        if installed is None:
            raise InstallError(
                f"{name} was not installed with switchboard skills (nothing to update it from)"
            )
        if installed.kind in ("proposal", "local"):
            raise InstallError(f"{name} was written here, not installed: nothing to update from")
        source = _parsed(installed.source)
        if source.kind == "registry":
            try:
                latest = await self.registries.find(source.location)
            except RegistryError as exc:
                raise InstallError(str(exc)) from None
            if latest.sha256 == installed.sha256:
                yield None
                return
        async with self._staged(source, None) as fetched:
            staged = fetched.folder
            review = self._review(staged, name, previous=installed, when=installed.when)
            if not review.changes:
                yield None
                return
            entry = LockEntry(
                name=name,
                kind=source.kind,
                source=source.text,
                version=fetched.version or _version(staged),
                origin=fetched.origin,
                sha256=fetched.sha256,
                when=installed.when,
            )
            yield Plan(source, review, entry, staged, update=True)

    def commit(self, plan: Plan) -> LockEntry:
        """Pin the plan's files, then put them in place (see the module docstring)."""
        final = self.directory / plan.name
        previous = self.lock.get(plan.name)
        pinned = pin(self.lock, plan.review, plan.entry)
        aside = self.directory / f".old-{plan.name}-{secrets.token_hex(4)}"
        try:
            if plan.update and final.exists():
                final.rename(aside)
            plan.staged.rename(final)
        except OSError as exc:
            if previous is None:
                self.lock.drop(plan.name)
            else:
                self.lock.put(previous)
            if aside.exists() and not final.exists():
                aside.rename(final)
            raise InstallError(f"{plan.name} could not be put in place: {exc}") from None
        shutil.rmtree(aside, ignore_errors=True)
        return pinned

    def remove(self, name: str) -> None:
        folder = self.directory / name
        if not SKILL_NAME.match(name) or not (folder.is_dir() or self.lock.get(name)):
            raise InstallError(f"no skill named {name} in {self.directory}")
        if folder.is_symlink():
            folder.unlink()
        else:
            shutil.rmtree(folder, ignore_errors=True)
        self.lock.drop(name)

    def statuses(self) -> list[Status]:
        """Every skill folder and lock entry, and whether its files are the approved ones."""
        entries = self.lock.entries()
        folders = (
            {
                p.name
                for p in self.directory.iterdir()
                if p.is_dir() and not p.name.startswith(".") and (p / SKILL_FILE).exists()
            }
            if self.directory.is_dir()
            else set()
        )
        names = sorted(folders | set(entries))
        statuses = []
        for name in names:
            entry = entries.get(name)
            folder = self.directory / name
            if entry is None:
                statuses.append(Status(name, "unpinned", "written by hand, not pinned"))
            elif not folder.is_dir():
                statuses.append(
                    Status(name, "missing", "in the lock file, but its folder is gone", entry)
                )
            elif changes := self.lock.changes(name, folder):
                statuses.append(Status(name, "changed", changes.describe(), entry))
            else:
                statuses.append(Status(name, "ok", "", entry))
        broken = {p.path.parent.name: p.reason for p in self.library.problems()}
        return [
            Status(s.name, "broken", broken[s.name], s.entry)
            if s.state in ("ok", "unpinned") and s.name in broken
            else s
            for s in statuses
        ]

    @asynccontextmanager
    async def _staged(self, source: Source, sha256: str | None) -> AsyncIterator[Fetched]:
        self.directory.mkdir(parents=True, exist_ok=True)
        staged = self.directory / f".staging-{secrets.token_hex(6)}"
        try:
            try:
                fetched = await fetch(
                    source,
                    staged,
                    downloads=self.downloads,
                    registries=self.registries,
                    limits=self.limits,
                    sha256=sha256,
                )
            except FAILURES as exc:
                raise InstallError(str(exc)) from None
            yield fetched
        finally:
            await asyncio.to_thread(shutil.rmtree, staged, True)

    def _review(
        self,
        folder: Path,
        name: str,
        *,
        previous: LockEntry | None = None,
        when: tuple[str, ...] = (),
    ) -> Review:
        before = None
        if previous is not None:
            installed = next((s for s in self.library.skills() if s.folder.name == name), None)
            before = installed.permissions if installed is not None else None
        try:
            return inspect(
                folder,
                name,
                previous=previous,
                before=before,
                configured_secrets=self.library.configured_secrets,
                when=when,
                mcp_servers=self.library.mcp_servers,
                lock=self.lock,
            )
        except ReviewError as exc:
            raise InstallError(str(exc)) from None

    def _name(self, source: Source, staged: Path) -> str:
        """The registry's name; else the skill's own name, if it can be a folder's."""
        if source.kind == "registry":
            return source.location
        try:
            fields, _ = parse_front_matter((staged / SKILL_FILE).read_text(errors="replace"))
        except (OSError, FrontMatterError):
            fields = {}
        own = str(fields.get("name") or "").strip()
        return own if SKILL_NAME.match(own) else source.suggested_name


def _parsed(text: str) -> Source:
    try:
        return parse_source(text)
    except SourceError as exc:
        raise InstallError(str(exc)) from None


def _version(folder: Path) -> str:
    """``version:`` (or ``metadata: {version: ...}``) from the skill's front matter."""
    try:
        fields, _ = parse_front_matter((folder / SKILL_FILE).read_text(errors="replace"))
    except (OSError, FrontMatterError):
        return ""
    metadata = fields.get("metadata")
    version = fields.get("version") or (
        metadata.get("version") if isinstance(metadata, dict) else None
    )
    return str(version or "")
