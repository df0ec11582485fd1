"""``[email]``: sending (SMTP), which the agent's ``send_email`` tool uses on its own
(:meth:`EmailSettings.outgoing_mail`), and the inbox channel (IMAP), on when the IMAP
settings are set, which then needs SMTP too, to reply. Loaded at every start: no mail
library here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from gateway.config.channels import ChannelSection, StrList
from gateway.core.errors import ConfigError

if TYPE_CHECKING:
    from gateway.core.system.mail import SendMailSettings  # the mail libraries load with the tool


class EmailSettings(ChannelSection):
    """Email (docs/channels.md#email): sending (SMTP), which the agent's ``send_email`` tool
    uses on its own, and the inbox channel (IMAP), on when the IMAP settings are set.
    Ids are lower-cased bare addresses."""

    smtp_host: str | None = Field(
        default=None, description="SMTP server; with from_address, enables `send_email`"
    )
    smtp_port: int = Field(
        default=587, ge=1, le=65_535, description="587 for STARTTLS, 465 for implicit TLS"
    )
    smtp_username: str | None = Field(default=None, description="SMTP login")
    smtp_password: SecretStr | None = Field(
        default=None, description="SMTP password (an app password for Gmail and the like)"
    )
    smtp_starttls: bool = Field(
        default=True,
        description="upgrade with STARTTLS (refused if the server does not offer it)",
    )
    smtp_tls: bool = False  # implicit TLS (port 465)
    from_address: str | None = Field(default=None, description="the bot's address")
    allowed_recipients: StrList = Field(
        default=(),
        description="addresses or `@domain` entries send_email may always write to",
    )
    # Who may mail an address they typed themselves that is not on allowed_recipients:
    # "admins" (the owner and admins) or "everyone" (then any member can mail anyone).
    typed_recipients: Literal["admins", "everyone"] = Field(
        default="admins",
        description="`admins`: only the owner and admins may mail an address they typed that "
        "is not on allowed_recipients; `everyone`: members too",
    )
    max_sends_per_day: int = Field(default=20, ge=0)  # per person and 24 h; owner exempt; 0: off
    imap_host: str | None = Field(
        default=None, description="IMAP server; with imap_username, enables the inbox channel"
    )
    imap_port: int = Field(default=993, ge=1, le=65_535, description="993 for IMAPS")
    imap_username: str | None = Field(default=None, description="IMAP login")
    imap_password: SecretStr | None = Field(
        default=None, description="IMAP password (an app password for Gmail and the like)"
    )
    imap_tls: bool = Field(default=True, description="implicit TLS (plain text only to loopback)")
    imap_mailbox: str = Field(default="INBOX", description="folder to watch")
    # IMAP folder of sent replies: one whose send was cut short is looked for by its Message-ID
    sent_folder: str | None = None  # folder of sent replies, checked before a resend; unset: none
    append_sent: bool = True  # file each reply in sent_folder; false: the SMTP server does (Gmail)
    dm_policy: Literal["pairing", "allowlist", "open", "disabled"] = "allowlist"
    # -- sending (gateway/core/system/mail.py) ------------------------------------------------------
    smtp_timeout_seconds: float = Field(
        default=30.0, gt=0, le=600, description="per SMTP operation"
    )
    smtp_retry_attempts: int = Field(default=3, ge=0, le=10)  # extra tries after a 4xx
    smtp_retry_base_seconds: float = Field(
        default=2.0, ge=0, le=60, description="first backoff step after a 4xx"
    )
    smtp_ca_file: str | None = None  # PEM bundle for a server with a private CA
    # Each person's own address on other channels: {"telegram:123": "me@example.org"}.
    user_addresses: dict[str, str] = Field(
        default={},
        description='verified own address per principal, e.g. {"telegram:123": "me@example.org"}',
    )
    # -- inbox (channels/email) ---------------------------------------------------------
    imap_ca_file: str | None = Field(
        default=None, description="CA bundle for a private mail server certificate"
    )
    imap_timeout_seconds: float = Field(
        default=30.0, gt=0, le=600, description="per IMAP operation"
    )
    idle: bool = True  # use IMAP IDLE when the server offers it; poll otherwise
    idle_renew_seconds: float = Field(default=600.0, ge=1, le=1_740)  # RFC 2177: < 29 min
    poll_interval_seconds: float = Field(
        default=60.0, ge=0.05, description="when the server has no IDLE"
    )
    own_addresses: StrList = ()  # more addresses of the bot (aliases): never answered
    max_replies_per_hour: int = Field(default=10, ge=1)  # per correspondent; more wait
    max_message_bytes: int = Field(default=25_000_000, ge=1_000)  # larger mail is not read
    max_attachment_bytes: int = Field(default=20_000_000, ge=0)  # inbound files above are dropped
    # Authentication-Results headers are trusted only from these authserv-ids (your MX); when
    # empty, only the topmost header (added by the receiving server) is read.
    trusted_authserv_ids: StrList = Field(
        default=(),
        description="Authentication-Results ids to trust besides the topmost header",
    )
    require_authentication: bool = False  # refuse mail without a passing dkim/spf/dmarc result

    @field_validator(
        "allow_from", "admins", "owners", "allowed_recipients", "own_addresses", mode="after"
    )
    @classmethod
    def _lower_addresses(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Email ids are lower-cased bare addresses (the channel reports sender_id that way)."""
        return tuple(item.strip().lower() for item in value)

    @field_validator("user_addresses", mode="after")
    @classmethod
    def _lower_user_addresses(cls, value: dict[str, str]) -> dict[str, str]:
        return {key: address.strip().lower() for key, address in value.items()}

    @model_validator(mode="after")
    def _sent_folder_needs_imap(self) -> EmailSettings:
        if self.sent_folder and not (self.imap_host and self.imap_username):
            raise ConfigError(
                "email.sent_folder is read over IMAP: set email.imap_host and "
                "email.imap_username too (or unset email.sent_folder)",
                field="email.sent_folder",
            )
        return self

    @property
    def enabled(self) -> bool:
        """The inbox channel; sending works without it."""
        return bool(self.imap_host and self.imap_username)

    @property
    def can_send(self) -> bool:
        return bool(self.smtp_host and self.from_address)

    def outgoing_mail(self) -> SendMailSettings | None:
        return self if self.can_send else None
