"""``[irc]``: the IRC channel's settings, and how IRC's people are matched. Loaded at every
start: nothing of the channel itself here."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, SecretStr, field_validator, model_validator

from channels.irc.protocol import casefold, is_channel, mask_matches
from gateway.config.channels import ChannelSection, StrList
from gateway.core.errors import ConfigError

NICK = re.compile(r"[A-Za-z\[\]\\`_^{|}][A-Za-z0-9\[\]\\`_^{|}-]{0,29}")
MASK = re.compile(r"[^!@\s]+![^!@\s]+@[^!@\s]+")


class IrcSettings(ChannelSection):
    """IRC: one server, private messages and channels (docs/channels.md#irc).

    IRC has no immutable ids: ``allow_from``, ``owners`` and ``admins`` hold nicks (``dana``)
    or ``nick!user@host`` masks (``dana!*@dana.users.example.org``, ``*`` and ``?`` as
    wildcards), matched as the server compares names. A nick alone is only as good as the
    network's nick protection; a mask with a host the network vouches for (a cloak) is better.
    Channels are named with their prefix (``#switchboard``); the bot joins ``channels``,
    and talks in them unless ``group_allow_from`` names others.
    """

    allow_from: StrList = Field(
        default=(),
        description="nicks or nick!user@host masks that may talk (`*`: everyone); empty: nobody",
    )
    admins: StrList = Field(
        default=(), description="nicks or masks with the admin role (cross-chat sends, /pair)"
    )
    owners: StrList = Field(
        default=(), description="nicks or masks with the owner role (everything admins may)"
    )
    server: str | None = None  # irc.libera.chat; the channel is on when set
    port: int | None = Field(default=None, ge=1, le=65_535)  # default: 6697 with TLS, else 6667
    tls: bool = True  # TLS, checked against the system's certificate authorities
    nick: str = "switchboard"  # the bot's nick (another one while it is taken: nick_)
    # The account's password: SASL PLAIN where the server offers it, otherwise NickServ
    # IDENTIFY once connected.
    password: SecretStr | None = Field(
        default=None,
        description="the account's password: SASL PLAIN where offered, else NickServ IDENTIFY",
    )
    username: str | None = None  # the USER name and the account to log in as; default: nick
    realname: str = "Switchboard"  # the real name others see in WHOIS
    channels: StrList = ()  # channels to join, #name; the bot talks there too
    # Flood limits, as servers expect of a client: this many lines at once, then one line
    # per interval (an answer of many lines is paced, never cut).
    flood_burst: int = Field(default=5, ge=1, le=50)  # lines sent at once before pacing
    flood_interval_seconds: float = Field(default=2.0, ge=0.0, le=30.0)  # then a line per interval

    @property
    def enabled(self) -> bool:
        return bool(self.server)

    @property
    def address(self) -> tuple[str, int]:
        assert self.server is not None
        return self.server, self.port or (6697 if self.tls else 6667)

    def lists(self, sender_id: str, entries: tuple[str, ...]) -> bool:
        return any(mask_matches(entry, sender_id) for entry in entries)

    @field_validator("channels", "group_allow_from", mode="before")
    @classmethod
    def _channel_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list | tuple):
            for name in value:
                if not is_channel(str(name)) or " " in str(name) or "," in str(name):
                    raise ValueError(f"{name!r} is not a channel name (#name)")
            return tuple(casefold(str(name)) for name in value)
        return value

    @field_validator("allow_from", "admins", "owners", mode="after")
    @classmethod
    def _people(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            if entry != "*" and not (NICK.fullmatch(entry) or MASK.fullmatch(entry)):
                raise ValueError(f"{entry!r} is neither a nick nor a nick!user@host mask")
        return value

    @model_validator(mode="before")
    @classmethod
    def _talk_where_joined(cls, data: Any) -> Any:
        """Without ``group_allow_from`` the bot talks in the channels it joins."""
        if isinstance(data, dict) and not data.get("group_allow_from") and data.get("channels"):
            return {**data, "group_allow_from": data["channels"]}
        return data

    @model_validator(mode="after")
    def _complete(self) -> IrcSettings:
        if not self.enabled:
            return self
        if not NICK.fullmatch(self.nick):
            raise ConfigError(
                f"irc.nick {self.nick!r} is not a nick IRC allows (letters, digits, -[]\\`^{{|}}_, "
                "not starting with a digit)",
                field="irc.nick",
            )
        if self.username is not None and not re.fullmatch(r"[^\s@]{1,64}", self.username):
            raise ConfigError(f"irc.username {self.username!r} is not valid", field="irc.username")
        return self
