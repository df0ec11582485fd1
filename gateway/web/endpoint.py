"""Where the running gateway's web server listens, for the command line on the same machine.

``switchboard run`` writes ``data/web.json`` (``url``, ``pid``, ``version``) once the server
listens and removes it when it stops. ``switchboard status`` (and anything else that talks
to the running gateway, like an attached terminal chat) reads it, then calls the loopback
API with the same credentials as a browser: none on a loopback bind without ``web.token``
(the server recognises the gateway's own uid by the connection, gateway.web.peer), else
``Authorization: Bearer <web.token>``. A crash can leave the file behind; the process
lock (``data/switchboard.lock``) says whether its writer still runs.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from gateway import __version__

ENDPOINT_FILE = "web.json"


@dataclass(frozen=True, slots=True)
class WebEndpoint:
    url: str  # http://127.0.0.1:8787/ (a wildcard bind is written as 127.0.0.1)
    pid: int
    version: str


def write_endpoint(data_dir: Path, url: str) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / ENDPOINT_FILE
    temporary = path.with_suffix(".tmp")
    temporary.write_text(
        json.dumps({"url": url, "pid": os.getpid(), "version": __version__}), encoding="utf-8"
    )
    temporary.chmod(0o600)
    temporary.replace(path)


def remove_endpoint(data_dir: Path) -> None:
    path = data_dir / ENDPOINT_FILE
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()


def read_endpoint(data_dir: Path) -> WebEndpoint | None:
    try:
        data = json.loads((data_dir / ENDPOINT_FILE).read_text(encoding="utf-8"))
        return WebEndpoint(str(data["url"]), int(data["pid"]), str(data.get("version", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
