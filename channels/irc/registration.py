"""Registering an IRC connection: capabilities, SASL PLAIN, NICK and USER, another nick
while ours is taken, NickServ IDENTIFY where SASL was not possible; done at the welcome.

With ``password`` set the bot logs in to its account: by SASL PLAIN where the server offers
the ``sasl`` capability (before anything else happens on the connection), otherwise by
``PRIVMSG NickServ :IDENTIFY <account> <password>`` right after the welcome. A nick in use
(433) or refused (432, 436, 437) is tried again as ``nick_``, ``nick__``, then ``nick3`` ...;
mentions of the configured nick still count (convert.py), and the connection asks for it back
every minute (client.py).
"""

from __future__ import annotations

import asyncio
import base64
import logging
from enum import StrEnum

from channels.irc.protocol import Line, format_line, parse
from channels.irc.settings import IrcSettings

log = logging.getLogger(__name__)

MAX_NICK_TRIES = 9


class Refused(Exception):
    """The server refused the registration for good (a wrong SASL password, a ban)."""


class Sasl(StrEnum):
    OFF = "off"  # no password, or the server has no SASL: NickServ after the welcome
    PENDING = "pending"  # a password: asked for where the server offers it
    DONE = "done"


class Registration:
    """The client's side of registration, one server line at a time."""

    def __init__(self, settings: IrcSettings) -> None:
        self.settings = settings
        self.password = settings.password.get_secret_value() if settings.password else ""
        self.account = settings.username or settings.nick
        self.nick = settings.nick
        self.sasl = Sasl.PENDING if self.password else Sasl.OFF
        self.tries = 0
        self.out: list[str] = []  # lines to send

    def begin(self) -> None:
        self._send("CAP", "LS", "302")
        self._send("NICK", self.nick)
        self._send("USER", self.account, "0", "*", self.settings.realname)

    def handle(self, line: Line) -> bool:
        """Take one line from the server; True at the welcome (registered)."""
        command, params = line.command, line.params
        if command == "PING":
            self._send("PONG", *params[-1:])
        elif command == "CAP" and len(params) >= 3:
            self._capabilities(params[1], params[2], params[-1])
        elif command == "AUTHENTICATE" and params[:1] == ("+",):
            token = f"{self.account}\0{self.account}\0{self.password}".encode()
            self._send("AUTHENTICATE", base64.b64encode(token).decode())
        elif command in ("903", "907"):
            self.sasl = Sasl.DONE
            self._send("CAP", "END")
        elif command in ("902", "904", "905", "906"):
            raise Refused(
                f"the server refused the SASL login of {self.account} ({command}: "
                f"{params[-1]}); check SWITCHBOARD_IRC__PASSWORD and irc.username"
            )
        elif command in ("432", "433", "436", "437"):
            self._another_nick(command)
        elif command in ("463", "464", "465"):
            raise Refused(f"the server refused the connection ({command}: {params[-1]})")
        elif command == "ERROR":
            raise ConnectionError(params[-1] if params else "ERROR during registration")
        elif command == "001":
            self.nick = params[0] if params else self.nick
            if self.password and self.sasl is not Sasl.DONE:
                self._send("PRIVMSG", "NickServ", f"IDENTIFY {self.account} {self.password}")
            return True
        return False

    def _capabilities(self, verb: str, more: str, listed: str) -> None:
        if verb == "LS" and more != "*":  # "*": more of the list follows
            offered = {cap.split("=", 1)[0] for cap in listed.split()}
            if self.sasl is Sasl.PENDING and "sasl" in offered:
                self._send("CAP", "REQ", "sasl")
                return
            self.sasl = Sasl.OFF if self.sasl is Sasl.PENDING else self.sasl
            self._send("CAP", "END")
        elif verb == "ACK" and "sasl" in listed.split():
            self._send("AUTHENTICATE", "PLAIN")
        elif verb in ("ACK", "NAK"):
            self.sasl = Sasl.OFF
            self._send("CAP", "END")

    def _another_nick(self, code: str) -> None:
        if self.tries >= MAX_NICK_TRIES:
            raise Refused(f"no nick like {self.settings.nick} is available ({code})")
        self.tries += 1
        base = self.settings.nick
        self.nick = (
            f"{base[:28]}{'_' * self.tries}" if self.tries < 3 else f"{base[:26]}{self.tries}"
        )
        log.warning("irc: the nick %s is not available (%s); trying %s", base, code, self.nick)
        self._send("NICK", self.nick)

    def _send(self, *parts: str) -> None:
        self.out.append(format_line(*parts))


async def register(
    settings: IrcSettings, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> str:
    """Register the connection; returns the nick it got. Raises :class:`Refused` for a
    refusal for good, ``ConnectionError`` when the server hangs up."""
    registration = Registration(settings)
    registration.begin()
    while True:
        for text in registration.out:
            writer.write(text.encode() + b"\r\n")
        registration.out.clear()
        await writer.drain()
        raw = await reader.readline()
        if not raw:
            raise ConnectionError("the server closed the connection during registration")
        line = parse(raw.decode("utf-8", "replace"))
        if line is not None and registration.handle(line):
            for text in registration.out:
                writer.write(text.encode() + b"\r\n")
            await writer.drain()
            return registration.nick
