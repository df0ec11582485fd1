"""The store a configuration names: the SQLite file in its data directory, or the
PostgreSQL database of ``storage.url``."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

from gateway.config.settings import Settings
from gateway.core.schedule_spec import zone
from gateway.store import Store

SQLITE_FILE = "switchboard.db"
BACKUPS = "backups"  # in the home: copies of the store made before migrations


def node_name(settings: Settings) -> str:
    """``node.name`` (``SWITCHBOARD_NODE__NAME``), or host name and process id: this
    process among the nodes of a cluster."""
    return settings.node.name or f"{socket.gethostname()}-{os.getpid()}"


def store_for(
    settings: Settings, *, clock: Callable[[], float] = time.time, migrates: bool = True
) -> Store:
    """The gateway's store (not started). ``migrates=False``: for a command that reads or
    changes a few rows beside the gateway (``status``, ``pairing``, ``cron``, ``web``,
    ``doctor``), which refuses a store of an older schema rather than migrate it under the
    gateway of the older version that may be running on it."""
    url = settings.storage.database_url()
    # the SQLite file is copied before it is migrated; a database waits for its owner's
    # word that it is backed up (`switchboard upgrade --i-have-a-backup`) unless "auto"
    confirmed = url is None or settings.storage.migrate == "auto"
    return Store(
        settings.data_dir / SQLITE_FILE,
        url=url,
        synchronous=settings.storage.synchronous,
        clock=clock,
        node=node_name(settings) if settings.storage.database_url() else "",
        backups=settings.home / BACKUPS,
        migrate=migrates and confirmed,
        zone=zone(settings.timezone),
    )
