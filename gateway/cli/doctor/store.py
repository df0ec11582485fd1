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
    url = settings.storage.database_url()
    if url is not None:  # PostgreSQL checks its own pages: its version is what is left
        return [*checks, _postgres_check(url, confirmed=settings.storage.migrate == "auto")]
    if not path.exists():
        return checks
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
        older = (
            f"; schema v{version}: the gateway migrates it to v{len(MIGRATIONS)} when it "
            "starts, after a copy"
            if 0 < version < len(MIGRATIONS)
            else ""
        )
        checks.append(Check("store", "ok", f"{path} passes integrity_check ({size} bytes){older}"))
    return checks


def _postgres_check(url: str, *, confirmed: bool) -> Check:
    """The database's schema against this version's (read only: nothing is created)."""
    import psycopg  # noqa: PLC0415 - only with storage.url

    from gateway.store.engine.postgres import redacted  # noqa: PLC0415
    from gateway.store.engine.schema_pg import PG_MIGRATIONS  # noqa: PLC0415

    where, known = redacted(url), len(PG_MIGRATIONS)
    try:
        with psycopg.connect(url, connect_timeout=5, autocommit=True) as conn:
            exists = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
            row = (
                conn.execute("SELECT max(version) FROM schema_version").fetchone()
                if (exists and exists[0])
                else None
            )
    except psycopg.Error as exc:
        return Check("store", "fail", f"cannot reach {where}: {str(exc).strip() or exc}")
    version = int(row[0]) if row is not None and row[0] is not None else 0
    if version > known:
        return Check(
            "store",
            "fail",
            f"{where} has schema version {version}, newer than this Switchboard knows "
            f"({known}): upgrade this node (docs/scaling.md)",
        )
    if 0 < version < known and not confirmed:
        return Check(
            "store",
            "fail",
            f"{where} has schema version {version} and this Switchboard needs {known}: the "
            "gateway will not start on it until it is backed up (`pg_dump`) and migrated "
            "with `switchboard upgrade --i-have-a-backup` (docs/scaling.md)",
        )
    state = f"schema v{version}" if version else "empty: the first start creates the schema"
    return Check("store", "ok", f"{where}: {state}")


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
