"""Daily housekeeping: keep the database and the data directory from growing for ever.

The scheduler calls :func:`housekeep` once a day (and a few minutes after start). It deletes
records of finished work older than the ``[storage]`` retention settings (see
:meth:`gateway.store.Store.prune`) and turn traces (``data_dir/traces/<day>/<turn>.jsonl``)
not written to for as long. Conversation history, memory, web chat transcripts and the
user's attachments in the workspace are never touched.
"""

from __future__ import annotations

import asyncio
import logging
import re
import stat
from collections.abc import Awaitable, Callable
from datetime import date
from functools import partial
from pathlib import Path

from gateway.config.settings import Settings, StorageSettings
from gateway.core.errors import StoreError
from gateway.store import Retention, Store
from gateway.store.engine.retention import DAY

log = logging.getLogger(__name__)

_DAY_DIR = re.compile(r"\d{4}-\d{2}-\d{2}")


def retention(storage: StorageSettings) -> Retention:
    return Retention(
        records=storage.retention_days * DAY,
        audit=storage.audit_retention_days * DAY,
        usage=storage.usage_retention_days * DAY,
    )


Housekeeping = Callable[[float], Awaitable[dict[str, int]]]  # prune as of a time


def housekeeping(store: Store, settings: Settings) -> Housekeeping:
    """What the scheduler runs once a day (:func:`housekeep` of this store)."""
    return partial(housekeep, store, settings)


async def housekeep(store: Store, settings: Settings, now: float) -> dict[str, int]:
    """Prune the store and old traces as of ``now``; log one summary line; never raise for
    a failed prune (the scheduler's loop must go on; the next run tries again)."""
    keep = retention(settings.storage)
    counts: dict[str, int] = {}
    try:
        counts.update(await store.prune(now, keep))
    except StoreError as exc:
        log.warning("housekeeping: pruning the store failed: %s", exc)
    try:
        counts["traces"] = await asyncio.to_thread(
            prune_traces, settings.data_dir / "traces", now - keep.records
        )
    except OSError as exc:
        log.warning("housekeeping: pruning old traces failed: %s", exc)
    summary = ", ".join(f"{count} {kind}" for kind, count in counts.items() if count)
    log.info("housekeeping: removed %s", summary or "nothing")
    return counts


def prune_traces(directory: Path, before: float) -> int:
    """Delete trace files last written before ``before``, then day folders left empty.

    Only ``<YYYY-MM-DD>/*.jsonl`` regular files are touched (symlinks are left alone), and a
    day folder only once its whole day is older than ``before``, so today's never goes away
    under a turn about to write into it. Blocking: run it in a thread.
    """
    if not directory.is_dir():
        return 0
    removed = 0
    last_old_day = date.fromtimestamp(before)  # local days, as the traces are named
    for day in directory.iterdir():
        if not _DAY_DIR.fullmatch(day.name) or not day.is_dir() or day.is_symlink():
            continue
        for path in day.glob("*.jsonl"):
            try:
                info = path.lstat()
                if stat.S_ISREG(info.st_mode) and info.st_mtime < before:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                continue  # gone meanwhile
        if _day(day.name) < last_old_day and not any(day.iterdir()):
            try:
                day.rmdir()
            except OSError:
                continue  # a trace arrived meanwhile
    return removed


def _day(name: str) -> date:
    try:
        return date.fromisoformat(name)
    except ValueError:
        return date.max  # not a real day (2026-13-40): never remove the folder
