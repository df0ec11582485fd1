"""Per-channel configuration sections. A channel is on when its credentials are set."""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import NoDecode

from gateway.core.errors import ConfigError
from gateway.core.principal import Role


def _as_list(value: object) -> object:
    """A list as people write it in the environment: JSON (``["1","2"]``), comma-separated
    (``1,2``) or a single value (``123``); ids are always strings."""
    if isinstance(value, int | float):
        return (str(value),)
    if isinstance(value, str):
        text = value.strip()
        if not text.startswith("["):
            return tuple(part.strip() for part in text.split(",") if part.strip())
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a JSON list ({exc.msg}); or write a,b,c") from None
    if isinstance(value, list | tuple):
        return tuple(str(item) for item in value)
    return value


# A list setting that also takes "a,b" or a single id from an environment variable (the
# settings library would otherwise insist on JSON there and fail without naming the field).
StrList = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_as_list)]
RoleList = Annotated[tuple[Role, ...], NoDecode, BeforeValidator(_as_list)]

DmPolicy = Literal["pairing", "allowlist", "open", "disabled"]
GroupPolicy = Literal["allowlist", "open", "disabled"]


class GroupRule(BaseModel):
    """Overrides for one group or channel, keyed by its platform id in ``groups``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    require_mention: bool | None = None
    allow_from: tuple[str, ...] | None = None


class ChannelSection(BaseModel):
    """Access settings every chat channel shares (see docs/security.md).

    ``allow_from`` and ``admins`` hold immutable platform ids (never usernames); ``"*"``
    in ``allow_from`` allows everyone. An empty allowlist allows nobody.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    dm_policy: DmPolicy = "pairing"
    group_policy: GroupPolicy = "allowlist"
    allow_from: StrList = ()
    admins: StrList = ()
    owners: StrList = ()
    group_allow_from: StrList = ()  # group/chat ids where the bot may talk
    require_mention: bool = True  # in groups, answer only when addressed
    groups: dict[str, GroupRule] = {}
    pairing_ttl_seconds: int = Field(default=3600, ge=60)
    # Messages sent while this chat's turn runs: "steer" joins them to it (the answer takes
    # them into account), "queue" answers them in a turn of their own. Unset: steer in
    # direct chats, queue in groups (there, others' messages must not redirect a turn).
    followups: Literal["steer", "queue"] | None = None
    # In groups, the messages of allowed senders since the bot was last addressed there go
    # with the next message that addresses it (at most this many, and at most
    # GROUP_CONTEXT_TOKENS); 0: they are not kept.
    group_context_messages: int = Field(default=20, ge=0, le=200)
    # Who may start a group's conversation afresh with /new (it is everyone's there):
    # "admins" (the owner and admins) or "members" (anyone allowed to talk there).
    new_in_groups: Literal["admins", "members"] = "admins"

    @property
    def enabled(self) -> bool:
        raise NotImplementedError

    def role_of(self, sender_id: str) -> Role:
        if sender_id in self.owners:
            return Role.OWNER
        if sender_id in self.admins:
            return Role.ADMIN
        return Role.MEMBER

    def group_rule(self, chat_id: str) -> GroupRule:
        return self.groups.get(chat_id, GroupRule())


class LiveChannelSection(ChannelSection):
    """A chat channel that can show an answer growing by editing it (docs/channels.md#streaming)."""

    streaming: bool | None = None
    # an answer complete this soon after its turn began is sent once, never drafted first
    stream_after_seconds: float = Field(default=0.7, ge=0.0, le=60.0)

    def streams_in(self, *, group: bool) -> bool:
        return not group if self.streaming is None else self.streaming


class TelegramSettings(LiveChannelSection):
    token: SecretStr | None = None
    base_url: str = "https://api.telegram.org"
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None  # public https URL Telegram posts to
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(default=8443, ge=0, le=65_535)  # 0: any free port (tests)
    webhook_path: str = "telegram"
    webhook_secret: SecretStr | None = None  # generated per start when unset
    poll_timeout_seconds: int = Field(default=30, ge=0, le=50)
    max_attachment_bytes: int = Field(default=20_000_000, ge=0)  # larger inbound files: a note
    messages_per_second: float = Field(default=30.0, gt=0, le=1000)
    # Deprecated: [voice] configures transcription for every channel. These still work, as
    # [voice]'s base_url, api_key and model when [voice] sets neither base_url nor api_key.
    transcription_base_url: str | None = None
    transcription_api_key: SecretStr | None = None
    transcription_model: str = "whisper-1"

    @property
    def enabled(self) -> bool:
        return self.token is not None and bool(self.token.get_secret_value())

    @property
    def transcription_enabled(self) -> bool:
        return bool(self.transcription_base_url or self.transcription_api_key)


