"""One IMAP connection with the mailbox selected, over aioimaplib: the channel's only I/O seam.

Raw aioimaplib responses are parsed here so the adapter deals in UIDs and bytes. Two
server quirks shape it: a selected mailbox sees new mail only at a sync point (Dovecot),
so every poll starts with NOOP; and ``UID n:*`` always returns the highest UID even when it
is below ``n``, so callers filter.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import re
import ssl
from collections.abc import Sequence
from typing import Any

from aioimaplib import aioimaplib  # type: ignore[import-untyped]

from channels.email.settings import EmailSettings
from gateway.core.errors import ChannelError

log = logging.getLogger(__name__)

_UIDVALIDITY = re.compile(rb"UIDVALIDITY (\d+)")
_SIZE = re.compile(rb"RFC822\.SIZE (\d+)")


class ImapError(ChannelError):
    """The mailbox could not be read; the channel reconnects with backoff."""


class ImapAuthError(ImapError):
    """The server refused the login."""


# Failures of the connection rather than of one message: the channel reconnects.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    ImapError,
    OSError,
    TimeoutError,
    aioimaplib.AioImapException,
)


def parse_uidvalidity(lines: Sequence[Any]) -> int | None:
    for line in lines:
        if isinstance(line, bytes | bytearray):
            match = _UIDVALIDITY.search(line)
            if match:
                return int(match.group(1))
    return None


def parse_search(lines: Sequence[Any]) -> list[int]:
    """UIDs from a (UID) SEARCH response (aioimaplib strips the ``* SEARCH`` prefix)."""
    if not lines or not isinstance(lines[0], bytes | bytearray):
        return []
    return [int(token) for token in bytes(lines[0]).split() if token.isdigit()]


def parse_fetch(lines: Sequence[Any]) -> tuple[bytes, int | None] | None:
    """(the fetched literal, RFC822.SIZE if asked) or None when the message is gone."""
    literal: bytes | None = None
    size: int | None = None
    for line in lines:
        if isinstance(line, bytearray) and literal is None:
            literal = bytes(line)
        elif isinstance(line, bytes) and size is None:
            match = _SIZE.search(line)
            if match:
                size = int(match.group(1))
    return None if literal is None else (literal, size)


def _quoted(mailbox: str) -> str:
    escaped = mailbox.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ImapSession:
    """A logged-in connection with ``settings.imap_mailbox`` selected."""

    def __init__(self, client: Any, uidvalidity: int | None, lost: asyncio.Future[None]) -> None:
        self._client = client
        self.uidvalidity = uidvalidity
        self._lost = lost
        self.mailbox = ""

    @classmethod
    async def open(cls, settings: EmailSettings, *, mailbox: str | None = None) -> ImapSession:
        """Log in and select ``mailbox`` (default: ``settings.imap_mailbox``)."""
        host = settings.imap_host or ""
        password = settings.imap_password.get_secret_value() if settings.imap_password else ""
        context: ssl.SSLContext | None = None
        if settings.imap_tls:
            context = await asyncio.to_thread(
                ssl.create_default_context, cafile=settings.imap_ca_file
            )
        elif password and not _is_loopback(host):
            raise ImapAuthError(
                f"refusing to send the IMAP password to {host} unencrypted; set email.imap_tls"
            )
        loop = asyncio.get_running_loop()
        lost: asyncio.Future[None] = loop.create_future()

        def on_lost(exc: Exception | None) -> None:
            if not lost.done():
                lost.set_result(None)

        client = aioimaplib.IMAP4(
            host,
            settings.imap_port,
            timeout=settings.imap_timeout_seconds,
            conn_lost_cb=on_lost,
            ssl_context=context,
        )
        session = cls(client, None, lost)
        try:
            await session._login_and_select(settings, password, mailbox or settings.imap_mailbox)
        except BaseException:
            await session.close()
            raise
        return session

    async def _login_and_select(self, settings: EmailSettings, password: str, mailbox: str) -> None:
        client = self._client
        await client.wait_hello_from_server()
        response = await client.login(settings.imap_username, password)
        if response.result != "OK":
            raise ImapAuthError(
                f"the IMAP server refused the login for {settings.imap_username!r}: "
                f"{_text(response)}"
            )
        response = await client.select(_quoted(mailbox))
        if response.result != "OK" and mailbox != settings.imap_mailbox:
            await client.create(_quoted(mailbox))  # a folder of ours (sent_folder): made once
            response = await client.select(_quoted(mailbox))
        if response.result != "OK":
            raise ImapError(f"cannot open mailbox {mailbox!r}: {_text(response)}")
        self.uidvalidity = parse_uidvalidity(response.lines)
        self.mailbox = mailbox

    @property
    def supports_idle(self) -> bool:
        return bool(self._client.has_capability("IDLE"))

    def _alive(self) -> Any:
        """The client, or ImapError at once if the server hung up (aioimaplib would wait
        for its timeout)."""
        if self._lost.done():
            raise ImapError("the IMAP connection was lost")
        return self._client

    @staticmethod
    def _ok(response: Any, what: str) -> Any:
        if response.result != "OK":
            raise ImapError(f"IMAP {what} failed: {_text(response)}")
        return response

    async def new_uids(self, after: int) -> list[int]:
        """UIDs above ``after`` (all unseen mail when ``after`` is 0), ascending."""
        self._ok(await self._alive().noop(), "NOOP")
        criteria = ("UID", f"{after + 1}:*") if after else ("UNSEEN",)
        response = self._ok(await self._alive().uid_search(*criteria), "SEARCH")
        return sorted(uid for uid in set(parse_search(response.lines)) if uid > after)

    async def fetch_header(self, uid: int) -> tuple[bytes, int | None] | None:
        response = await self._alive().uid("fetch", str(uid), "(UID RFC822.SIZE BODY.PEEK[HEADER])")
        return parse_fetch((self._ok(response, "FETCH")).lines)

    async def fetch_message(self, uid: int) -> bytes | None:
        response = await self._alive().uid("fetch", str(uid), "(UID BODY.PEEK[])")
        fetched = parse_fetch((self._ok(response, "FETCH")).lines)
        return None if fetched is None else fetched[0]

    async def holds_message_id(self, message_id: str) -> bool:
        """Whether the selected mailbox has a message with this Message-ID header."""
        self._ok(await self._alive().noop(), "NOOP")
        quoted = _quoted(message_id)
        response = self._ok(
            await self._alive().uid_search("HEADER", "Message-ID", quoted), "SEARCH"
        )
        return bool(parse_search(response.lines))

    async def append(self, raw: bytes) -> None:
        """File a message in the selected mailbox, marked as read."""
        response = await self._alive().append(raw, mailbox=_quoted(self.mailbox), flags=r"(\Seen)")
        self._ok(response, "APPEND")

    async def mark_seen(self, uid: int) -> None:
        response = await self._alive().uid("store", str(uid), "+FLAGS.SILENT", r"(\Seen)")
        self._ok(response, "STORE")

    async def wait_for_mail(self, stop: asyncio.Event, *, renew: float) -> None:
        """Return when the server reports a change, ``renew`` passed, or ``stop`` is set."""
        idle = await self._alive().idle_start(timeout=renew)
        push = asyncio.ensure_future(self._client.wait_server_push(timeout=renew + 5))
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({push, stopped, self._lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            push.cancel()
            stopped.cancel()
        if self._lost.done():
            raise ImapError("the IMAP connection was lost")
        self._client.idle_done()
        await asyncio.wait_for(idle, self._client.timeout)

    async def close(self) -> None:
        """Log out politely if possible; never raise."""
        client = self._client
        try:
            if not self._lost.done() and client.get_state() in ("AUTH", "SELECTED"):
                if client.has_pending_idle():
                    client.idle_done()
                await asyncio.wait_for(client.logout(), 2)
        except Exception as exc:  # closing a broken connection is best effort
            log.debug("IMAP logout failed: %s", exc)
        transport = getattr(client.protocol, "transport", None)
        if transport is not None:
            transport.close()
        with contextlib.suppress(Exception):
            client._client_task.cancel()


def _text(response: Any) -> str:
    parts = [
        bytes(line).decode("utf-8", "replace")
        for line in response.lines
        if isinstance(line, bytes | bytearray)
    ]
    return " ".join(parts)[:300] or response.result
