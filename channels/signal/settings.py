"""``[signal]``: the Signal channel's settings. Loaded at every start: nothing of the
channel itself here."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from gateway.config.channels import ChannelSection, StrList
from gateway.core.errors import ConfigError

NUMBER = re.compile(r"\+[1-9][0-9]{5,17}")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def is_person(value: str) -> bool:
    """Whether ``value`` names a person (a number or an account's UUID), not a group."""
    return bool(NUMBER.fullmatch(value) or UUID.fullmatch(value))


class SignalSettings(ChannelSection):
    """Signal through a signal-cli daemon's JSON-RPC interface (docs/channels.md#signal).

    People are named by their number in international form (``+4915112345678``) or, when
    signal-cli does not know their number (Signal's phone number privacy), by their
    account's UUID; groups by the id ``signal-cli listGroups`` shows (base64).
    """

    allow_from: StrList = Field(
        default=(),
        description="numbers (+4915112345678) or account UUIDs that may talk (`*`: everyone); "
        "empty: nobody",
    )
    rpc_url: str | None = Field(
        default=None,
        description="signal-cli's JSON-RPC endpoint (`signal-cli -a +NUMBER daemon --http "
        "127.0.0.1:8080`): http://127.0.0.1:8080; the channel is on when set",
    )
    account: str | None = None  # the bot's own number, +4915100000000
    reactions: bool = False  # react to a message while it is being answered
    reaction_emoji: str = "\N{EYES}"  # the reaction while a message is being answered
    max_attachment_bytes: int = Field(default=20_000_000, ge=0)  # larger inbound files: a note
    # (channels/signal/recovery.py)
    resend_wait_seconds: float = Field(
        default=20.0,
        ge=0,
        le=3600,
        description="a send whose outcome was lost waits this long for the recipients' "
        "delivery receipts before it goes again",
    )
    request_timeout_seconds: float = Field(default=60.0, gt=0, le=600)  # one JSON-RPC call

    @property
    def enabled(self) -> bool:
        return bool(self.rpc_url)

    @field_validator("allow_from", "admins", "owners", mode="after")
    @classmethod
    def _people(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """``+49 151 1234-5678`` is ``+4915112345678``; UUIDs are lower-case."""
        people = []
        for item in value:
            if item == "*":
                people.append(item)
                continue
            person = re.sub(r"[\s()-]", "", item) if item.lstrip().startswith("+") else item
            person = person.strip().lower()
            if not is_person(person):
                raise ValueError(
                    f"{item!r} is neither a number in international form (+4915112345678) "
                    "nor an account's UUID"
                )
            people.append(person)
        return tuple(people)

    @model_validator(mode="after")
    def _complete(self) -> SignalSettings:
        if not self.enabled:
            return self
        url = self.rpc_url or ""
        if not re.match(r"https?://[^/\s]+", url):
            raise ConfigError(
                f"signal.rpc_url {url!r} is not an HTTP address: give signal-cli's "
                "`daemon --http` endpoint, e.g. http://127.0.0.1:8080",
                field="signal.rpc_url",
            )
        if not self.account or not NUMBER.fullmatch(self.account):
            raise ConfigError(
                "Signal needs the bot's own number in international form: set "
                "SWITCHBOARD_SIGNAL__ACCOUNT (+4915100000000)",
                field="signal.account",
            )
        return self
