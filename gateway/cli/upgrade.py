"""``switchboard upgrade``: what this version changes in a home, the migration of a
PostgreSQL store, and the way back to the copy made before the last migration.

* ``--check`` (the default): whether the packages this code needs are installed (code
  updated with ``git pull`` needs ``make install`` first), the store's schema and the one
  this Switchboard needs (and whether starting migrates it at once), settings that moved (gateway/config/toml/moves.py),
  ``SWITCHBOARD_*`` variables that name no setting, the copies made before earlier
  migrations. Changes nothing.
* ``--i-have-a-backup``: migrate now. The SQLite file is copied to ``backups/`` first
  anyway; a PostgreSQL database is migrated only with this word from its owner (or
  ``storage.migrate = "auto"``): they back it up, with ``pg_dump``.
* ``--rollback``: put back the copy made before the last migration (SQLite; the gateway
  stopped), keep the store it replaces, and say which Switchboard to run with it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.config.settings import Settings
    from gateway.store import Store

DESCRIPTION = (
    "Say what this Switchboard changes in the home (the store's schema, settings that "
    "moved) and whether the packages it needs are installed, without changing anything; migrate a PostgreSQL store whose owner made a backup "
    "(--i-have-a-backup); or put back the copy of the SQLite store made before the last "
    "migration (--rollback). See docs/reliability.md, Upgrades."
)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    command = commands.add_parser(
        "upgrade", parents=[common], help="check, migrate or roll back", description=DESCRIPTION
    )
    what = command.add_mutually_exclusive_group()
    what.add_argument(
        "--check", action="store_true", help="say what would change (the default); change nothing"
    )
    what.add_argument(
        "--i-have-a-backup",
        dest="confirmed",
        action="store_true",
        help="migrate the store now (PostgreSQL: you backed it up, e.g. with pg_dump)",
    )
    what.add_argument(
        "--rollback",
        action="store_true",
        help="put back the copy of the store made before the last migration (SQLite)",
    )
    # a moved setting must not stop it: it reports one, and leaves config.toml as it is
    command.set_defaults(handler=upgrade_command, needs_settings="partial", changes_nothing=True)


def upgrade_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.rollback:
        return rollback(settings)
    if args.confirmed:
        return migrate_now(settings)
    return check(settings, getattr(args, "config_problem", None))


def check(settings: Settings, problem: Exception | None) -> int:
    from gateway.config.settings import Settings  # noqa: PLC0415
    from gateway.config.toml.moves import pending, unknown_variables  # noqa: PLC0415
    from gateway.core.errors import ConfigFileUnreadable  # noqa: PLC0415
    from gateway.core.system.install import install_problem  # noqa: PLC0415
    from gateway.runtime.storage import BACKUPS  # noqa: PLC0415
    from gateway.store.engine.backups import copies  # noqa: PLC0415
    from gateway.store.engine.schema import MIGRATIONS  # noqa: PLC0415

    print(f"packages: {install_problem() or 'every package this code needs is installed'}")
    print(f"store: {_store_line(settings, len(MIGRATIONS))}")
    unreadable = isinstance(problem, ConfigFileUnreadable)  # said below; nothing to look in
    moved = [] if unreadable else pending(settings.home)
    for each in moved:
        print(f"setting: {each.said()}")
    for line in [] if unreadable else unknown_variables(settings.home, Settings.model_fields):
        print(f"variable: {line}")
    if problem is not None and not moved:
        print(f"configuration: {problem}")
    if not moved and problem is None:
        print("settings: nothing moved")
    for copy in copies(settings.home / BACKUPS):
        print(f"copy: {copy.path} (schema v{copy.schema}, made by {copy.migrated_by})")
    print("nothing was changed")
    return 0


def migrate_now(settings: Settings) -> int:
    from gateway.core.system.lock import ProcessLock  # noqa: PLC0415
    from gateway.runtime.deployment import LOCK_FILE  # noqa: PLC0415
    from gateway.runtime.storage import (  # noqa: PLC0415
        BACKUPS,
        SQLITE_FILE,
        node_name,
    )
    from gateway.store import Store  # noqa: PLC0415
    from gateway.store.engine.schema import MIGRATIONS  # noqa: PLC0415

    url = settings.storage.database_url()
    store = Store(
        settings.data_dir / SQLITE_FILE,
        url=url,
        node=f"upgrade {node_name(settings)}" if url else "",
        backups=settings.home / BACKUPS,
        migrate=True,
    )
    before = _schema(settings)
    with (
        contextlib.nullcontext() if url else ProcessLock(settings.data_dir / LOCK_FILE)
    ):  # one process per SQLite home: the gateway must be stopped
        asyncio.run(_open_and_close(store))
    after = len(MIGRATIONS)
    if before == after:
        print(f"the store is at schema v{after} already: nothing to migrate")
    else:
        print(f"migrated the store from schema v{before} to v{after}")
    return 0


def rollback(settings: Settings) -> int:
    from gateway.core.system.lock import ProcessLock  # noqa: PLC0415
    from gateway.runtime.deployment import LOCK_FILE  # noqa: PLC0415
    from gateway.runtime.storage import BACKUPS, SQLITE_FILE  # noqa: PLC0415
    from gateway.store.engine.backups import restore  # noqa: PLC0415

    if settings.storage.database_url() is not None:
        print(
            "switchboard: the store is in PostgreSQL (storage.url): with every node stopped, "
            "empty the database (`DROP SCHEMA public CASCADE; CREATE SCHEMA public;`), restore "
            "the dump you made before the migration with `pg_restore --dbname=<storage.url> "
            "<file>`, then start the Switchboard that ran on it (docs/scaling.md, Rolling "
            "upgrade)",
            file=sys.stderr,
        )
        return 1
    with ProcessLock(settings.data_dir / LOCK_FILE):  # the gateway must be stopped
        copy, kept = restore(settings.data_dir / SQLITE_FILE, settings.home / BACKUPS)
    print(f"restored {copy.path} (schema v{copy.schema}, made {copy.made_at})")
    print(f"the store it replaced is kept in {kept}")
    print(f"run {copy.run_with}")
    return 0


async def _open_and_close(store: Store) -> None:
    """Open the store (migrating it) and close it again."""
    await store.start()
    await store.stop()


def _schema(settings: Settings) -> int:
    """The schema version the store is at now (0: none yet), read without changing it."""
    url = settings.storage.database_url()
    if url is not None:
        import psycopg  # noqa: PLC0415 - only for PostgreSQL

        from gateway.core.errors import StoreUnavailable  # noqa: PLC0415
        from gateway.store.engine.postgres import CONNECT_TIMEOUT, redacted  # noqa: PLC0415

        try:
            with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT, autocommit=True) as conn:
                found = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
                if not found or not found[0]:
                    return 0
                row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
                return 0 if row is None or row[0] is None else int(row[0])
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot reach {redacted(url)}: {exc}") from exc
    from gateway.runtime.storage import SQLITE_FILE  # noqa: PLC0415
    from gateway.store.engine.integrity import check_before_open, damaged  # noqa: PLC0415

    db: Path = settings.data_dir / SQLITE_FILE
    if not db.exists():
        return 0
    check_before_open(db)  # cut to 0 bytes: not "none yet"
    try:
        uri = f"{db.resolve().as_uri()}?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            (version,) = conn.execute("PRAGMA user_version").fetchone()
    except sqlite3.Error as exc:
        raise damaged(db, f"cannot be read ({exc})") from exc
    return int(version)


def _store_line(settings: Settings, needed: int) -> str:
    from gateway.core.errors import StoreError  # noqa: PLC0415

    try:
        version = _schema(settings)
    except StoreError as exc:  # damaged, or out of reach: said as it is
        return str(exc)
    url = settings.storage.database_url()
    if version == needed:
        return f"schema v{version}, as this Switchboard needs: nothing to migrate"
    if version == 0:
        return f"none yet: the first start creates schema v{needed}"
    if version > needed:
        return (
            f"schema v{version}, newer than this Switchboard knows (v{needed}): it will not "
            "start on it; run the newer Switchboard, or roll back with `switchboard upgrade "
            "--rollback`"
        )
    if url is None:
        return (
            f"schema v{version}; this Switchboard migrates it to v{needed} at its next start, "
            "after copying it to backups/"
        )
    if settings.storage.migrate == "auto":
        return (
            f"schema v{version} (PostgreSQL); the next start migrates it to v{needed} "
            '(storage.migrate = "auto"): back it up first with pg_dump'
        )
    return (
        f"schema v{version} (PostgreSQL); this Switchboard needs v{needed} and will not "
        "start until you back it up (pg_dump) and run `switchboard upgrade --i-have-a-backup`"
    )
