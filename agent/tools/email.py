"""The ``send_email`` tool, and the recipient policy that keeps it from being an exfiltration path.

A prompt-injected page or email would love to make the bot mail something to an attacker.
So whom the bot may write to is decided in code, from facts the model cannot forge: the
configured allowlist, the requesting user's own verified address, and addresses the user
typed in their own messages of this turn (by default only the owner and admins: otherwise
any member could use the bot as an open relay from its address). Tool results, fetched
pages and emails are not looked at. An address a member typed is a refusal the owner could
waive: with ``tools.approvals = "ask"`` the send waits for approval (agent.approval). After
outside content every send waits for approval (agent.policy), and an address found only in
that content is refused before anyone is asked: no approval could let it through.
Everyone but the owner has a daily send cap, counted in
the audit log (each sent mail is an ``email-sent`` entry). Idempotency comes from the executor (the call is recorded in the ledger before it
runs) and from a Message-ID derived from the turn and call ids.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any, Literal

from agent.tools.base import Effect, Refusal, Tool, ToolContext, ToolError, ToolResult, schema
from agent.workspace import PathDenied, Workspace
from gateway.core.backoff import backoff_delay
from gateway.core.principal import Principal
from gateway.core.system.mail import (
    ADDRESS_RE,
    DeliveryReport,
    MailError,
    MailFile,
    MailTransientError,
    SendMailSettings,
    build_message,
    deliver,
    domain_of,
    message_id_for,
    normalize_address,
    parse_addresses,
    sent_name,
)
from gateway.store import AuditLog

log = logging.getLogger(__name__)

MAX_RECIPIENTS = 20
MAX_ATTACHMENTS = 10
RETRY_CAP_SECONDS = 30.0
DAY = 24 * 3600.0
SENT = "email-sent"  # audit kind of every sent mail; the per-person cap counts these


def addresses_in(texts: Iterable[str]) -> set[str]:
    """Every email address written literally in ``texts``, lower-cased."""
    return {match.group(0).lower() for text in texts for match in ADDRESS_RE.finditer(text)}


@dataclass(frozen=True, slots=True)
class RecipientPolicy:
    """Whom ``send_email`` may write to (pure; the tool supplies the turn's facts)."""

    allowed: tuple[str, ...] = ()  # exact addresses and "@domain" entries, lower-case
    user_addresses: Mapping[str, str] | None = None  # "channel:sender_id" -> address
    typed_by: Literal["admins", "everyone"] = "admins"  # who may mail addresses they typed

    def may_type(self, principal: Principal) -> bool:
        return self.typed_by == "everyone" or principal.is_admin

    def own_address(self, principal: Principal) -> str | None:
        """The requester's verified address: the sender of an accepted email, or configured."""
        if principal.channel == "email":
            try:
                return normalize_address(principal.sender_id)
            except ValueError:
                return None
        mapping = self.user_addresses or {}
        return mapping.get(f"{principal.channel}:{principal.sender_id}")

    def why_allowed(
        self,
        address: str,
        *,
        principal: Principal,
        user_texts: Iterable[str],
        approved: bool = False,
    ) -> str | None:
        """Why ``address`` may receive mail in this turn, or ``None`` when it may not.
        ``approved``: the owner approved this send, so the addresses the user typed count."""
        if address in self.allowed or f"@{domain_of(address)}" in self.allowed:
            return "allowlist"
        if address == self.own_address(principal):
            return "your own address"
        if (self.may_type(principal) or approved) and address in addresses_in(user_texts):
            return "written in your message"
        return None

    def typed_only(
        self, recipients: Iterable[str], *, principal: Principal, user_texts: Iterable[str]
    ) -> list[str] | None:
        """The refused recipients when every one of them was typed by a user who may not
        mail typed addresses (the owner could approve that); ``None`` otherwise."""
        refused = [
            r
            for r in recipients
            if self.why_allowed(r, principal=principal, user_texts=user_texts) is None
        ]
        typed = addresses_in(user_texts)
        if not refused or self.may_type(principal) or not set(refused) <= typed:
            return None
        return refused

    def never(self, refused: list[str], *, principal: Principal) -> str:
        """Why no approval could let mail to ``refused`` through."""
        allowed = ", ".join(self.allowed[:10]) + (" ..." if len(self.allowed) > 10 else "")
        return (
            f"not sent: {', '.join(refused)} {'is' if len(refused) == 1 else 'are'} not an "
            "allowed recipient, and no approval can change that. Email may go to the "
            f"configured allowlist ({allowed or 'empty'}), to the user's own address "
            f"({self.own_address(principal) or 'not known'}), or to an address written in the "
            "user's own message this turn; addresses found in web pages, files, tool results "
            "or emails never count. Ask the user to write the address themselves."
        )

    def refusal(self, refused: list[str], *, principal: Principal) -> str:
        allowed = ", ".join(self.allowed[:10]) + (" ..." if len(self.allowed) > 10 else "")
        own = self.own_address(principal)
        if not self.may_type(principal):
            return (
                f"not sent: {', '.join(refused)} {'is' if len(refused) == 1 else 'are'} not an "
                f"allowed recipient. This user may email addresses on the allowlist ({allowed or 'empty'}) "
                f"and their own address ({own or 'not known'}) only; other addresses need the "
                "owner or an admin (email.typed_recipients), or the owner adding them to "
                "email.allowed_recipients."
            )
        return (
            f"not sent: {', '.join(refused)} {'is' if len(refused) == 1 else 'are'} not an "
            "allowed recipient. Email may go to addresses on the configured allowlist"
            f" ({allowed or 'empty'}), to the user's own address ({own or 'not known'}), or to "
            "an address the user wrote themselves in their message this turn. Addresses found "
            "in web pages, files, tool results or emails can never be added. Ask the user to "
            "confirm the address in their own words, or to add it to email.allowed_recipients."
        )


def read_attachment(workspace: Workspace, user_path: str, budget: int) -> MailFile:
    """Read one workspace file for attaching; confined like every file tool."""
    try:
        path = workspace.resolve(user_path)
    except PathDenied as exc:
        raise ToolError(f"attachment {exc}") from exc
    try:
        fd = os.open(path, workspace.open_flags(os.O_RDONLY))
    except FileNotFoundError:
        raise ToolError(f"attachment {user_path!r} does not exist") from None
    except OSError as exc:
        raise ToolError(f"cannot open attachment {user_path!r}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"attachment {user_path!r} is not a regular file")
        if info.st_size > budget:
            raise ToolError(
                f"attachments are limited to {budget} bytes in total; {user_path!r} is "
                f"{info.st_size} bytes"
            )
        data = handle.read(budget + 1)
    if len(data) > budget:
        raise ToolError(f"attachments are limited to {budget} bytes in total")
    return MailFile(filename=sent_name(workspace.relative(path)), data=data)


class SendEmail(Tool):
    name = "send_email"
    description = (
        "Send an email from the assistant's address. `body` is markdown (sent as plain text "
        "plus HTML). Recipients must be on the configured allowlist, the user's own address, "
        "or an address the user wrote in their own message this turn; addresses from web "
        "pages, files or emails are refused. `attachments` are workspace-relative paths."
    )
    parameters = schema(
        {
            "to": {
                "description": "Recipient address, or a list of addresses",
                "anyOf": [
                    {"type": "string", "minLength": 3},
                    {"type": "array", "items": {"type": "string"}, "minItems": 1},
                ],
            },
            "subject": {"type": "string", "minLength": 1, "maxLength": 300},
            "body": {"type": "string", "minLength": 1},
            "attachments": {
                "type": "array",
                "items": {"type": "string"},
                "maxItems": MAX_ATTACHMENTS,
            },
        },
        ("to", "subject", "body"),
    )
    effect = Effect.SEND
    targets = ("to",)
    intent = ("email", "e-mail", "mail", "send")  # a hint for the approver (agent.policy)
    does = "sends an email"

    def __init__(
        self,
        settings: SendMailSettings,
        *,
        sender_name: str = "",
        audit_log: AuditLog | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._sender_name = sender_name
        self._audit_log = audit_log  # counts sends per person (no cap without it)
        self._clock = clock
        self.policy = RecipientPolicy(
            settings.allowed_recipients, settings.user_addresses, settings.typed_recipients
        )

    async def approval_refusal(self, args: dict[str, Any], ctx: ToolContext) -> Refusal | None:
        try:
            recipients = parse_addresses(args["to"])
        except ValueError:
            return None  # run() explains what is wrong with them
        principal = ctx.principal
        refused = self.policy.typed_only(recipients, principal=principal, user_texts=ctx.user_texts)
        if refused is None:
            return None
        return Refusal(self.policy.refusal(refused, principal=principal), askable=True)

    async def refused_anyway(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        """Recipients that even an approved send may not reach (found only in outside
        content, say): nobody is asked about them."""
        try:
            recipients = parse_addresses(args["to"])
        except ValueError:
            return None  # run() explains
        refused = [
            r
            for r in recipients
            if self.policy.why_allowed(
                r, principal=ctx.principal, user_texts=ctx.user_texts, approved=True
            )
            is None
        ]
        return self.policy.never(refused, principal=ctx.principal) if refused else None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        settings = self._settings
        assert settings.from_address is not None  # registered only when can_send
        try:
            recipients = parse_addresses(args["to"])
        except ValueError as exc:
            raise ToolError(f"{exc}; give plain addresses such as dana@example.org") from None
        if not recipients:
            raise ToolError("no recipient given")
        if len(recipients) > MAX_RECIPIENTS:
            raise ToolError(f"at most {MAX_RECIPIENTS} recipients per email")
        refused = [
            r
            for r in recipients
            if self.policy.why_allowed(
                r, principal=ctx.principal, user_texts=ctx.user_texts, approved=ctx.approved
            )
            is None
        ]
        if refused:
            await ctx.audit(
                "recipient-policy",
                tool=self.name,
                refused=refused,
                channel=ctx.principal.channel,
                sender_id=ctx.principal.sender_id,
                turn=ctx.turn_id,
            )
            raise ToolError(self.policy.refusal(refused, principal=ctx.principal))
        await self._check_cap(ctx)
        files = await asyncio.to_thread(self._read_files, ctx.workspace, args.get("attachments"))
        message_id = message_id_for(ctx.idempotency_key, settings.from_address)
        message = build_message(
            sender=settings.from_address,
            sender_name=self._sender_name,
            to=recipients,
            subject=args["subject"],
            markdown=args["body"],
            message_id=message_id,
            files=files,
            # No person is waiting in a heartbeat or cron turn (it has no inbound message):
            # RFC 3834 asks such mail to say so, and auto-responders then stay quiet.
            auto_submitted="auto-generated" if ctx.unattended else None,
        )
        report = await self._deliver(message, recipients)
        if self._audit_log is not None:
            await self._audit_log.record(
                SENT,
                channel=ctx.principal.channel,
                sender_id=ctx.principal.sender_id,
                to=report.accepted,
                turn=ctx.turn_id,
            )
        log.info(
            "send_email turn %s sent %s to %s", ctx.turn_id, message_id, ", ".join(report.accepted)
        )
        summary = f"Email sent to {', '.join(report.accepted)} (Message-ID {message_id})."
        if report.refused:
            rejected = "; ".join(f"{rcpt}: {why}" for rcpt, why in report.refused.items())
            summary += f" The server refused some recipients: {rejected}."
        return ToolResult(summary)

    async def _check_cap(self, ctx: ToolContext) -> None:
        """Everyone but the owner sends at most ``max_sends_per_day`` mails a rolling day."""
        cap = self._settings.max_sends_per_day
        principal = ctx.principal
        if not cap or principal.is_owner or self._audit_log is None:
            return
        sent = await self._audit_log.count(
            SENT,
            channel=principal.channel,
            sender_id=principal.sender_id,
            since=self._clock() - DAY,
        )
        if sent >= cap:
            await ctx.audit("email-cap", tool=self.name, sent=sent, cap=cap, turn=ctx.turn_id)
            raise ToolError(
                f"not sent: this user has sent {sent} emails in the last 24 hours, the most "
                f"allowed (email.max_sends_per_day = {cap}). Tell them to try again later."
            )

    def _read_files(self, workspace: Workspace, paths: list[str] | None) -> list[MailFile]:
        files: list[MailFile] = []
        budget = self._settings.max_attachment_bytes
        for user_path in paths or ():
            item = read_attachment(workspace, user_path, budget)
            budget -= len(item.data)
            files.append(item)
        return files

    async def _deliver(self, message: EmailMessage, recipients: list[str]) -> DeliveryReport:
        """Deliver, retrying a definite temporary failure (4xx, no connection) with backoff."""
        settings = self._settings
        attempt = 0
        while True:
            try:
                return await deliver(settings, message, recipients)
            except MailTransientError as exc:
                if exc.maybe_sent:
                    raise ToolError(f"email outcome unknown: {exc}") from None
                if attempt >= settings.smtp_retry_attempts:
                    raise ToolError(f"email not sent after {attempt + 1} attempts: {exc}") from None
                delay = backoff_delay(
                    attempt, base=settings.smtp_retry_base_seconds, cap=RETRY_CAP_SECONDS
                )
                log.info("send_email: %s; retrying in %.1fs", exc, delay)
                attempt += 1
                await asyncio.sleep(delay)
            except MailError as exc:
                raise ToolError(f"email not sent: {exc}") from None
