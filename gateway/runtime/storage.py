"""The store a configuration names: the SQLite file in its data directory, or the
PostgreSQL database of ``storage.url``."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

from gateway.config.settings import Settings
from gateway.store import Store

SQLITE_FILE = "switchboard.db"
BACKUPS = "backups"  # in the home: copies of the store made before migrations


def node_name(settings: Settings) -> str:
    """``node.name`` (``SWITCHBOARD_NODE__NAME``), or host name and process id: this
    process among the nodes of a cluster."""
    return settings.node.name or f"{socket.gethostname()}-{os.getpid()}"


def store_for(settings: Settings, *, clock: Callable[[], float] = time.time) -> Store:
    """The gateway's store (not started)."""
    return Store(
        settings.data_dir / SQLITE_FILE,
        url=settings.storage.database_url(),
        synchronous=settings.storage.synchronous,
        clock=clock,
        node=node_name(settings) if settings.storage.database_url() else "",
        backups=settings.home / BACKUPS,
        migrate=settings.storage.migrate == "auto",
    )
