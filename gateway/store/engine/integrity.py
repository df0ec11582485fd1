"""Refuse a damaged or foreign database at start; check one on demand; copy one while it runs.

A store that SQLite cannot read, that fails ``PRAGMA quick_check``, that another program
wrote, that a newer Switchboard wrote, or that was cut to zero bytes stops the start with
:class:`~gateway.core.errors.StoreDamagedError`, naming the file and what to do. Switchboard
never answers such a file by creating a new, empty store in its place: that would drop every
message waiting for an answer without a word.

:func:`backup` uses SQLite's online backup API, so it is safe while the gateway writes, and
marks the copy as one (:data:`COPY_TAKEN_KEY`); :func:`integrity_problems` is ``switchboard doctor``'s full ``PRAGMA integrity_check``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

from gateway.core.errors import StoreDamagedError, StoreError

_SQLITE_IOERR = 10
_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_NOTADB = 26
_SQLITE_IOERR_READ = 266
_SQLITE_IOERR_SHORT_READ = 522
_DAMAGED = (_SQLITE_CORRUPT, _SQLITE_NOTADB)

ADVICE = (
    "Switchboard will not start on it, and will not replace it with an empty store (that "
    "would lose every message waiting for an answer). Run `switchboard doctor` for details, "
    "then restore a backup made with `switchboard backup` (docs/reliability.md, "
    '"Backup and restore"), or move the file away to start with an empty store.'
)


def damaged(path: Path, what: str) -> StoreDamagedError:
    return StoreDamagedError(f"the store {path} {what}. {ADVICE}", path=path)


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether SQLite says the file is not a database or is malformed."""
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _DAMAGED


def check_before_open(path: Path) -> None:
    """A file that exists but is empty, with no write-ahead log holding its pages, was cut
    short: SQLite would take it for a new database."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return  # a first start
    wal = Path(f"{path}-wal")
    if size == 0 and not (wal.exists() and wal.stat().st_size > 0):
        raise damaged(path, "is empty (0 bytes): it was truncated")


def check_opened(conn: sqlite3.Connection, path: Path, known_versions: int) -> None:
    """After connecting, before migrating: readable, ours, not newer than this code, and
    passing SQLite's quick check (a fraction of a second for a large store)."""
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master")]
        problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
    except sqlite3.DatabaseError as exc:
        if is_damage(exc):
            raise damaged(path, f"is damaged: it cannot be read ({exc})") from exc
        raise
    if problems != ["ok"]:
        shown = "; ".join(problems[:3])
        raise damaged(path, f"is damaged: it fails SQLite's integrity check ({shown})")
    if version == 0 and tables:
        raise damaged(path, "is not a Switchboard database (it has other tables and no version)")
    if version > known_versions:
        raise StoreDamagedError(
            f"the store {path} has schema version {version}, written by a newer Switchboard; "
            f"this one knows versions up to {known_versions}. Upgrade Switchboard, or restore "
            "a backup made by this version (docs/reliability.md). The file is left untouched.",
            path=path,
        )


def integrity_problems(path: Path) -> list[str]:
    """``PRAGMA integrity_check`` on a read-only connection: ``[]`` when the file is sound."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        return [str(exc)]
    try:
        rows = [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
    except sqlite3.Error as exc:
        return [str(exc)]
    finally:
        conn.close()
    return [] if rows == ["ok"] else rows


def backup(source: Path, target: Path) -> int:
    """Copy the store at ``source`` to ``target`` with SQLite's online backup API (consistent
    while the gateway writes); the copy is checked before it replaces ``target``. Returns the
    copy's size in bytes. A copy that fails leaves no file of it behind (its journal and
    write-ahead log included: a later copy would take them for its own), and says whether
    reading the store or writing the copy failed."""
    if not source.exists():
        raise FileNotFoundError(f"there is no store at {source}")
    partial = target.with_name(f".{target.name}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove(partial)
        problems = _copy(source, partial)
    except (sqlite3.Error, OSError) as exc:
        _remove(partial)
        if isinstance(exc, sqlite3.Error) and is_damage(exc):
            raise damaged(source, f"cannot be read ({exc})") from exc
        if not _writing(exc):
            raise StoreError(f"cannot back up {source} to {target}: {exc}") from exc
        raise StoreError(
            f"cannot write the copy {target}: {_said(exc)}{_space(exc, target.parent)}; "
            f"the store {source} was only read"
        ) from exc
    if problems != ["ok"]:
        _remove(partial)
        raise damaged(source, f"could not be copied soundly ({'; '.join(problems[:3])})")
    partial.replace(target)
    return target.stat().st_size


def _remove(partial: Path) -> None:
    """A copy not made: its file, and the journal, write-ahead log and shared memory SQLite
    made beside it (the copy takes the store's WAL mode until it is made one file)."""
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{partial}{suffix}").unlink(missing_ok=True)


def _writing(exc: sqlite3.Error | OSError) -> bool:
    """Whether writing the copy failed, not reading the store (opened read-only): a full
    disk, an I/O error other than a read, a file the copy could not make."""
    if isinstance(exc, OSError):
        return True
    code = getattr(exc, "sqlite_errorcode", 0)
    if code & 0xFF == _SQLITE_FULL:
        return True
    return code & 0xFF == _SQLITE_IOERR and code not in (
        _SQLITE_IOERR_READ,
        _SQLITE_IOERR_SHORT_READ,
    )


def _said(exc: sqlite3.Error | OSError) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


def _space(exc: sqlite3.Error | OSError, folder: Path) -> str:
    """The free space where the copy goes, when the disk is full."""
    full = getattr(exc, "sqlite_errorcode", 0) & 0xFF == _SQLITE_FULL
    if not full and getattr(exc, "errno", None) != errno.ENOSPC:
        return ""
    free = ""
    with contextlib.suppress(OSError):
        free = f": {shutil.disk_usage(folder).free // 1024} KB free"
    return f" (the disk holding {folder} is full{free})"


# Set in every copy, never in a live store: when it was taken. A store started with it is a
# restored copy, whose open work the original went on with after the copy was taken
# (gateway/runtime/intake/restored.py).
COPY_TAKEN_KEY = "copy_taken_at"


def _copy(source: Path, partial: Path) -> list[str]:
    src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
    try:
        os.close(os.open(partial, os.O_RDWR | os.O_CREAT, 0o600))
        dst = sqlite3.connect(partial)
        try:
            src.backup(dst, pages=1024)
            now = time.time()
            with dst:
                dst.execute(
                    "INSERT INTO kv (key, value, updated_at) VALUES (?, ?, ?)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
                    " updated_at = excluded.updated_at",
                    (COPY_TAKEN_KEY, json.dumps(now), now),
                )
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
            problems = [row[0] for row in dst.execute("PRAGMA integrity_check")]
        finally:
            dst.close()
    finally:
        src.close()
    return problems
