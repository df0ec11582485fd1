"""What every channel's section shares, and ``[web]``.

Each channel's own section is a subclass of :class:`ChannelSection` (or
:class:`LiveChannelSection`) in its plug-in (channels/<name>/plugin.py,
:mod:`gateway.config.plugins`). A channel is on when its credentials are set.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Literal

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

from gateway.config.media import VoiceSettings
from gateway.core.errors import ConfigError
from gateway.core.principal import Role
from gateway.core.system.listener import Listener

if TYPE_CHECKING:
    from gateway.core.system.mail import SendMailSettings


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
        if self.lists(sender_id, self.owners):
            return Role.OWNER
        if self.lists(sender_id, self.admins):
            return Role.ADMIN
        return Role.MEMBER

    def group_rule(self, chat_id: str) -> GroupRule:
        return self.groups.get(chat_id, GroupRule())

    # -- what a platform may do differently (its section overrides these) ---------------------

    def lists(self, sender_id: str, entries: tuple[str, ...]) -> bool:
        """Whether ``sender_id`` is one of ``entries`` (``owners``, ``admins``, ``allow_from``,
        a group's ``allow_from``; ``"*"`` is the access gate's). An immutable id matches
        itself only; a platform without immutable ids matches its own patterns (IRC's
        ``nick!user@host`` masks)."""
        return sender_id in entries

    def listen_ports(self) -> tuple[int, ...]:
        """TCP ports the channel listens on itself, which a networked sandbox may not reach
        (gateway/config/ports.py); the web server's routes are not its own."""
        return ()

    def listeners(self) -> tuple[Listener, ...]:
        """The addresses the channel, once on, binds itself with these settings (the gateway
        probes them before it starts anything: gateway/core/system/listener.py). Unlike
        :meth:`listen_ports`, which the sandbox keeps away from whether or not they are in
        use now, only what this start binds."""
        return ()

    def is_new_account(self, sender_id: str, *, now: float) -> bool:
        """Whether ``sender_id``'s account was made recently, where the platform's ids tell:
        new accounts share one pairing slot, so a few throwaway ones cannot fill the queue."""
        return False

    def speech_settings(self, configured: VoiceSettings) -> VoiceSettings:
        """The speech server to use, given ``[voice]``: a section that still carries older
        speech keys of its own fills them in when ``[voice]`` names no server."""
        return configured

    def outgoing_mail(self) -> SendMailSettings | None:
        """The settings of the agent's ``send_email`` tool, when this section configures
        sending mail."""
        return None


class LiveChannelSection(ChannelSection):
    """A chat channel that can show an answer growing by editing it (docs/channels.md#streaming)."""

    streaming: bool | None = None
    # an answer complete this soon after its turn began is sent once, never drafted first
    stream_after_seconds: float = Field(default=0.7, ge=0.0, le=60.0)

    def streams_in(self, *, group: bool) -> bool:
        return not group if self.streaming is None else self.streaming


def streams_in(sections: Mapping[str, ChannelSection], channel: str, group: bool) -> bool:
    """Whether answers stream by editing in a chat of ``channel`` (``<channel>.streaming``;
    unset: in direct chats, not in groups)."""
    section = sections.get(channel)
    return isinstance(section, LiveChannelSection) and section.streams_in(group=group)


def stream_after(sections: Mapping[str, ChannelSection], channel: str) -> float:
    """Seconds a turn runs before its answer streams in a chat of ``channel``
    (``<channel>.stream_after_seconds``)."""
    section = sections.get(channel)
    return section.stream_after_seconds if isinstance(section, LiveChannelSection) else 0.0


class WebSettings(BaseModel):
    """``[web]``: the local web chat and control center (docs/channels.md#web-chat-and-control-center).

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

    def listener(self) -> Listener:
        """Where the web server listens, and the settings that say so."""
        return Listener(
            "the web server", self.host, self.port, "web.host", "web.port", "web.enabled = false"
        )

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


def is_set(secret: SecretStr | None) -> bool:
    """Whether a secret setting holds more than blanks."""
    return secret is not None and bool(secret.get_secret_value().strip())


def is_loopback_host(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine (names are not resolved)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def address_role(sections: Mapping[str, ChannelSection], address: str) -> Role:
    """The role ``address`` has by its own channel's settings (a channel without any, the
    terminal or the web chat, is the owner's: whoever uses it controls the machine)."""
    channel, _, sender = address.partition(":")
    section = sections.get(channel)
    return Role.OWNER if section is None else section.role_of(sender)
