"""Outgoing email: address checks, MIME building and one SMTP delivery (aiosmtplib).

Both the agent's ``send_email`` tool and the email channel send mail, and agent/ and
channels/ may not import each other, so the shared part lives here. :func:`deliver` makes
exactly one attempt and classifies every failure into a typed error; it never retries. The
tool retries a definite 4xx a few times within the call, the channel leaves retrying to the
outbox. Message-IDs are derived from an idempotency key, so a message that is sent twice
after an ambiguous failure carries the same id and mail clients show it once.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import mimetypes
import re
import ssl
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, formataddr, getaddresses
from pathlib import PurePath
from typing import Literal, Protocol

import aiosmtplib
from pydantic import SecretStr

from gateway.core.errors import SwitchboardError
from gateway.core.system.mail_body import render_html, render_text

__all__ = [
    "MailAuthError",
    "MailError",
    "MailFile",
    "MailPermanentError",
    "MailTransientError",
    "build_message",
    "deliver",
    "message_id_for",
    "normalize_address",
    "parse_addresses",
    "sent_by_us",
    "sent_name",
    "stored_name",
]

# A conservative addr-spec: dot-atom local part, a domain with at least one dot. Quoted local
# parts and IP literals are refused: the bot never needs them and they hide tricks.
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
ADDRESS_RE = re.compile(rf"{_ATOM}(?:\.{_ATOM})*@{_LABEL}(?:\.{_LABEL})+")
_FULL_ADDRESS = re.compile(rf"^{ADDRESS_RE.pattern}$")
_OUR_ID = re.compile(r"<[0-9a-f]{32}\.switchboard@([^<>\s]+)>")


class SmtpSettings(Protocol):
    """What sending needs of the configuration (``[email]``: channels/email/plugin.py)."""

    @property
    def smtp_host(self) -> str | None: ...
    @property
    def smtp_port(self) -> int: ...
    @property
    def smtp_username(self) -> str | None: ...
    @property
    def smtp_password(self) -> SecretStr | None: ...
    @property
    def smtp_starttls(self) -> bool: ...
    @property
    def smtp_tls(self) -> bool: ...
    @property
    def from_address(self) -> str | None: ...
    @property
    def smtp_timeout_seconds(self) -> float: ...
    @property
    def smtp_ca_file(self) -> str | None: ...


class SendMailSettings(SmtpSettings, Protocol):
    """What the agent's ``send_email`` tool needs besides the server: whom it may write to,
    how often, and how it retries (the section that configures sending provides it:
    :meth:`gateway.config.channels.ChannelSection.outgoing_mail`)."""

    @property
    def allowed_recipients(self) -> tuple[str, ...]: ...
    @property
    def user_addresses(self) -> dict[str, str]: ...
    @property
    def typed_recipients(self) -> Literal["admins", "everyone"]: ...
    @property
    def max_sends_per_day(self) -> int: ...
    @property
    def max_attachment_bytes(self) -> int: ...
    @property
    def smtp_retry_attempts(self) -> int: ...
    @property
    def smtp_retry_base_seconds(self) -> float: ...


class MailError(SwitchboardError):
    """Sending an email failed; the message is safe to show the user."""


class MailTransientError(MailError):
    """The server or network failed in a way that may pass (4xx, refused connection, timeout).

    ``maybe_sent`` is true when the failure came after the message may have been accepted
    (the connection dropped mid-session): retrying could deliver it twice.
    """

    def __init__(self, message: str, *, maybe_sent: bool = False) -> None:
        super().__init__(message)
        self.maybe_sent = maybe_sent


class MailPermanentError(MailError):
    """Retrying cannot help: a 5xx, a refused recipient, a TLS or configuration problem."""


class MailAuthError(MailPermanentError):
    """The SMTP server refused the login."""


@dataclass(frozen=True, slots=True)
class MailFile:
    """One attachment, already read (the caller decides where files may come from)."""

    filename: str
    data: bytes
    mime_type: str = ""

    @property
    def maintype_subtype(self) -> tuple[str, str]:
        guessed = self.mime_type or mimetypes.guess_type(self.filename)[0]
        maintype, _, subtype = (guessed or "application/octet-stream").partition("/")
        return maintype, subtype or "octet-stream"


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    """What the server said: ``refused`` maps each recipient it did not take to its reply."""

    accepted: tuple[str, ...]
    refused: dict[str, str] = field(default_factory=dict)
    response: str = ""


# -- addresses ----------------------------------------------------------------------------


def normalize_address(value: str) -> str:
    """The bare, lower-cased address in ``value`` ("Dana <Dana@X.org>" -> "dana@x.org").

    Raises :class:`ValueError` for anything that is not exactly one plain address.
    """
    if "\r" in value or "\n" in value:
        raise ValueError(f"{value!r} is not an email address")
    pairs = getaddresses([value])
    if len(pairs) != 1 or not _FULL_ADDRESS.match(pairs[0][1]):
        raise ValueError(f"{value!r} is not an email address")
    return pairs[0][1].lower()


def parse_addresses(values: str | Iterable[str]) -> list[str]:
    """Addresses from a string ("a@x.org, b@y.org") or a list, normalised and de-duplicated."""
    items = [values] if isinstance(values, str) else list(values)
    out: list[str] = []
    for item in items:
        for part in re.split(r"[,;]", item):
            if part.strip():
                address = normalize_address(part.strip())
                if address not in out:
                    out.append(address)
    return out


def domain_of(address: str) -> str:
    return address.rpartition("@")[2].lower()


def message_id_for(key: str, sender: str) -> str:
    """A Message-ID that is the same every time ``key`` is sent (idempotent resends)."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return f"<{digest}.switchboard@{domain_of(sender)}>"


