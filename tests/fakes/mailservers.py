"""Real mail servers for the email tests.

* :class:`SmtpSink` — aiosmtpd in the test's own loop: TLS (trustme), login, scripted faults.
* :class:`Dovecot` — a private Dovecot instance (IMAP + LMTP) in a temp dir, on free ports.
* :class:`OpenSMTPD` — the Debian MTA in the foreground, delivering to Dovecot over LMTP.
  Its queue and control socket are compiled in, so only one can run per machine: a file
  lock serialises the tests (also across pytest-xdist workers).
* :class:`Mailbox` — an aioimaplib reader that waits (IDLE, not sleeps) for mail to arrive.

Configs and pitfalls: shared docs "testing-against-local-servers.md", section 4.
"""

from __future__ import annotations

import asyncio
import contextlib
import email
import email.policy
import fcntl
import os
import shutil
import signal
import smtplib
import socket
import ssl
import subprocess
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
import trustme
from aioimaplib import aioimaplib
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from tests.fakes.holds import Hold, Holds
from tests.system import missing

SMTPD_LOCK = Path(tempfile.gettempdir()) / "switchboard-tests-opensmtpd.lock"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def missing_binaries() -> str | None:
    """Why the real-server tests cannot run here, or None."""
    for binary in ("dovecot", "smtpd"):
        if shutil.which(binary) is None and not Path(f"/usr/sbin/{binary}").exists():
            return f"{binary} is not installed " + missing(
                "dovecot-imapd", "dovecot-lmtpd", "opensmtpd"
            )
    if os.geteuid() != 0:
        return "Dovecot/OpenSMTPD tests need root (mail processes switch to uid nobody)"
    return None


