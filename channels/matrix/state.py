"""The device id a password login got, kept in ``<data_dir>/channels/matrix.json`` (0600).

A password login without a device id makes the homeserver create a new device every time;
remembering the first one keeps the bot one device across restarts (and keeps the
transaction ids of a retried send meaningful: the homeserver deduplicates per device).
The access token itself is never written here; the sync position is in the store.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from gateway.core.system.fileutil import write_atomic

log = logging.getLogger(__name__)


class DeviceFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def device_id(self) -> str | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", self.path, exc)
            return None
        value = data.get("device_id") if isinstance(data, dict) else None
        return value if isinstance(value, str) and value else None

    def remember(self, device_id: str) -> None:
        if device_id and device_id != self.device_id():
            write_atomic(self.path, json.dumps({"device_id": device_id}), mode=0o600)