def sent_by_us(message_id: str, sender: str) -> bool:
    """Whether ``message_id`` has the form of one :func:`message_id_for` made for
    ``sender``: mail the assistant sent (a form, which anyone who knows it can copy)."""
    match = _OUR_ID.fullmatch(message_id)
    return match is not None and match.group(1).lower() == domain_of(sender)


# -- MIME ---------------------------------------------------------------------------------

# A file that came with a message is stored under attachments/<channel>/<date>/, as
# <8 hex>-<name> where a channel names it with stored_name (never two alike); sent on, it
# goes by the name it came with.
RECEIVED_FILES = "attachments"
_STORED_PREFIX = re.compile(r"^[0-9a-f]{8}-(?=.)")


def stored_name(name: str) -> str:
    """The file name a received attachment ``name`` (already made safe) is stored under."""
    return f"{uuid.uuid4().hex[:8]}-{name}"


def sent_name(relative: str) -> str:
    """The name a workspace file (``relative`` to the workspace) is attached under: its own,
    but the name it came with for a file a message brought (:func:`stored_name`)."""
    path = PurePath(relative)
    if path.parts[:1] == (RECEIVED_FILES,):
        return _STORED_PREFIX.sub("", path.name)
    return path.name


def one_line(text: str) -> str:
    """A header value without line breaks (no header injection through a subject)."""
    return " ".join(text.split())


def build_message(
    *,
    sender: str,
    to: Sequence[str],
    subject: str,
    markdown: str,
    message_id: str,
    sender_name: str = "",
    files: Sequence[MailFile] = (),
    in_reply_to: str | None = None,
    references: Sequence[str] = (),
    auto_submitted: str | None = None,
    date: datetime | None = None,
) -> EmailMessage:
    """A complete message: the markdown as plain text plus an HTML alternative, then
    attachments."""
    msg = EmailMessage()
    msg["From"] = formataddr((one_line(sender_name), sender)) if sender_name else sender
    msg["To"] = ", ".join(to)
    msg["Subject"] = one_line(subject)
    msg["Date"] = format_datetime(date or datetime.now(UTC))
    msg["Message-ID"] = message_id
    if in_reply_to:
        msg["In-Reply-To"] = in_reply_to
        chain = [ref for ref in dict.fromkeys(references) if ref != in_reply_to]
        msg["References"] = " ".join([*chain, in_reply_to][-20:])
    if auto_submitted:
        msg["Auto-Submitted"] = auto_submitted
    msg.set_content(render_text(markdown))
    msg.add_alternative(render_html(markdown), subtype="html")
    for item in files:
        maintype, subtype = item.maintype_subtype
        msg.add_attachment(item.data, maintype=maintype, subtype=subtype, filename=item.filename)
    return msg


# -- SMTP ---------------------------------------------------------------------------------


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def smtp_connection_options(settings: SmtpSettings) -> dict[str, object]:
    host = settings.smtp_host
    if not host or not settings.from_address:
        raise MailPermanentError("email sending is not configured (smtp_host, from_address)")
    encrypted = settings.smtp_tls or settings.smtp_starttls
    if settings.smtp_username and not encrypted and not _is_loopback(host):
        raise MailPermanentError(
            f"refusing to send the SMTP password to {host} unencrypted; "
            "set email.smtp_starttls or email.smtp_tls"
        )
    return {
        "hostname": host,
        "port": settings.smtp_port,
        "use_tls": settings.smtp_tls,
        "start_tls": False,  # done explicitly in _session, so it can never be skipped
        "cert_bundle": settings.smtp_ca_file,
        "timeout": settings.smtp_timeout_seconds,
    }


