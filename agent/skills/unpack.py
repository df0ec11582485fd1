"""Unpacking a skill's archive, or copying its folder, without letting it reach outside.

Every name is checked before anything is written: no absolute path, no ``..``, no
backslash or NUL, no symbolic or hard link (a link is refused outright: one inside the
folder today can be aimed outside tomorrow), no device or pipe; and the whole stays within
:class:`Limits` (files, bytes per file, bytes in all), counted on what is actually written,
not on what the archive's headers say (a zip bomb lies there). Files are created with
``O_EXCL | O_NOFOLLOW`` in a folder this module made, so nothing already on the disk is
followed or overwritten. An archive "of the skill's folder" may hold the folder itself
(``weather/SKILL.md``) or its contents (``SKILL.md``): a lone top folder is taken off.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

MB = 1024 * 1024
SKILL_FILE = "SKILL.md"


class UnsafeArchive(Exception):
    """The archive or folder cannot be installed; the message says which entry and why."""


@dataclass(frozen=True, slots=True)
class Limits:
    max_download_bytes: int = 20 * MB  # an archive or an index, as downloaded
    max_files: int = 500
    max_file_bytes: int = 10 * MB
    max_total_bytes: int = 50 * MB


@dataclass(frozen=True, slots=True)
class Member:
    name: PurePosixPath
    directory: bool
    size: int  # as declared; what is written is counted again
    executable: bool
    open: Callable[[], IO[bytes]]


def unpack(data: bytes, target: Path, limits: Limits) -> None:
    """Unpack a ``.tar.gz`` or ``.zip`` (told apart by their first bytes) into ``target``,
    a folder that must not exist yet."""
    if data.startswith(b"\x1f\x8b"):
        try:
            tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")  # noqa: SIM115
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise UnsafeArchive(f"not a readable .tar.gz: {exc}") from None
        with tar:
            try:
                members = list(_tar_members(tar))
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise UnsafeArchive(f"not a readable .tar.gz: {exc}") from None
            _write(members, target, limits)
    elif data.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                _write(list(_zip_members(archive)), target, limits)
        except (zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
            raise UnsafeArchive(f"not a readable .zip: {exc}") from None
    else:
        raise UnsafeArchive("the download is not a .tar.gz or .zip archive")


def copy_folder(source: Path, target: Path, limits: Limits, *, skip: tuple[str, ...] = ()) -> None:
    """Copy the folder ``source`` into ``target`` (which must not exist yet) with the same
    checks as an archive; top-level entries named in ``skip`` (``.git``) are left behind."""
    if not source.is_dir():
        raise UnsafeArchive(f"{source} is not a folder")
    members: list[Member] = []
    for current, folders, files in os.walk(source, followlinks=False):
        base = Path(current)
        if base == source:
            folders[:] = [f for f in folders if f not in skip]
        names = [f for f in files if base != source or f not in skip]
        for name in sorted([*folders, *names]):
            path = base / name
            relative = PurePosixPath(path.relative_to(source).as_posix())
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                raise UnsafeArchive(f"{relative} is a symbolic link; skills with links are refused")
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise UnsafeArchive(f"{relative} is not a plain file or folder")
            members.append(
                Member(
                    relative,
                    stat.S_ISDIR(mode),
                    0 if stat.S_ISDIR(mode) else os.lstat(path).st_size,
                    bool(mode & 0o111) and stat.S_ISREG(mode),
                    lambda path=path: path.open("rb"),  # type: ignore[misc]
                )
            )
    _write(members, target, limits, strip=False)


def _tar_members(archive: tarfile.TarFile) -> Iterator[Member]:
    for info in archive:
        name = _checked_name(info.name)
        if info.issym() or info.islnk():
            raise UnsafeArchive(f"{info.name} is a link; archives with links are refused")
        if not (info.isdir() or info.isfile()):
            raise UnsafeArchive(f"{info.name} is not a plain file or folder")
        if name is None:
            continue

        def opened(info: tarfile.TarInfo = info) -> IO[bytes]:
            handle = archive.extractfile(info)
            if handle is None:
                raise UnsafeArchive(f"{info.name} cannot be read")
            return handle

        yield Member(name, info.isdir(), info.size, bool(info.mode & 0o111), opened)


def _zip_members(archive: zipfile.ZipFile) -> Iterator[Member]:
    for info in archive.infolist():
        name = _checked_name(info.filename)
        mode = info.external_attr >> 16  # Unix mode bits, when a Unix tool made the zip
        kind = stat.S_IFMT(mode)
        if kind == stat.S_IFLNK:
            raise UnsafeArchive(f"{info.filename} is a link; archives with links are refused")
        if kind not in (0, stat.S_IFDIR, stat.S_IFREG):
            raise UnsafeArchive(f"{info.filename} is not a plain file or folder")
        if name is None:
            continue
        yield Member(
            name,
            info.is_dir(),
            info.file_size,
            bool(mode & 0o111),
            lambda info=info: archive.open(info),  # type: ignore[misc]
        )


def _checked_name(raw: str) -> PurePosixPath | None:
    """The entry's path inside the folder; ``None`` for the folder itself (``./``)."""
    if not raw or "\x00" in raw or "\\" in raw:
        raise UnsafeArchive(f"{raw!r} is not a usable file name")
    if raw.startswith("/") or (len(raw) > 1 and raw[1] == ":"):
        raise UnsafeArchive(f"{raw} is an absolute path; archives must stay inside their folder")
    path = PurePosixPath(raw)
    if ".." in path.parts:
        raise UnsafeArchive(f"{raw} leads out of the folder (..)")
    parts = [p for p in path.parts if p != "."]
    return PurePosixPath(*parts) if parts else None


def _write(members: list[Member], target: Path, limits: Limits, *, strip: bool = True) -> None:
    if len(members) > limits.max_files:
        raise UnsafeArchive(f"it has {len(members)} entries; at most {limits.max_files}")
    declared = sum(m.size for m in members if not m.directory)
    if declared > limits.max_total_bytes:
        raise UnsafeArchive(f"it unpacks to {declared} bytes; at most {limits.max_total_bytes}")
    if strip:
        members = _without_top_folder(members)
    target.mkdir(mode=0o755)
    total = 0
    for member in sorted(members, key=lambda m: (len(m.name.parts), str(m.name))):
        path = target.joinpath(*member.name.parts)
        if member.directory:
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(
                path,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o755 if member.executable else 0o644,
            )
        except FileExistsError:
            raise UnsafeArchive(f"{member.name} appears twice") from None
        written = 0
        with os.fdopen(fd, "wb") as out, member.open() as source:
            while block := source.read(1 << 16):
                written += len(block)
                total += len(block)
                if written > limits.max_file_bytes:
                    raise UnsafeArchive(
                        f"{member.name} is larger than {limits.max_file_bytes} bytes"
                    )
                if total > limits.max_total_bytes:
                    raise UnsafeArchive(f"it unpacks to more than {limits.max_total_bytes} bytes")
                out.write(block)


def _without_top_folder(members: list[Member]) -> list[Member]:
    """``weather/SKILL.md`` ... becomes ``SKILL.md`` ...: the archive held the folder itself."""
    if any(m.name == PurePosixPath(SKILL_FILE) for m in members):
        return members
    tops = {m.name.parts[0] for m in members}
    if len(tops) != 1:
        return members
    return [
        Member(PurePosixPath(*m.name.parts[1:]), m.directory, m.size, m.executable, m.open)
        for m in members
        if len(m.name.parts) > 1
    ]
