"""``[hooks.<name>]`` and ``[api]``: other programs that talk to the assistant.

A webhook (``POST /hooks/<name>``) is authenticated by its signature alone: an HMAC with the
hook's ``secret`` of the delivery's time, id and raw body (channels/hooks/signature.py). The API (``/v1``, OpenAI-compatible, and the task API)
is authenticated by a bearer token alone; each token has a name and a role, so a script can
be a member. Both are served on the web server's bind (``[web]``) and never accept the web
chat's token or cookie, nor does the web chat accept theirs (docs/connect.md).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator

from gateway.config.plugins import channel_plugins
from gateway.core.messages import ChatRef
from gateway.core.principal import Role

# Hook and token names appear in URLs, session keys and metrics labels: keep them plain.
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
MIN_SECRET_CHARS = 16


def target_channels() -> tuple[str, ...]:
    """Where answers may go: the registered channels' chats, the web chat and the terminal
    (never an internal channel)."""
    return (*channel_plugins(), "webchat", "terminal")


# The chats of the owner's own channels, and how to name them: the web chat's "owner" (every
# signed-in browser's; 24 hex digits: a browser's own from before they shared it, as
# channels/webchat/transcript.py:CHAT_ID_RE) and the terminal's "local". An answer sent to
# another chat of theirs could never be delivered.
LOCAL_CHATS = {
    "webchat": (re.compile(r"owner|[0-9a-f]{24}"), "webchat:owner"),
    "terminal": (re.compile(r"local"), "terminal:local"),
}


def parse_target(value: str) -> ChatRef:
    """``"telegram:12345"`` → that chat; ``"slack:C123:1700000000.1"`` names a thread.
    Raises :class:`ValueError` saying what is wrong."""
    channel, sep, rest = value.strip().partition(":")
    if not sep or not rest.strip():
        raise ValueError(f"{value!r}: write <channel>:<chat id>, e.g. telegram:12345")
    targets = target_channels()
    if channel not in targets:
        raise ValueError(f"{value!r}: unknown channel {channel!r}; use one of {', '.join(targets)}")
    chat, _, thread = rest.strip().partition(":")
    local = LOCAL_CHATS.get(channel)
    if local is not None and (thread or not local[0].fullmatch(chat)):
        raise ValueError(f"{value!r}: there is no such chat; the {channel}'s is {local[1]}")
    return ChatRef(channel, chat, thread or None)


def _long_secret(value: SecretStr, what: str) -> SecretStr:
    secret = value.get_secret_value().strip()
    if len(secret) < MIN_SECRET_CHARS:
        raise ValueError(
            f"{what} is too short: use at least {MIN_SECRET_CHARS} random characters "
            "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(24))'`)"
        )
    return SecretStr(secret)


class HookSettings(BaseModel):
    """One inbound webhook, served at ``POST /hooks/<name>`` (docs/connect.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    secret: SecretStr  # required: senders sign each delivery with it (HMAC-SHA256)
    agent: str = "main"  # the agent that answers
    deliver_to: str | None = None
    prompt: str = ""  # the turn's message; {payload} is replaced by the payload (else it follows)
    role: Role = Role.MEMBER  # the turn's rights: a webhook is outside content
    max_bytes: int = Field(default=1_000_000, ge=1_000, le=25_000_000)  # a larger body gets 413
    max_payload_chars: int = Field(default=20_000, ge=1_000, le=200_000)  # shown to the model
    max_per_minute: int = Field(default=30, ge=1, le=10_000)  # valid deliveries; more get 429

    @field_validator("secret")
    @classmethod
    def _secret_length(cls, value: SecretStr) -> SecretStr:
        return _long_secret(value, "the secret")

    @field_validator("deliver_to")
    @classmethod
    def _target(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parse_target(value)
        return value.strip()

    @property
    def target(self) -> ChatRef | None:
        return None if self.deliver_to is None else parse_target(self.deliver_to)


class ApiToken(BaseModel):
    """One API client: ``Authorization: Bearer <token>`` acts as ``role``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str  # who the client is (sessions, memory, usage and the audit log are kept per name)
    token: SecretStr  # the bearer token (at least 16 random characters)
    role: Role = Role.MEMBER  # owner, admin or member: the client's rights, as a chat's person

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"token name {value!r}: up to 32 lower-case letters, digits, - and _")
        return value

    @field_validator("token")
    @classmethod
    def _token_length(cls, value: SecretStr) -> SecretStr:
        return _long_secret(value, "the token")


class ApiSettings(BaseModel):
    """``[api]``: the OpenAI-compatible API and the task API under ``/v1`` (docs/connect.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    tokens: tuple[ApiToken, ...] = Field(default=(), validate_default=True)
    max_request_bytes: int = Field(default=1_000_000, ge=10_000, le=50_000_000)
    answer_timeout_seconds: float = Field(default=900.0, gt=0, le=86_400)

    @field_validator("tokens")
    @classmethod
    def _tokens_when_enabled(
        cls, value: tuple[ApiToken, ...], info: ValidationInfo
    ) -> tuple[ApiToken, ...]:
        if info.data.get("enabled") and not value:
            raise ValueError(
                "[api] enabled needs at least one token: `switchboard api token add NAME "
                "--role owner` creates one and prints it (docs/connect.md)"
            )
        names = [t.name for t in value]
        if len(set(names)) != len(names):
            raise ValueError("token names must be unique (each names one client)")
        secrets = [t.token.get_secret_value() for t in value]
        if len(set(secrets)) != len(secrets):
            raise ValueError("two tokens are the same; each client needs its own")
        return value

    def token_named(self, name: str) -> ApiToken | None:
        return next((t for t in self.tokens if t.name == name), None)


def valid_hook_name(name: str) -> bool:
    return bool(_NAME.match(name))
