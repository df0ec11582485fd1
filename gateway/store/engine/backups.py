"""A copy of the store before every schema change, and the way back to it.

Switchboard migrates its schema when it starts. Before the SQLite store is migrated, SQLite's
online backup copies it to ``backups/<UTC time>-v<old schema>.db`` in the home (checked with
``PRAGMA integrity_check`` first, mode 0600), with a note beside it (``.json``) of what it
was: its schema, the Switchboard that ran on it last (as the store recorded it,
:data:`SOFTWARE_KEY`) and the one about to migrate it. The newest :data:`KEPT` copies are
kept. ``switchboard upgrade --rollback`` puts the newest copy back (:func:`restore`): the
store it replaces is kept in ``backups/`` too, nothing is deleted. A PostgreSQL database is
backed up by its owner (``pg_dump``): gateway/store/engine/schema_pg.py waits for their word.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from gateway import __version__
from gateway.core.errors import StoreError
from gateway.core.system.fileutil import write_atomic
from gateway.store.engine.integrity import backup, integrity_problems
from gateway.store.engine.schema import MIGRATIONS

KEPT = 3  # copies made before migrations, the newest
SOFTWARE_KEY = "software"  # kv: the Switchboard that opened the store last, and its schema
_SUFFIX = ".db"
_NOTE = ".json"
_REPLACED = "replaced"  # the name of a store a rollback put aside


@dataclass(frozen=True, slots=True)
class Backup:
    """A copy of the store made before a migration."""

    path: Path
    schema: int  # its schema version
    ran_by: str | None  # the Switchboard that opened it last (None: one older than the note)
    migrated_by: str  # the Switchboard that then migrated it
    made_at: str  # UTC, ISO 8601

    def undo(self) -> str:
        """Said when a start that migrated the store after making this copy then failed:
        the Switchboard run before no longer starts on it, and how to go back."""
        return (
            f"This start had migrated the store from schema v{self.schema} to "
            f"v{len(MIGRATIONS)}, which the Switchboard you ran before does not start on. "
            f"The copy made before the migration is {self.path}: `switchboard upgrade "
            f"--rollback` puts it back (then run {self.run_with})."
        )

    @property
    def run_with(self) -> str:
        """Which Switchboard to run on it, said to a person."""
        release = f"Switchboard {self.ran_by}" if self.ran_by else "the Switchboard you ran before"
        if self.ran_by == __version__:  # the same version name: only the schema tells them apart
            release = "the Switchboard you ran before"
        return (
            f"{release}, or any release whose newest schema is v{self.schema} (newer ones "
            "migrate it again, after a copy)"
        )


def software(schema: int) -> dict[str, object]:
    """What :data:`SOFTWARE_KEY` records: this Switchboard, and the schema it wrote."""
    return {"switchboard": __version__, "schema": schema}


def before_migration(db: Path, backups: Path, schema: int) -> Backup:
    """Copy the store at ``db`` (schema ``schema``, about to be migrated) into ``backups``;
    the oldest copies beyond :data:`KEPT` go. Raises :class:`StoreError` naming the copy
    when it cannot be made: the migration does not run without it."""
    made_at = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = backups / f"{made_at}-v{schema}{_SUFFIX}"
    try:
        backups.mkdir(parents=True, exist_ok=True, mode=0o700)
        backup(db, target)
    except (OSError, StoreError) as exc:
        raise StoreError(
            f"the store {db} must be migrated from schema v{schema}, and its copy "
            f"{target} could not be made first ({exc}); nothing was changed. Free some "
            "space (or make backups/ writable) and start again."
        ) from exc
    copy = Backup(target, schema, _ran_by(target, schema), __version__, made_at)
    note = {
        "schema": copy.schema,
        "ran_by": copy.ran_by,
        "migrated_by": copy.migrated_by,
        "made_at": made_at,
    }
    # yours only, as the copy beside it (0600)
    write_atomic(target.with_suffix(_NOTE), json.dumps(note, indent=2) + "\n", mode=0o600)
    for old in copies(backups)[KEPT:]:
        old.path.unlink(missing_ok=True)
        old.path.with_suffix(_NOTE).unlink(missing_ok=True)
    return copy


def copies(backups: Path) -> list[Backup]:
    """The copies made before migrations, newest first."""
    found = []
    for path in sorted(backups.glob(f"*-v*{_SUFFIX}"), reverse=True):
        if _REPLACED in path.stem:
            continue
        try:
            note = json.loads(path.with_suffix(_NOTE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # not one of ours, or its note was lost
        found.append(
            Backup(
                path,
                int(note["schema"]),
                note.get("ran_by"),
                str(note.get("migrated_by", "?")),
                str(note.get("made_at", "")),
            )
        )
    return found


def restore(db: Path, backups: Path) -> tuple[Backup, Path]:
    """Put the newest copy back in place of the store at ``db`` (the gateway stopped); the
    store it replaces is moved into ``backups`` (returned beside the copy restored). Raises
    :class:`StoreError` when there is no sound copy."""
    found = copies(backups)
    if not found:
        raise StoreError(
            f"there is no copy made before a migration in {backups}: nothing to roll back to"
        )
    newest = found[0]
    current = _schema_of(db)
    if current <= newest.schema:
        raise StoreError(
            f"the store is at schema v{current}, no newer than the newest copy "
            f"({newest.path}, v{newest.schema}): there is no migration to undo, and putting "
            "the copy back would replace newer messages with older ones. Nothing was changed; "
            "to go back to that copy anyway, stop the gateway and copy it over the store "
            "(docs/reliability.md)"
        )
    problems = integrity_problems(newest.path)
    if problems:
        raise StoreError(f"the copy {newest.path} is damaged: {'; '.join(problems[:3])}")
    made_at = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    kept = backups / f"{made_at}-v{current}-{_REPLACED}{_SUFFIX}"
    backup(db, kept)  # the store as it is now, whole (its log included), kept
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    partial = db.with_name(f".{db.name}.restoring")
    shutil.copyfile(newest.path, partial)
    partial.chmod(0o600)
    partial.replace(db)
    return newest, kept


def _ran_by(copy: Path, schema: int) -> str | None:
    """The Switchboard the store recorded as the last to open it, if that one wrote
    ``schema`` (an older one did not record itself)."""
    with contextlib.closing(
        sqlite3.connect(f"{copy.resolve().as_uri()}?mode=ro", uri=True)
    ) as conn:
        try:
            row = conn.execute("SELECT value FROM kv WHERE key = ?", (SOFTWARE_KEY,)).fetchone()
        except sqlite3.Error:
            return None
    if row is None:
        return None
    recorded = json.loads(row[0])
    if not isinstance(recorded, dict) or recorded.get("schema") != schema:
        return None
    return str(recorded.get("switchboard"))


def _schema_of(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
    return int(version)
