"""Where a skill comes from, and bringing its files into a staging folder.

A SOURCE is one of:

- a folder on this machine: ``./weather``, ``~/skills/weather``, ``/srv/skills/weather``;
- a git repository at a ref, with a folder inside it:
  ``git+https://github.com/owner/repo.git@v1.2#skills/weather`` (``@ref`` and ``#folder``
  optional; the default branch and the top);
- an archive URL: ``https://example.com/weather-1.2.tar.gz`` (or ``.zip``);
- a name from a registry index (``skills.registries``): ``weather``.

Whatever the source, the files land in a new staging folder through the checks of
:mod:`agent.skills.unpack`; an archive whose sha256 is not the one expected (the index's, or
``--sha256``) is refused before anything is written.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from yarl import URL

from agent.skills.downloads import Downloads
from agent.skills.git import fetch_commit
from agent.skills.library import SKILL_NAME
from agent.skills.lock import SourceKind
from agent.skills.registry import Registries
from agent.skills.unpack import Limits, copy_folder, unpack


class SourceError(Exception):
    """The source cannot be understood or fetched; the message says why."""


class DigestMismatch(SourceError):
    """The archive is not the one its sha256 pins: refused, nothing written."""


@dataclass(frozen=True, slots=True)
class Source:
    kind: SourceKind
    text: str  # as the owner wrote it
    location: str  # the folder, the repository or archive URL, or the registry name
    ref: str = ""  # git: branch, tag or commit
    subfolder: str = ""  # git: the skill's folder inside the repository

    @property
    def suggested_name(self) -> str:
        """The folder name to use when the skill's own name cannot be one."""
        if self.kind == "registry":
            return self.location
        if self.kind == "git":
            tail = self.subfolder.rstrip("/").rsplit("/", 1)[-1] or self.location.rstrip("/")
            return tail.rsplit("/", 1)[-1].removesuffix(".git").lower()
        if self.kind == "archive":
            stem = URL(self.location).name
            for suffix in (".tar.gz", ".tgz", ".zip"):
                stem = stem.removesuffix(suffix)
            return stem.lower()
        return Path(self.location).name.lower()


@dataclass(frozen=True, slots=True)
class Fetched:
    folder: Path  # the staged files
    version: str
    origin: str  # what was fetched: the folder, the archive's URL, repository@commit
    sha256: str = ""  # of the archive, when there was one


def parse_source(text: str) -> Source:
    given = text.strip()
    if not given:
        raise SourceError("give a folder, a git URL, an archive URL or a registry name")
    if given.startswith("git+"):
        return _git_source(given)
    if "://" in given:
        url = URL(given)
        if url.path.endswith(".git") or "@" in url.path:
            return _git_source(given)
        return Source("archive", given, given)
    folder = Path(given).expanduser()
    if folder.is_dir():  # recorded whole: `skills update` works from any directory
        where = str(folder.resolve())
        return Source("folder", where, where)
    if SKILL_NAME.match(given):
        return Source("registry", given, given)
    raise SourceError(
        f"{given!r} is not a folder, a git URL (git+https://...@ref), an archive URL "
        "(https://.../skill.tar.gz) or a skill name from a registry"
    )


def _git_source(given: str) -> Source:
    rest = given.removeprefix("git+")
    rest, _, subfolder = rest.partition("#")
    # the ref follows the first "@" of the path (a branch may hold "/": feature/x); one in
    # the host part is a user name
    scheme, sep, after = rest.partition("://")
    host, slash, path = after.partition("/")
    path, _, ref = path.partition("@")
    repository = f"{scheme}{sep}{host}{slash}{path}"
    if not repository.startswith(("https://", "http://")):
        raise SourceError(
            f"{given!r}: a git source is git+https://host/repository.git[@ref][#folder]"
        )
    folder = subfolder.strip("/")
    if ".." in Path(folder).parts or folder.startswith("~"):
        raise SourceError(f"{given!r}: the folder after # must lie inside the repository")
    return Source("git", given, repository, ref, folder)


async def fetch(
    source: Source,
    staging: Path,
    *,
    downloads: Downloads,
    registries: Registries,
    limits: Limits,
    sha256: str | None = None,
) -> Fetched:
    """Bring the source's files into ``staging`` (a folder that must not exist yet)."""
    if source.kind == "folder":  # a working copy's .git is its history, not the skill's
        await asyncio.to_thread(copy_folder, Path(source.location), staging, limits, skip=(".git",))
        return Fetched(staging, "", source.location)
    if source.kind == "git":
        return await _from_git(source, staging, downloads, limits)
    if source.kind == "registry":
        entry = await registries.find(source.location)
        return await _from_archive(
            entry.url,
            entry.sha256,
            staging,
            downloads=downloads,
            limits=limits,
            version=entry.version,
        )
    return await _from_archive(source.location, sha256, staging, downloads=downloads, limits=limits)


async def _from_archive(
    url: str,
    expected: str | None,
    staging: Path,
    *,
    downloads: Downloads,
    limits: Limits,
    version: str = "",
) -> Fetched:
    data = await downloads.get(url, max_bytes=limits.max_download_bytes)
    digest = hashlib.sha256(data).hexdigest()
    if expected is not None and digest != expected.lower():
        raise DigestMismatch(
            f"{url} has sha256 {digest}, not the {expected.lower()} it is pinned to: "
            "refused, nothing was installed"
        )
    await asyncio.to_thread(unpack, data, staging, limits)
    return Fetched(staging, version, url, digest)


async def _from_git(source: Source, staging: Path, downloads: Downloads, limits: Limits) -> Fetched:
    checkout = staging.with_name(staging.name + ".git")
    try:
        commit = await fetch_commit(
            source.location, source.ref or "HEAD", checkout, downloads.reach
        )
        inside = checkout / source.subfolder if source.subfolder else checkout
        if inside.resolve() != checkout.resolve().joinpath(*Path(source.subfolder).parts):
            raise SourceError(f"{source.subfolder} is reached through a link in the repository")
        skip = () if source.subfolder else (".git",)
        await asyncio.to_thread(copy_folder, inside, staging, limits, skip=skip)
    finally:
        await asyncio.to_thread(shutil.rmtree, checkout, True)
    return Fetched(staging, source.ref or commit[:12], f"{source.location}@{commit}")
