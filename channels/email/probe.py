"""``switchboard doctor``'s email check: log in to SMTP and to IMAP, send and read nothing.

SMTP follows the delivery path in :mod:`gateway.core.system.mail` (the same connection options, so the
same refusal to send a password in plain text; STARTTLS when configured), then QUITs
instead of sending. IMAP opens the channel's own :class:`.imap.ImapSession` (login, SELECT
of ``imap_mailbox``), counts unread mail and logs out — no IDLE, nothing marked seen. Both
run at once; every failure is reported, the worst deciding the error type.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

import aiosmtplib

from channels.email.imap import CONNECTION_ERRORS, ImapAuthError, ImapError, ImapSession
from channels.email.settings import EmailSettings
from gateway.core.errors import ChannelError, ChannelPermanentError, ChannelTransientError
from gateway.core.system.mail import (
    MailError,
    MailTransientError,
    classify_smtp_error,
    smtp_connection_options,
)


async def probe(settings: EmailSettings) -> str:
    """ "smtp login ok as ...; imap login ok, INBOX selected (2 unread)", or a typed error."""
    checks = []
    if settings.smtp_host:
        checks.append(probe_smtp(settings))
    if settings.imap_host:
        checks.append(probe_imap(settings))
    results = await asyncio.gather(*checks, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    for error in errors:
        if not isinstance(error, ChannelError):
            raise error
    if not errors:
        return "; ".join(str(r) for r in results) or "nothing to check"
    message = "; ".join(str(e) for e in errors)
    if any(isinstance(e, ChannelPermanentError) for e in errors):
        raise ChannelPermanentError(message)
    raise ChannelTransientError(message)


async def probe_smtp(settings: EmailSettings) -> str:
    host = f"{settings.smtp_host}:{settings.smtp_port}"
    try:
        client = aiosmtplib.SMTP(**smtp_connection_options(settings))  # type: ignore[arg-type]
    except MailError as exc:
        raise ChannelPermanentError(f"smtp: {exc}") from None
    try:
        await client.connect()
        await client.ehlo()
        if settings.smtp_starttls and not settings.smtp_tls:
            if not client.supports_extension("starttls"):
                raise ChannelPermanentError(
                    f"smtp: {host} does not offer STARTTLS; set SWITCHBOARD_EMAIL__SMTP_TLS "
                    "for port 465, or SWITCHBOARD_EMAIL__SMTP_STARTTLS=false for a local relay"
                )
            await client.starttls()
        if settings.smtp_username:
            password = settings.smtp_password.get_secret_value() if settings.smtp_password else ""
            await client.login(settings.smtp_username, password)
        with contextlib.suppress(aiosmtplib.SMTPException):  # logged in is all we asked
            await client.quit()
    except aiosmtplib.SMTPAuthenticationError as exc:
        raise ChannelPermanentError(
            f"smtp: {host} refused the login for {settings.smtp_username!r} "
            f"({exc.code} {exc.message}); check SWITCHBOARD_EMAIL__SMTP_USERNAME and "
            "SWITCHBOARD_EMAIL__SMTP_PASSWORD"
        ) from None
    except (aiosmtplib.SMTPException, ssl.SSLError) as exc:
        error = classify_smtp_error(exc, settings)
        if isinstance(error, MailTransientError):
            raise ChannelTransientError(f"smtp: cannot reach {host} ({exc})") from None
        raise ChannelPermanentError(f"smtp: {error}") from None
    except (OSError, TimeoutError) as exc:
        raise ChannelTransientError(f"smtp: cannot reach {host} ({exc})") from None
    finally:
        client.close()
    if settings.smtp_username:
        return f"smtp login ok as {settings.smtp_username}"
    return f"smtp {host} answers (no login configured)"


async def probe_imap(settings: EmailSettings) -> str:
    host = f"{settings.imap_host}:{settings.imap_port}"
    mailbox = settings.imap_mailbox
    try:
        session = await ImapSession.open(settings)
    except ImapAuthError as exc:
        raise ChannelPermanentError(
            f"imap: {exc}; check SWITCHBOARD_EMAIL__IMAP_USERNAME and "
            "SWITCHBOARD_EMAIL__IMAP_PASSWORD"
        ) from None
    except ImapError as exc:  # logged in, but the server would not SELECT the mailbox
        raise ChannelPermanentError(f"imap: {exc}; check SWITCHBOARD_EMAIL__IMAP_MAILBOX") from None
    except ssl.SSLError as exc:
        raise ChannelPermanentError(
            f"imap: TLS with {host} failed ({exc}); set SWITCHBOARD_EMAIL__IMAP_CA_FILE for a "
            "private CA, or SWITCHBOARD_EMAIL__IMAP_TLS=false for a plain-text local server"
        ) from None
    except CONNECTION_ERRORS as exc:
        raise ChannelTransientError(_unreachable(host, exc)) from None
    try:
        unread = len(await session.new_uids(0))
    except CONNECTION_ERRORS as exc:
        raise ChannelTransientError(_unreachable(host, exc)) from None
    finally:
        await session.close()
    return f"imap login ok as {settings.imap_username}, {mailbox} has {unread} unread"


def _unreachable(host: str, exc: BaseException) -> str:
    return f"imap: cannot reach {host} ({exc or type(exc).__name__})"