class DiscordSettings(LiveChannelSection):
    """Discord bot (docs/channels.md#discord). ``groups`` is keyed by channel id."""

    token: SecretStr | None = None
    reactions: bool = False  # add a reaction while a message is being processed
    reaction_emoji: str = "\N{EYES}"
    # Inbound files above this are not stored (the agent is told why).
    max_attachment_bytes: int = Field(default=20_000_000, ge=0)
    ready_timeout_seconds: float = Field(default=30.0, gt=0)  # start() waits this long for READY
    # The user id tells when an account was made: a few throwaway accounts cannot fill the queue.
    pairing_min_account_age_days: int = Field(default=7, ge=0)

    @property
    def enabled(self) -> bool:
        return _is_set(self.token)


class SlackSettings(LiveChannelSection):
    """Slack app (docs/channels.md#slack): Socket Mode or the HTTP Events API.

    Setting any of the three credentials turns Slack on; an incomplete set is a
    :class:`ConfigError` naming the missing variable, raised when the settings load.
    ``mode = "auto"`` picks Socket Mode when an app token is set, else HTTP.
    """

    bot_token: SecretStr | None = None  # xoxb-..., always needed
    app_token: SecretStr | None = None  # xapp-..., Socket Mode (default)
    signing_secret: SecretStr | None = None  # HTTP Events API mode
    mode: Literal["auto", "socket", "http"] = "auto"
    http_listen: str = "127.0.0.1"
    http_port: int = Field(default=3000, ge=0, le=65_535)  # 0: any free port (tests)
    http_path: str = "/slack/events"
    base_url: str = "https://slack.com/api/"
    # Inbound files above this are not stored (the agent is told why).
    max_attachment_bytes: int = Field(default=20_000_000, ge=0)
    # 👀 on a message while it is worked on, ✅ or ❌ once answered (needs reactions:write)
    working_reactions: bool = True

    @property
    def enabled(self) -> bool:
        return any(_is_set(s) for s in (self.bot_token, self.app_token, self.signing_secret))

    @property
    def resolved_mode(self) -> Literal["socket", "http"]:
        if self.mode != "auto":
            return self.mode
        if not _is_set(self.app_token) and _is_set(self.signing_secret):
            return "http"
        return "socket"

    @model_validator(mode="after")
    def _complete_credentials(self) -> SlackSettings:
        if not self.enabled:
            return self
        if not _is_set(self.bot_token):
            raise ConfigError(
                "Slack needs a bot token: set SWITCHBOARD_SLACK__BOT_TOKEN (xoxb-...)",
                field="slack.bot_token",
            )
        if self.resolved_mode == "socket" and not _is_set(self.app_token):
            raise ConfigError(
                "Slack Socket Mode needs an app-level token: set SWITCHBOARD_SLACK__APP_TOKEN "
                "(xapp-..., scope connections:write), or SWITCHBOARD_SLACK__SIGNING_SECRET "
                "for the HTTP Events API",
                field="slack.app_token",
            )
        if self.resolved_mode == "http" and not _is_set(self.signing_secret):
            raise ConfigError(
                "Slack HTTP mode needs the signing secret: set SWITCHBOARD_SLACK__SIGNING_SECRET",
                field="slack.signing_secret",
            )
        return self