async def deliver(
    settings: SmtpSettings, message: EmailMessage, recipients: Sequence[str]
) -> DeliveryReport:
    """One SMTP session that hands ``message`` to the configured server, or a typed error."""
    smtp_connection_options(settings)  # configuration errors first, before any connection
    try:
        refused, response = await _session(settings, message, recipients)
    except MailError:
        raise
    except (aiosmtplib.SMTPException, ssl.SSLError) as exc:
        raise classify_smtp_error(exc, settings) from exc
    accepted = tuple(r for r in recipients if r not in refused)
    return DeliveryReport(
        accepted=accepted,
        refused={rcpt: f"{resp.code} {resp.message}" for rcpt, resp in refused.items()},
        response=f"{response}",
    )


def classify_smtp_error(exc: Exception, settings: SmtpSettings) -> MailError:
    """The typed error for an aiosmtplib or TLS failure, phrased for the user."""
    host = f"{settings.smtp_host}:{settings.smtp_port}"
    cause = exc.__cause__ if isinstance(exc, aiosmtplib.SMTPConnectError) else exc
    if isinstance(cause, ssl.SSLCertVerificationError):
        return MailPermanentError(
            f"the TLS certificate of {host} is not trusted ({cause.verify_message}); "
            "set email.smtp_ca_file for a private CA"
        )
    if isinstance(exc, aiosmtplib.SMTPAuthenticationError):
        return MailAuthError(
            f"the mail server {host} refused the login for {settings.smtp_username!r} "
            f"({exc.code} {exc.message}); check email.smtp_username and email.smtp_password"
        )
    if isinstance(exc, aiosmtplib.SMTPRecipientsRefused):
        text = "; ".join(f"{r.recipient}: {r.code} {r.message}" for r in exc.recipients)
        if all(400 <= r.code < 500 for r in exc.recipients):
            return MailTransientError(f"the mail server deferred every recipient ({text})")
        return MailPermanentError(f"the mail server refused the recipients ({text})")
    if isinstance(exc, aiosmtplib.SMTPResponseException):
        if 400 <= exc.code < 500:
            return MailTransientError(
                f"the mail server {host} said try again later ({exc.code} {exc.message})"
            )
        return MailPermanentError(
            f"the mail server {host} rejected the message ({exc.code} {exc.message})"
        )
    if isinstance(exc, aiosmtplib.SMTPConnectError):  # incl. connect timeouts: nothing sent
        return MailTransientError(f"could not connect to the mail server {host}: {exc}")
    if isinstance(exc, aiosmtplib.SMTPServerDisconnected | aiosmtplib.SMTPTimeoutError):
        return MailTransientError(
            f"the mail server {host} stopped answering mid-session ({exc}); "
            "the message may or may not have been sent",
            maybe_sent=True,
        )
    if isinstance(exc, ssl.SSLError):
        return MailPermanentError(f"TLS with the mail server {host} failed: {exc}")
    return MailPermanentError(f"sending through {host} failed: {exc}")


async def _session(
    settings: SmtpSettings, message: EmailMessage, recipients: Sequence[str]
) -> tuple[dict[str, aiosmtplib.SMTPResponse], str]:
    """Connect, STARTTLS if configured (required, never skipped), log in, send, quit.

    Unlike ``aiosmtplib.send``, a cancelled call closes the socket at once instead of
    waiting up to the timeout for a polite QUIT (it would hold up shutdown).
    """
    options = smtp_connection_options(settings)
    client = aiosmtplib.SMTP(**options)  # type: ignore[arg-type]
    try:
        await client.connect()
        await client.ehlo()
        if settings.smtp_starttls and not settings.smtp_tls:
            if not client.supports_extension("starttls"):
                raise MailPermanentError(
                    f"the mail server {settings.smtp_host}:{settings.smtp_port} does not offer "
                    "STARTTLS; not sending in plain text (set email.smtp_tls for port 465, or "
                    "email.smtp_starttls = false for a local relay)"
                )
            await client.starttls()
        if settings.smtp_username:
            password = settings.smtp_password.get_secret_value() if settings.smtp_password else ""
            await client.login(settings.smtp_username, password)
        refused, response = await client.send_message(
            message, sender=settings.from_address, recipients=list(recipients)
        )
        with contextlib.suppress(aiosmtplib.SMTPException):
            await client.quit()
        return refused, response
    finally:
        client.close()
