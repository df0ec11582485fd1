"""A real CalDAV server for the calendar tests: Radicale from PyPI (the ``radicale`` dev
dependency), bound to 127.0.0.1 on a free port, one user in a plain htpasswd file, its
storage in the test's own directory.

Each test starts its own (about half a second). :meth:`Radicale.calendar` makes a calendar;
:meth:`Radicale.put` stores an event the way another client (or an invitation) would;
:meth:`Radicale.stored` reads back what the server holds, :meth:`Radicale.item` one object
as the server serves it. Radicale does no scheduling (RFC 6638); ``start_radicale(dav=…)``
makes it name other features in its DAV header (Radicale's ``[headers]`` setting), so a
test can see what a client does with a server that says it schedules. Without Radicale
the calendar tests skip, saying so; under CI (``CI`` set) they fail instead.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from icalendar import Calendar, Event

START_TIMEOUT = 30.0
USER, PASSWORD = "alice@example.org", "calendar-secret-1"


@dataclass
class Radicale:
    url: str  # the server's root, ending in "/"
    directory: Path
    user: str = USER
    password: str = PASSWORD

    def settings(self, **overrides: object) -> dict[str, object]:
        """A ``[calendar]`` section for this server (its root: calendars are discovered)."""
        return {"url": self.url, "username": self.user, "password": self.password, **overrides}

    def calendar(self, name: str, display: str = "") -> str:
        """A new calendar of events; returns its address."""
        url = f"{self.url}{self.user}/{name}/"
        prop = f"<d:displayname>{display}</d:displayname>" if display else ""
        body = (
            '<?xml version="1.0"?><c:mkcalendar xmlns:d="DAV:" '
            'xmlns:c="urn:ietf:params:xml:ns:caldav"><d:set><d:prop>'
            f'{prop}<c:supported-calendar-component-set><c:comp name="VEVENT"/>'
            "</c:supported-calendar-component-set></d:prop></d:set></c:mkcalendar>"
        )
        self._call("MKCALENDAR", url, body.encode(), "application/xml")
        return url

    def put(self, calendar: str, uid: str, ical: str) -> None:
        """Store an event as another client would (an invitation that arrived)."""
        self._call("PUT", f"{calendar}{uid}.ics", ical.encode(), "text/calendar")

    def item(self, calendar: str, uid: str) -> str:
        """The object ``uid`` as another client would download it (stored as ``<uid>.ics``)."""
        return self._call("GET", f"{calendar}{uid}.ics", None, None)

    def stored(self, calendar: str) -> list[Event]:
        """Every event the calendar holds now."""
        text = self._call("GET", calendar, None, None)
        if not text.strip():
            return []
        return [e for e in Calendar.from_ical(text).walk("VEVENT") if isinstance(e, Event)]

    def _call(self, method: str, url: str, body: bytes | None, kind: str | None) -> str:
        login = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        headers = {"Authorization": f"Basic {login}"} | ({"Content-Type": kind} if kind else {})
        request = urllib.request.Request(url, data=body, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=10) as response:
            return str(response.read().decode())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"Radicale exited with {process.returncode}: {log.read_text()[-2000:]}"
            )
        try:
            with urllib.request.urlopen(url + ".web/", timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.05)  # polling a starting process: the bound above ends the wait
    raise RuntimeError(f"Radicale did not answer within {START_TIMEOUT:g} s")


@contextmanager
def start_radicale(directory: Path, *, dav: str = "") -> Iterator[Radicale]:
    """Radicale serving ``directory``; ``dav``: the DAV header it sends instead of its own."""
    try:
        import radicale  # noqa: F401
    except ImportError:
        problem = "Radicale is not installed (the radicale dev dependency: pip install -e '.[dev]')"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the calendar tests: {problem}")
        pytest.skip(problem)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "users").write_text(f"{USER}:{PASSWORD}\n")
    port = _free_port()
    config = directory / "config"
    config.write_text(
        f"[server]\nhosts = 127.0.0.1:{port}\n"
        f"[auth]\ntype = htpasswd\nhtpasswd_filename = {directory / 'users'}\n"
        "htpasswd_encryption = plain\n"
        f"[storage]\nfilesystem_folder = {directory / 'collections'}\n"
        "[logging]\nlevel = warning\n" + (f"[headers]\nDAV = {dav}\n" if dav else "")
    )
    log = directory / "radicale.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "radicale", "--config", str(config)],
            cwd=directory, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_ready(url, process, log)
        yield Radicale(url, directory)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
