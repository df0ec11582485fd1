"""A PostgreSQL server of a test's (or a benchmark's) own: ``initdb`` into a temporary
directory, its own port, started and stopped at will. For what the machine's shared server
cannot give: stopping it (tests/test_cluster_database.py), or counting every statement and
WAL byte of one gateway alone (bench/pg_turns.py). Binaries from /usr/lib/postgresql/*/bin;
run as the ``postgres`` user when this process is root (``initdb`` refuses root).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass
class OwnServer:
    """A PostgreSQL server of the test's own: its data directory, its port."""

    bin: Path
    data: Path
    port: int
    user: str | None  # run as this user (initdb refuses root)
    settings: tuple[str, ...] = ()  # more server settings, "name=value"

    @property
    def log(self) -> Path:
        return Path(f"{self.data}.log")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off"
        for setting in self.settings:
            options += f" -c {setting}"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


@contextlib.contextmanager
def own_server(*settings: str) -> Iterator[OwnServer]:
    """A fresh server, started; removed afterwards (``RuntimeError`` without binaries)."""
    bin_dir = binaries()
    if bin_dir is None:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
    root = Path(tempfile.mkdtemp(prefix="switchboard-pg-"))
    user = "postgres" if os.geteuid() == 0 else None
    if user is not None:
        shutil.chown(root, user)
    server = OwnServer(bin_dir, root / "data", free_port(), user, settings)
    try:
        server._run("initdb", "-D", str(server.data), "-U", "postgres", "--auth=trust")
        server.start()
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            server._run("pg_ctl", "-D", str(server.data), "-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)