class WhatsAppSettings(LiveChannelSection):
    """WhatsApp through Meta's Cloud API (docs/channels.md#whatsapp). Ids are phone numbers
    as WhatsApp writes them: digits with the country code, no ``+`` (``4915112345678``).

    On when ``access_token`` or ``phone_number_id`` is set; an incomplete set (the app
    secret and the verify token are needed to receive) is a :class:`ConfigError` at load.
    """

    access_token: SecretStr | None = (
        None  # a system user's permanent token (whatsapp_business_messaging)
    )
    phone_number_id: str | None = None  # the sending number's id (not the number itself)
    app_secret: SecretStr | None = None  # checks X-Hub-Signature-256 of every webhook POST
    verify_token: SecretStr | None = None  # the word you type into Meta's webhook setup
    webhook_path: str = "/whatsapp/webhook"  # served on the web server (web.host:web.port)
    base_url: str = "https://graph.facebook.com/v23.0"  # Graph API root (a test fake)
    # Outside WhatsApp's 24-hour window only a pre-approved template may be sent: its name
    # (one body variable {{1}}, which gets the start of the message) and language code.
    window_template: str | None = None
    window_template_language: str = "en_US"
    read_receipts: bool = True  # mark a message read (blue ticks) once it is journaled
    max_attachment_bytes: int = Field(default=20_000_000, ge=0)  # larger inbound files: a note
    # A send whose outcome is unknown (a crash, a time-out) first waits for Meta's tagged
    # report of the message (channels/whatsapp/sender.py)
    resend_wait_seconds: float = Field(default=60.0, ge=0, le=3600)  # wait for a lost send's report

    @property
    def enabled(self) -> bool:
        return _is_set(self.access_token) or bool(self.phone_number_id)

    @field_validator("allow_from", "admins", "owners", mode="after")
    @classmethod
    def _bare_numbers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """``+49 151 1234-5678`` is ``4915112345678``, as WhatsApp names senders."""
        return tuple(item if item == "*" else re.sub(r"[\s+()-]", "", item) for item in value)

    @model_validator(mode="after")
    def _complete_credentials(self) -> WhatsAppSettings:
        if not self.enabled:
            return self
        needed = (
            ("access_token", _is_set(self.access_token), "the system user's access token"),
            ("phone_number_id", bool(self.phone_number_id), "the phone number id"),
            ("app_secret", _is_set(self.app_secret), "the app secret (App settings > Basic)"),
            ("verify_token", _is_set(self.verify_token), "a verify token of your choosing"),
        )
        for name, present, what in needed:
            if not present:
                raise ConfigError(
                    f"WhatsApp needs {what}: set SWITCHBOARD_WHATSAPP__{name.upper()}",
                    field=f"whatsapp.{name}",
                )
        if not self.webhook_path.startswith("/") or self.webhook_path.rstrip("/") in ("", "/api"):
            raise ConfigError(
                f"whatsapp.webhook_path {self.webhook_path!r} must be a path of its own "
                "(like /whatsapp/webhook)",
                field="whatsapp.webhook_path",
            )
        return self


class MatrixSettings(LiveChannelSection):
    """Matrix through a homeserver's client-server API (docs/channels.md#matrix). Ids are
    full Matrix ids: ``@dana:example.org`` for people, ``!abc:example.org`` for rooms."""

    homeserver: str | None = None  # https://matrix.example.org
    user_id: str | None = None  # the bot's account, @switchboard:example.org
    access_token: SecretStr | None = None  # or password: a login at start
    password: SecretStr | None = None
    device_id: str | None = None  # keep one device across restarts (set with the token)
    sync_timeout_seconds: int = Field(default=30, ge=0, le=120)  # long-poll of each /sync
    max_attachment_bytes: int = Field(default=20_000_000, ge=0)  # larger inbound files: a note

    @property
    def enabled(self) -> bool:
        return bool(self.homeserver)

    @model_validator(mode="after")
    def _complete_credentials(self) -> MatrixSettings:
        if not self.enabled:
            return self
        if not self.user_id or not re.fullmatch(r"@[^:\s]+:\S+", self.user_id):
            raise ConfigError(
                "Matrix needs the bot's full user id: set SWITCHBOARD_MATRIX__USER_ID "
                "(@switchboard:example.org)",
                field="matrix.user_id",
            )
        if not (_is_set(self.access_token) or _is_set(self.password)):
            raise ConfigError(
                "Matrix needs SWITCHBOARD_MATRIX__ACCESS_TOKEN or SWITCHBOARD_MATRIX__PASSWORD",
                field="matrix.access_token",
            )
        return self


def _is_set(secret: SecretStr | None) -> bool:
    return secret is not None and bool(secret.get_secret_value().strip())


