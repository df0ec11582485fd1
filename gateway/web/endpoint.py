"""Where the running gateway's web server listens, for the command line on the same machine.

``switchboard run`` writes ``data/web.json`` (``url``, ``pid``, ``version``) once the server
listens and removes it when it stops; the same application also listens on the Unix socket
``data/web.sock`` (:func:`socket_path`). ``switchboard status`` (and anything else of the
command line that talks to the running gateway's web API) calls it over that socket, where
the kernel says which user connected (gateway.web.access.security); the URL is what browsers and
sign-in links use. A crash can leave the files behind; the process lock
(``data/switchboard.lock``) says whether their writer still runs.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from gateway import __version__

ENDPOINT_FILE = "web.json"
SOCKET_FILE = "web.sock"


@dataclass(frozen=True, slots=True)
class WebEndpoint:
    url: str  # http://127.0.0.1:8787/ (a wildcard bind is written as 127.0.0.1)
    pid: int
    version: str


def socket_path(data_dir: Path) -> Path:
    return data_dir / SOCKET_FILE


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
