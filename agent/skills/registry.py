"""Registries: JSON index files listing skills, hosted anywhere (a static file will do).

``skills.registries`` names their URLs. An index is::

    {"skills": [{"name": "weather", "version": "1.2.0", "description": "...",
                 "url": "weather-1.2.0.tar.gz", "sha256": "<hex of the archive>"}]}

``url`` is the skill's folder as a ``.tar.gz`` or ``.zip``, absolute or relative to the
index; ``sha256`` pins that archive: an install whose download differs is refused before
anything is written. A name found in several registries is taken from the first one listed;
within one index, the highest version of a name wins. An entry that is not well formed is
left out with a note, and a registry that cannot be reached does not stop a search of the
others.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from yarl import URL

from agent.skills.downloads import DownloadError, Downloads
from agent.skills.library import SKILL_NAME

MAX_INDEX_BYTES = 2 * 1024 * 1024
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class RegistryError(Exception):
    """No registry lists the skill, or none could be read; the message says which."""


@dataclass(frozen=True, slots=True)
class IndexEntry:
    name: str
    version: str
    description: str
    url: str  # absolute
    sha256: str
    registry: str  # the index it came from


@dataclass(frozen=True, slots=True)
class Listing:
    entries: tuple[IndexEntry, ...]
    problems: tuple[str, ...]  # registries that could not be read, entries left out


def parse_index(data: bytes, index_url: str) -> Listing:
    """The entries of one index; :class:`RegistryError` when it is not an index at all."""
    try:
        document = json.loads(data)
    except ValueError as exc:
        raise RegistryError(f"{index_url} is not JSON: {exc}") from None
    skills = document.get("skills") if isinstance(document, dict) else None
    if not isinstance(skills, list):
        raise RegistryError(f'{index_url} is not a skills index (no "skills" list)')
    entries: dict[str, IndexEntry] = {}
    problems: list[str] = []
    for position, raw in enumerate(skills):
        try:
            entry = _entry(raw, index_url)
        except RegistryError as exc:
            problems.append(f"{index_url}: entry {position} left out: {exc}")
            continue
        known = entries.get(entry.name)
        if known is None or version_key(entry.version) > version_key(known.version):
            entries[entry.name] = entry
    return Listing(tuple(entries.values()), tuple(problems))


def _entry(raw: object, index_url: str) -> IndexEntry:
    if not isinstance(raw, dict):
        raise RegistryError("not an object")
    fields = {}
    for key in ("name", "version", "url", "sha256"):
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            raise RegistryError(f"{key!r} is missing")
        fields[key] = value.strip()
    if not SKILL_NAME.match(fields["name"]):
        raise RegistryError(f"{fields['name']!r} is not a skill name")
    digest = fields["sha256"].lower()
    if not _SHA256.match(digest):
        raise RegistryError(f"{fields['name']}: sha256 is not 64 hex digits")
    try:
        url = str(URL(index_url).join(URL(fields["url"])))
    except ValueError as exc:
        raise RegistryError(f"{fields['name']}: url is not valid: {exc}") from None
    description = raw.get("description")
    return IndexEntry(
        name=fields["name"],
        version=fields["version"],
        description=" ".join(str(description or "").split())[:300],
        url=url,
        sha256=digest,
        registry=index_url,
    )


def version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    """Orders ``1.10.0`` after ``1.9.2``: numbers as numbers, the rest as text after them."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part)
        for part in re.split(r"[.\-+_]", version.strip().lower())
        if part
    )


class Registries:
    def __init__(self, urls: Sequence[str], downloads: Downloads) -> None:
        self.urls = tuple(urls)
        self._downloads = downloads

    async def listing(self) -> Listing:
        """Every registry's entries, in the order the registries are listed."""
        if not self.urls:
            return Listing((), ("no registries configured (skills.registries)",))
        results = await asyncio.gather(*(self._one(url) for url in self.urls))
        return Listing(
            tuple(e for r in results for e in r.entries),
            tuple(p for r in results for p in r.problems),
        )

    async def search(self, term: str) -> Listing:
        listing = await self.listing()
        words = term.lower().split()
        found = tuple(
            e
            for e in _first_of_each(listing.entries)
            if all(w in f"{e.name} {e.description}".lower() for w in words)
        )
        return Listing(found, listing.problems)

    async def find(self, name: str) -> IndexEntry:
        listing = await self.listing()
        for entry in listing.entries:
            if entry.name == name:
                return entry
        why = "; ".join(listing.problems)
        raise RegistryError(
            f"no registry lists a skill named {name!r}" + (f" ({why})" if why else "")
        )

    async def _one(self, url: str) -> Listing:
        try:
            data = await self._downloads.get(url, max_bytes=MAX_INDEX_BYTES)
            return parse_index(data, url)
        except (DownloadError, RegistryError) as exc:
            return Listing((), (f"registry {url} could not be read: {exc}",))


def _first_of_each(entries: Sequence[IndexEntry]) -> list[IndexEntry]:
    seen: set[str] = set()
    first = []
    for entry in entries:
        if entry.name not in seen:
            seen.add(entry.name)
            first.append(entry)
    return first