class EmailSettings(ChannelSection):
    smtp_host: str | None = None
    smtp_port: int = Field(default=587, ge=1, le=65_535)
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    smtp_starttls: bool = True
    smtp_tls: bool = False  # implicit TLS (port 465)
    from_address: str | None = None
    allowed_recipients: StrList = ()
    # Who may mail an address they typed themselves that is not on allowed_recipients:
    # "admins" (the owner and admins) or "everyone" (then any member can mail anyone).
    typed_recipients: Literal["admins", "everyone"] = "admins"
    max_sends_per_day: int = Field(default=20, ge=0)  # per person and 24 h; owner exempt; 0: off
    imap_host: str | None = None
    imap_port: int = Field(default=993, ge=1, le=65_535)
    imap_username: str | None = None
    imap_password: SecretStr | None = None
    imap_tls: bool = True
    imap_mailbox: str = "INBOX"
    # IMAP folder of sent replies: one whose send was cut short is looked for by its Message-ID
    sent_folder: str | None = None  # folder of sent replies, checked before a resend; unset: none
    append_sent: bool = True  # file each reply in sent_folder; false: the SMTP server does (Gmail)
    dm_policy: Literal["pairing", "allowlist", "open", "disabled"] = "allowlist"
    # -- sending (gateway/core/mail.py) ------------------------------------------------------
    smtp_timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    smtp_retry_attempts: int = Field(default=3, ge=0, le=10)  # extra tries after a 4xx
    smtp_retry_base_seconds: float = Field(default=2.0, ge=0, le=60)
    smtp_ca_file: str | None = None  # PEM bundle for a server with a private CA
    # Each person's own address on other channels: {"telegram:123": "me@example.org"}.
    user_addresses: dict[str, str] = {}
    # -- inbox (channels/email) ---------------------------------------------------------
    imap_ca_file: str | None = None
    imap_timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    idle: bool = True  # use IMAP IDLE when the server offers it; poll otherwise
    idle_renew_seconds: float = Field(default=600.0, ge=1, le=1_740)  # RFC 2177: < 29 min
    poll_interval_seconds: float = Field(default=60.0, ge=0.05)
    own_addresses: StrList = ()  # more addresses of the bot (aliases): never answered
    max_replies_per_hour: int = Field(default=10, ge=1)  # per correspondent
    max_message_bytes: int = Field(default=25_000_000, ge=1_000)  # larger mail is not read
    max_attachment_bytes: int = Field(default=20_000_000, ge=0)  # inbound files above are dropped
    # Authentication-Results headers are trusted only from these authserv-ids (your MX); when
    # empty, only the topmost header (added by the receiving server) is read.
    trusted_authserv_ids: StrList = ()
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


class WebSettings(BaseModel):
    """``[web]``: the local web chat and status page (docs/channels.md#web-chat-and-status-page).

    It has no access fields: whoever reaches it is the owner, so it is either bound to a
    loopback address or protected by ``token`` (required anywhere else; checked here, at
    load, so a wrong bind never starts).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65_535)  # 0: any free port (tests)
    token: SecretStr | None = None
    # Origins (scheme://host[:port]) of a reverse proxy in front of the server; its pages
    # may then send messages and open the socket. The server's own origin always may.
    trusted_origins: tuple[str, ...] = ()
    # Addresses or networks of reverse proxies in front of the server: failed logins are then
    # counted per client address from X-Forwarded-For. Empty: the peer address is the client.
    trusted_proxies: tuple[str, ...] = ()
    session_hours: int = Field(default=168, ge=1)  # a login lasts this long; logout ends it
    max_attachment_bytes: int = Field(default=20_000_000, ge=0)  # per uploaded file
    max_files_per_message: int = Field(default=5, ge=0, le=20)

    @field_validator("trusted_origins", "trusted_proxies", mode="before")
    @classmethod
    def _origin_list(cls, value: object) -> object:
        if isinstance(value, str) and not value.lstrip().startswith("["):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("trusted_origins", mode="after")
    @classmethod
    def _bare_origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(origin.rstrip("/").lower() for origin in value)

    @field_validator("trusted_proxies", mode="after")
    @classmethod
    def _proxy_networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(
                    f"{entry!r} is not an IP address or network (e.g. 127.0.0.1, 10.0.0.0/8)"
                ) from None
        return value

    @property
    def loopback(self) -> bool:
        return is_loopback_host(self.host)

    @model_validator(mode="after")
    def _token_off_loopback(self) -> WebSettings:
        token = "" if self.token is None else self.token.get_secret_value().strip()
        if token and len(token) < 16:
            raise ConfigError(
                "web.token is too short: use at least 16 random characters "
                "(SWITCHBOARD_WEB__TOKEN; e.g. `python -c 'import secrets; print(secrets.token_urlsafe(24))'`)",
                field="web.token",
            )
        if self.enabled and not token and not self.loopback:
            raise ConfigError(
                f"web.host is {self.host!r}, which is not a loopback address: set web.token "
                "(SWITCHBOARD_WEB__TOKEN) or bind web.host to 127.0.0.1",
                field="web.token",
            )
        return self


def is_loopback_host(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine (names are not resolved)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False
