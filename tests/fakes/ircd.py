"""A real IRC server for the IRC tests: ngIRCd (Debian's ``ngircd``) in the foreground, with a
generated configuration on free ports (plain and TLS, a trustme certificate), and people who
talk to it over plain sockets as any client would.

ngIRCd throttles a client that sends fast (it reads about two lines a second past a short
burst) rather than disconnecting it; the tests measure our own pacing on the receiving side.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import trustme

from tests.fakes.mailservers import free_port, terminate, wait_port
from tests.system import missing

NGIRCD = shutil.which("ngircd") or "/usr/sbin/ngircd"
CONFIG = """\
[Global]
    Name = irc.switchboard.test
    Info = Switchboard test server
    AdminInfo1 = tests
    AdminInfo2 = here
    AdminEMail = tests@example.test
    Listen = 127.0.0.1
    Ports = {port}
[Limits]
    MaxNickLength = 30
    PingTimeout = 120
    PongTimeout = 20
[Options]
    DNS = no
    Ident = no
    PAM = no
[SSL]
    CertFile = {dir}/cert.pem
    KeyFile = {dir}/key.pem
    Ports = {tls_port}
"""


def missing_ngircd() -> str | None:
    if not Path(NGIRCD).exists():
        return "ngircd is not installed " + missing("ngircd")
    return None


class Ircd:
    """One ngIRCd; :meth:`restart` stops it and starts it again on the same ports."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder
        self.port = free_port()
        self.tls_port = free_port()
        self.ca = trustme.CA()
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> Ircd:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o755)  # ngIRCd runs as nobody once started
        cert = self.ca.issue_cert("127.0.0.1", "localhost")
        cert.private_key_pem.write_to_path(str(self.dir / "key.pem"))
        cert.cert_chain_pems[0].write_to_path(str(self.dir / "cert.pem"))
        self.ca.cert_pem.write_to_path(str(self.dir / "ca.pem"))
        (self.dir / "ngircd.conf").write_text(
            CONFIG.format(port=self.port, tls_port=self.tls_port, dir=self.dir)
        )
        self._process = subprocess.Popen(
            [NGIRCD, "--nodaemon", "--config", str(self.dir / "ngircd.conf")],
            stdout=(self.dir / "ngircd.log").open("ab"),
            stderr=subprocess.STDOUT,
        )
        wait_port(self.port, self._process)
        wait_port(self.tls_port, self._process)
        return self

    def stop(self) -> None:
        if self._process is not None:
            terminate(self._process)
            self._process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def ca_file(self) -> Path:
        return self.dir / "ca.pem"


@dataclass
class Heard:
    source: str
    target: str
    text: str
    at: float  # monotonic


@dataclass
class Person:
    """Someone on the server, on a plain socket: what they hear is kept, in order."""

    nick: str
    port: int
    user: str = ""  # the USER name (the server shows it as ~user): the nick unless given
    heard: list[Heard] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    _reader: asyncio.StreamReader | None = None
    _writer: asyncio.StreamWriter | None = None
    _task: asyncio.Task[None] | None = None
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def connect(self, *channels: str) -> Person:
        self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.send(f"NICK {self.nick}", f"USER {self.user or self.nick} 0 * :{self.nick}")
        self._task = asyncio.create_task(self._listen())
        await self.wait_for(lambda: any(f" 001 {self.nick} " in line for line in self.lines))
        for channel in channels:
            self.send(f"JOIN {channel}")
            joined = f" 366 {self.nick} {channel} "
            await self.wait_for(lambda j=joined: any(j in line for line in self.lines))
        return self

    def send(self, *lines: str) -> None:
        assert self._writer is not None
        for line in lines:
            self._writer.write(line.encode() + b"\r\n")

    async def say(self, target: str, text: str) -> None:
        self.send(f"PRIVMSG {target} :{text}")
        assert self._writer is not None
        await self._writer.drain()

    def texts(self, target: str | None = None, *, source: str = "") -> list[str]:
        return [
            h.text
            for h in self.heard
            if (target is None or h.target.lower() == target.lower())
            and h.source.split("!")[0].lower().startswith(source.lower())
        ]

    async def wait_for(self, check: object, timeout: float = 30.0) -> None:
        async def reached() -> None:
            async with self._changed:
                await self._changed.wait_for(check)  # type: ignore[arg-type]

        await asyncio.wait_for(reached(), timeout)

    async def close(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(OSError, RuntimeError):
                self._writer.write(b"QUIT :bye\r\n")
                await self._writer.drain()
            self._writer.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _listen(self) -> None:
        assert self._reader is not None
        while raw := await self._reader.readline():
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line.startswith("PING"):
                self.send("PONG" + line[4:])
            parts = line.split(" ", 3)
            async with self._changed:
                self.lines.append(line)
                if len(parts) == 4 and parts[1] == "PRIVMSG":
                    text = parts[3][1:] if parts[3].startswith(":") else parts[3]
                    self.heard.append(Heard(parts[0][1:], parts[2], text, time.monotonic()))
                self._changed.notify_all()
        async with self._changed:
            self.lines.append("(closed)")
            self._changed.notify_all()