def wait_port(port: int, process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Block until a freshly started server accepts connections (sync: fixtures start it)."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"port {port} did not open") from None
            time.sleep(0.02)  # the port is not open yet
            continue
        return


def terminate(process: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- aiosmtpd ------------------------------------------------------------------------------


@dataclass
class SmtpSink:
    """An in-process SMTP server that records what it accepts and can fail on purpose."""

    users: dict[str, str] = field(default_factory=dict)  # login -> password; empty: no AUTH
    tls: str = "none"  # "none" | "starttls" | "implicit"
    faults: deque[str] = field(default_factory=deque)  # replies to DATA, one per attempt
    received: list[EmailMessage] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)
    attempts: int = 0
    port: int = 0
    ca: trustme.CA = field(default_factory=trustme.CA)
    ca_file: str = ""
    # what a server that files sent mail itself (Gmail) does with a message it accepted
    on_accepted: Callable[[bytes], Awaitable[None]] | None = None
    holds: Holds = field(default_factory=Holds)  # DATA held open (tests/fakes/holds.py)

    def __post_init__(self) -> None:
        self._changed = asyncio.Condition()
        self._server: asyncio.base_events.Server | None = None

    def hold(self, *, deliver: bool) -> Hold:
        """Hold the next DATA: accepted (and filed) first, or never, then answered only
        once the test lets go."""
        return self.holds.add(deliver=deliver, matches=lambda facts: True)

    async def start(self, directory: Path) -> SmtpSink:
        server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert("127.0.0.1", "localhost").configure_cert(server_ctx)
        ca_path = directory / "smtp-ca.pem"
        self.ca.cert_pem.write_to_path(str(ca_path))
        self.ca_file = str(ca_path)
        loop = asyncio.get_running_loop()

        def factory() -> SMTP:
            return SMTP(
                self,
                hostname="localhost",
                tls_context=server_ctx if self.tls == "starttls" else None,
                require_starttls=self.tls == "starttls",
                authenticator=self._authenticate if self.users else None,
                auth_required=bool(self.users) and self.tls == "starttls",
                auth_require_tls=self.tls == "starttls",
                loop=loop,
            )

        self._server = await loop.create_server(
            factory, "127.0.0.1", 0, ssl=server_ctx if self.tls == "implicit" else None
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        self.holds.release_all()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        if isinstance(data, LoginPassword):
            login, password = data.login.decode(), data.password.decode()
            if self.users.get(login) == password:
                return AuthResult(success=True)
        # handled=False: aiosmtpd sends the 535 itself (True would leave the client hanging).
        return AuthResult(success=False, handled=False)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        self.attempts += 1
        if self.faults:
            return self.faults.popleft()
        held = self.holds.take({})
        if held is not None:
            return await Holds.serve(
                held, lambda: self._accept(envelope), lambda: "451 4.3.0 held, never accepted"
            )
        return await self._accept(envelope)

    async def _accept(self, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        message = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        if self.on_accepted is not None:
            await self.on_accepted(raw)
        async with self._changed:
            self.received.append(message)
            self.envelopes.append((str(envelope.mail_from), list(envelope.rcpt_tos)))
            self._changed.notify_all()
        return "250 2.0.0 OK queued"

    async def wait_for(self, count: int, timeout: float = 10.0) -> list[EmailMessage]:
        async def reached() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self.received) >= count)

        await asyncio.wait_for(reached(), timeout)
        return self.received


# -- Dovecot -------------------------------------------------------------------------------

DOVECOT_CONF = """\
instance_name = dovecot-test-{imap_port}
base_dir = {dir}/run
state_dir = {dir}/state
log_path = {dir}/dovecot.log
protocols = imap lmtp
listen = 127.0.0.1
ssl = yes
ssl_cert = <{dir}/cert.pem
ssl_key = <{dir}/key.pem
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:{dir}/mail/%u
passdb {{
  driver = static
  args = password={password}
}}
userdb {{
  driver = static
  args = uid=65534 gid=65534 home={dir}/mail/%u allow_all_users=yes
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap_port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps_port}
    ssl = yes
  }}
}}
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {lmtp_port}
  }}
}}
service stats {{
  unix_listener stats-reader {{
    mode = 0666
  }}
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
protocol lmtp {{
  postmaster_address = postmaster@example.test
}}
protocol imap {{
  imap_idle_notify_interval = 1 secs
}}
"""


class Dovecot:
    """IMAP + LMTP in a throw-away directory. Every ``...@example.test`` account exists and
    logs in with :attr:`password`, so tests take fresh accounts without reconfiguring."""

    password = "secret"

    def __init__(self) -> None:
        self.imap_port = 0
        self.imaps_port = 0
        self.lmtp_port = 0
        self.ca = trustme.CA()
        self.dir = Path()
        self._accounts = 0
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> Dovecot:
        # Mail processes run as nobody: every parent dir must be traversable (not tmp_path).
        self.dir = Path(tempfile.mkdtemp(prefix="sb-dovecot-"))
        self.dir.chmod(0o755)
        for sub in ("run", "state", "mail"):
            (self.dir / sub).mkdir()
        os.chown(self.dir / "mail", 65534, 65534)
        self.imap_port, self.imaps_port, self.lmtp_port = free_port(), free_port(), free_port()
        # IMAPS with a throw-away CA; clients trust it through ``ca_file``.
        cert = self.ca.issue_cert("127.0.0.1", "localhost")
        cert.private_key_pem.write_to_path(str(self.dir / "key.pem"))
        cert.cert_chain_pems[0].write_to_path(str(self.dir / "cert.pem"))
        self.ca.cert_pem.write_to_path(self.ca_file)
        conf = self.dir / "dovecot.conf"
        conf.write_text(
            DOVECOT_CONF.format(
                dir=self.dir,
                imap_port=self.imap_port,
                imaps_port=self.imaps_port,
                lmtp_port=self.lmtp_port,
                password=self.password,
            )
        )
        self._launch()
        return self

    def _launch(self) -> None:
        self._process = subprocess.Popen(
            ["dovecot", "-F", "-c", str(self.dir / "dovecot.conf")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: restart() ends the whole tree
        )
        for port in (self.imap_port, self.imaps_port, self.lmtp_port):
            wait_port(port, self._process)

    def restart(self) -> None:
        """Stop the server and its logged-in sessions (which outlive the master otherwise),
        so every client connection drops; start it again with the mail kept."""
        if self._process is not None:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
        self._launch()

    @property
    def ca_file(self) -> str:
        return str(self.dir / "ca.pem")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)  # throw-away data: no clean shutdown
            self._process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def add_user(self, prefix: str) -> str:
        """A fresh, empty account."""
        self._accounts += 1
        return f"{prefix}-{self._accounts}-{uuid.uuid4().hex[:6]}@example.test"

    async def deliver(self, message: EmailMessage | bytes, to: str, mail_from: str = "") -> None:
        """Hand a message to the mailbox of ``to`` over LMTP (as an MTA would)."""

        def send() -> None:
            with smtplib.LMTP("127.0.0.1", self.lmtp_port) as lmtp:
                raw = message if isinstance(message, bytes) else message.as_bytes()
                sender = mail_from
                if not sender and isinstance(message, EmailMessage):
                    sender = email.utils.parseaddr(str(message.get("From", "")))[1]
                lmtp.sendmail(sender, [to], raw)

        await asyncio.to_thread(send)

    def mailbox(self, user: str, folder: str = "INBOX") -> Mailbox:
        return Mailbox("127.0.0.1", self.imap_port, user, self.password, folder)

    async def file(self, user: str, folder: str, raw: bytes) -> None:
        """Put a message in one of ``user``'s folders (made if missing), as a mail server
        filing what it sent does."""
        imap = aioimaplib.IMAP4("127.0.0.1", self.imap_port, timeout=5)
        await imap.wait_hello_from_server()
        assert (await imap.login(user, self.password)).result == "OK"
        await imap.create(folder)  # refused if it exists: fine
        assert (await imap.append(raw, mailbox=folder, flags="(\\Seen)")).result == "OK"
        await imap.logout()


# -- fixtures (import them into a test module) --------------------------------------------


@pytest.fixture(scope="module")
def dovecot() -> Iterator[Dovecot]:
    """One Dovecot per test module; each test takes fresh accounts with ``add_user``."""
    reason = missing_binaries()
    if reason:
        pytest.skip(reason)
    server = Dovecot().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def opensmtpd(dovecot: Dovecot) -> Iterator[OpenSMTPD]:
    server = OpenSMTPD(dovecot.lmtp_port).start()
    yield server
    server.stop()


# -- OpenSMTPD -----------------------------------------------------------------------------


class OpenSMTPD:
    """The Debian MTA relaying ``domain`` to Dovecot's LMTP; one per machine (file lock)."""

    def __init__(self, lmtp_port: int, domain: str = "example.test") -> None:
        self.lmtp_port = lmtp_port
        self.domain = domain
        self.port = 0
        self.dir = Path()
        self._process: subprocess.Popen[bytes] | None = None
        self._lock: int | None = None

    def start(self) -> OpenSMTPD:
        self._lock = os.open(SMTPD_LOCK, os.O_CREAT | os.O_RDWR, 0o666)
        fcntl.flock(self._lock, fcntl.LOCK_EX)  # another pytest worker may hold it for a while
        self.dir = Path(tempfile.mkdtemp(prefix="sb-smtpd-"))
        self.dir.chmod(0o755)
        (self.dir / "vusers").write_text(f"@{self.domain} nobody\n")
        self.port = free_port()
        conf = self.dir / "smtpd.conf"
        conf.write_text(
            f"table vusers file:{self.dir}/vusers\n"
            f"listen on 127.0.0.1 port {self.port}\n"
            f'action "to_dovecot" lmtp "127.0.0.1:{self.lmtp_port}" rcpt-to virtual <vusers>\n'
            f'match from any for domain "{self.domain}" action "to_dovecot"\n'
        )
        self._process = subprocess.Popen(
            ["smtpd", "-d", "-f", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(self.port, self._process)
        return self

    def stop(self) -> None:
        if self._process is not None:
            terminate(self._process)
        shutil.rmtree(self.dir, ignore_errors=True)
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            os.close(self._lock)
            self._lock = None


# -- reading a mailbox ---------------------------------------------------------------------


class Mailbox:
    """Reads one user's folder (INBOX) over IMAP; :meth:`wait_for` blocks on IDLE until mail
    arrives."""

    def __init__(
        self, host: str, port: int, user: str, password: str, folder: str = "INBOX"
    ) -> None:
        self.host, self.port, self.user, self.password = host, port, user, password
        self.folder = folder
        self._imap: aioimaplib.IMAP4 | None = None

    async def __aenter__(self) -> Mailbox:
        imap = aioimaplib.IMAP4(self.host, self.port, timeout=5)
        await imap.wait_hello_from_server()
        assert (await imap.login(self.user, self.password)).result == "OK"
        assert (await imap.select(self.folder)).result == "OK"
        self._imap = imap
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._imap is not None:
            with contextlib.suppress(Exception):
                await self._imap.logout()

    async def messages(self) -> list[tuple[EmailMessage, set[str]]]:
        """Every message with its flags, oldest first."""
        imap = self._imap
        assert imap is not None
        await imap.noop()
        result = await imap.uid_search("ALL")
        uids = [int(u) for u in result.lines[0].split() if u.isdigit()]
        out = []
        for uid in uids:
            fetched = await imap.uid("fetch", str(uid), "(FLAGS BODY.PEEK[])")
            raw = next(bytes(x) for x in fetched.lines if isinstance(x, bytearray))
            head = next(x for x in fetched.lines if isinstance(x, bytes) and b"FLAGS" in x)
            flags = set(head.split(b"FLAGS (", 1)[1].split(b")", 1)[0].decode().split())
            message = email.message_from_bytes(raw, policy=email.policy.default)
            assert isinstance(message, EmailMessage)
            out.append((message, flags))
        return out

    async def unsee_all(self) -> None:
        assert self._imap is not None
        await self._imap.store("1:*", "-FLAGS", "(\\Seen)")

    async def wait_for(
        self, predicate: Any, timeout: float = 15.0
    ) -> list[tuple[EmailMessage, set[str]]]:
        """Wait until ``predicate(messages)`` holds, woken by the server's IDLE pushes."""
        imap = self._imap
        assert imap is not None

        async def reached() -> list[tuple[EmailMessage, set[str]]]:
            while True:
                current = await self.messages()
                if predicate(current):
                    return current
                idle = await imap.idle_start(timeout=5)
                with contextlib.suppress(TimeoutError):
                    await imap.wait_server_push(timeout=5)
                imap.idle_done()
                await asyncio.wait_for(idle, 5)

        return await asyncio.wait_for(reached(), timeout)

    async def count(self, count: int, timeout: float = 15.0) -> list[EmailMessage]:
        found = await self.wait_for(lambda msgs: len(msgs) >= count, timeout)
        return [m for m, _ in found]
