"""A real Matrix homeserver for the Matrix tests: Synapse from PyPI (the ``matrix-synapse``
dev dependency), SQLite, registration open, bound to 127.0.0.1 on a free port.

One server per test session (each xdist worker has its own); its config is generated once
(``--generate-config``, about a second) and then edited: no federation, no key servers, no
rate limits, registration without verification. Tests isolate themselves by registering
users of their own (:meth:`Homeserver.register`). Without Synapse installed the Matrix tests
skip, saying so; under CI (``CI`` set) they fail instead.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

START_TIMEOUT = 60.0
UNLIMITED = {"per_second": 10_000, "burst_count": 10_000}
EXTRA_CONFIG = {
    "enable_registration": True,
    "enable_registration_without_verification": True,
    "suppress_key_server_warning": True,
    "trusted_key_servers": [],
    "federation_domain_whitelist": [],
    "presence": {"enabled": False},
    "url_preview_enabled": False,
    "rc_message": UNLIMITED,
    "rc_registration": UNLIMITED,
    "rc_login": {"address": UNLIMITED, "account": UNLIMITED, "failed_attempts": UNLIMITED},
    "rc_joins": {"local": UNLIMITED, "remote": UNLIMITED},
    "rc_invites": {"per_room": UNLIMITED, "per_user": UNLIMITED, "per_issuer": UNLIMITED},
    "rc_room_creation": UNLIMITED,
    "rc_media_create": UNLIMITED,
}


@dataclass(frozen=True)
class Account:
    user_id: str
    access_token: str
    device_id: str
    password: str


@dataclass
class Homeserver:
    url: str
    directory: Path

    def register(self, name: str = "user") -> Account:
        """A new user with a unique name (``@<name>-<random>:localhost``)."""
        username = f"{name}-{uuid.uuid4().hex[:8]}"
        password = f"pw-{uuid.uuid4().hex}"
        data = self.call(
            "POST",
            "/_matrix/client/v3/register",
            {"username": username, "password": password, "auth": {"type": "m.login.dummy"}},
        )
        return Account(data["user_id"], data["access_token"], data["device_id"], password)

    def call(
        self, method: str, path: str, body: dict[str, Any] | None = None, token: str | None = None
    ) -> dict[str, Any]:
        request = urllib.request.Request(
            self.url + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json"}
            | ({"Authorization": f"Bearer {token}"} if token else {}),
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            result: dict[str, Any] = json.loads(response.read() or b"{}")
            return result


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _configure(directory: Path, port: int) -> Path:
    import yaml

    config = directory / "homeserver.yaml"
    subprocess.run(
        [
            sys.executable, "-m", "synapse.app.homeserver", "--server-name", "localhost",
            "--config-path", str(config), "--generate-config", "--report-stats=no",
            "--data-directory", str(directory),
        ],
        check=True, capture_output=True, timeout=120, cwd=directory,
    )  # fmt: skip
    settings = yaml.safe_load(config.read_text())
    settings["listeners"] = [
        {
            "port": port,
            "bind_addresses": ["127.0.0.1"],
            "type": "http",
            "tls": False,
            "x_forwarded": False,
            "resources": [{"names": ["client"], "compress": False}],
        }
    ]
    settings.update(EXTRA_CONFIG)
    config.write_text(yaml.safe_dump(settings))
    return config


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"Synapse exited with {process.returncode}: {log.read_text()[-2000:]}"
            )
        try:
            with urllib.request.urlopen(f"{url}/_matrix/client/versions", timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.1)  # polling a starting process: the bound above ends the wait
    raise RuntimeError(f"Synapse did not answer within {START_TIMEOUT:g} s")


@contextmanager
def start_homeserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Homeserver]:
    try:
        import synapse  # noqa: F401
    except ImportError:
        problem = (
            "Synapse is not installed (the matrix-synapse dev dependency: pip install -e '.[dev]')"
        )
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the Matrix tests: {problem}")
        pytest.skip(problem)
    directory = tmp_path_factory.mktemp("synapse")
    port = _free_port()
    config = _configure(directory, port)
    log = directory / "stdout.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "synapse.app.homeserver", "--config-path", str(config)],
            cwd=directory, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, log)
        yield Homeserver(url, directory)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
