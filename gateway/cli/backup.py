"""``switchboard backup PATH``: a consistent copy of the store while the gateway runs.

SQLite's online backup API copies the database page by page under a read transaction, so
the copy is a single point in time even while the gateway writes. The copy is checked with
``PRAGMA integrity_check`` before it is moved into place. Restoring is documented in
docs/reliability.md ("Backup and restore").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.config.settings import Settings

DESCRIPTION = (
    "Copy the store (data_dir/switchboard.db: journal, history, outbox, jobs, pairings) to "
    "PATH with SQLite's online backup API; safe while the gateway runs. The copy is checked "
    "before it replaces PATH. To restore: stop the gateway, copy the backup over "
    "switchboard.db, delete switchboard.db-wal and -shm, start it again."
)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    command = commands.add_parser(
        "backup", parents=[common], help="copy the store while it runs", description=DESCRIPTION
    )
    command.add_argument(
        "path", help="where to write the copy: a file, or a directory (made if it ends in /)"
    )
    command.set_defaults(handler=backup_command, reads_home=True)


def backup_command(args: argparse.Namespace, settings: Settings) -> int:
    from gateway.store.engine.integrity import backup  # noqa: PLC0415

    if settings.storage.database_url() is not None:
        print(
            "switchboard: the store is in PostgreSQL (storage.url): back it up with the "
            "server's own tools, e.g. `pg_dump --format=custom DBNAME > switchboard.dump` "
            "(docs/scaling.md)",
            file=sys.stderr,
        )
        return 1
    source = settings.data_dir / "switchboard.db"
    given: str = args.path
    target = Path(given).expanduser()
    if target.is_dir() or given.endswith("/"):  # a folder: the copy goes into it
        target = target / "switchboard.db"
    if target.resolve() == source.resolve():
        print(
            f"switchboard: {target} is the store itself: name another file or folder for the "
            "copy (it would replace the store the gateway runs on)",
            file=sys.stderr,
        )
        return 1
    if target.exists():
        print(f"replacing {target}", file=sys.stderr)  # said: an earlier copy goes
    try:
        size = backup(source, target)
    except FileNotFoundError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return 1
    print(f"backed up {source} to {target} ({size} bytes, integrity check ok)")
    return 0
