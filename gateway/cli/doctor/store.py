"""Doctor's checks of the store: the database passes ``PRAGMA integrity_check``, this
version can read it, and the disk under it has room (docs/reliability.md)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from gateway.cli.doctor.checks import Check
from gateway.config.settings import Settings

LOW_DISK_BYTES = 100 * 1024 * 1024


def store_checks(settings: Settings) -> list[Check]:
    from gateway.store.engine.integrity import integrity_problems  # noqa: PLC0415
    from gateway.store.engine.schema import MIGRATIONS  # noqa: PLC0415

    path = settings.data_dir / "switchboard.db"
    checks = [_disk_check(settings.data_dir)] if settings.data_dir.exists() else []
    if settings.storage.database_url() is not None or not path.exists():
        return checks  # PostgreSQL checks its own pages; reaching it is the store's own check
    problems = integrity_problems(path)
    if problems:
        shown = "; ".join(problems[:3])
        checks.append(
            Check(
                "store",
                "fail",
                f"{path} fails PRAGMA integrity_check ({shown}); the gateway will not start on "
                "it: restore a backup (`switchboard backup`, docs/reliability.md) or move it away",
            )
        )
        return checks
    version = _version(path)
    if version > len(MIGRATIONS):
        checks.append(
            Check(
                "store",
                "fail",
                f"{path} has schema version {version}, newer than this Switchboard knows "
                f"({len(MIGRATIONS)}): upgrade, or restore a backup made by this version",
            )
        )
    else:
        size = path.stat().st_size
        checks.append(Check("store", "ok", f"{path} passes integrity_check ({size} bytes)"))
    return checks


def _version(path: Path) -> int:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
    finally:
        conn.close()
    return int(version)


def _disk_check(data_dir: Path) -> Check:
    stats = os.statvfs(data_dir)
    free = stats.f_bavail * stats.f_frsize
    if free < LOW_DISK_BYTES:
        return Check(
            "disk",
            "warn",
            f"only {free // (1024 * 1024)} MB free under {data_dir}: when it fills up, new "
            "messages wait unacknowledged until space is freed",
        )
    return Check("disk", "ok", f"{free // (1024 * 1024)} MB free under {data_dir}")
