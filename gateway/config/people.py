"""``[user]`` and ``[people]``: whose time is whose.

``user.timezone`` is the gateway's default zone (the owner's): the prompt clock, quiet hours
and scheduled jobs of anyone without a zone of their own (``heartbeat.timezone`` before:
moved to it at start, gateway/config/toml/moves.py).
``[people."<channel>:<sender id>"]`` gives a known person their own zone and quiet hours;
people may also set their zone by asking (the ``timezone`` tool, stored in the database),
which a zone in config overrides. ``daily_usd`` / ``monthly_usd`` there give the person money
caps of their own (gateway/runtime/people/spend.py): a member another cap than
``limits.person_*_usd``, the owner one at all.

A person may have many addresses: ``[people.ann] ids = ["telegram:111", "slack:U0123"]``
makes one person of them (gateway/runtime/people/directory.py): the same memory, zone, quiet
hours, role, allowance and usage on every channel, and with ``session = "person"`` (or
``[session] scope = "person"`` for everyone) one conversation across their direct chats.
People link addresses themselves too (``/link``); those links are kept in the database.
"""

from __future__ import annotations

import re
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gateway.config.channels import StrList

_PERSON_KEY = re.compile(r"^[a-z][a-z0-9_-]*:[^\s:][^\s]*$")
_PERSON_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")

# Whose conversation a direct chat is: its own chat's ("chat", as always), or the person's,
# one conversation across every channel they use ("person").
SessionScope = Literal["chat", "person"]


def known_zone(value: str) -> str:
    """``value`` if it names an IANA time zone; a ValueError naming the problem otherwise."""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(
            f"unknown time zone {value!r}; use an IANA name like Europe/Berlin"
        ) from exc
    return value


def hours_range(value: str) -> str:
    """``value`` if it is ``HH:MM-HH:MM`` (or empty)."""
    if value and not re.fullmatch(r"\d{1,2}:\d{2}-\d{1,2}:\d{2}", value.strip()):
        raise ValueError("use HH:MM-HH:MM, for example 22:00-07:00")
    return value.strip()


def valid_person_key(key: str) -> bool:
    """An address as ``[people]`` keys and ``ids`` write it: ``channel:sender id``."""
    return bool(_PERSON_KEY.match(key))


def valid_person_name(key: str) -> bool:
    """A ``[people]`` key that names a person (``ann``) rather than one address."""
    return bool(_PERSON_NAME.match(key))


def config_table(key: str) -> str:
    """How config.toml names the person's table: ``people.ann``, or
    ``people."telegram:123"`` for one keyed by an address."""
    return f"people.{key}" if valid_person_name(key) else f'people."{key}"'


class UserSettings(BaseModel):
    """``[user]``: the gateway's own person (the owner)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # IANA zone: the prompt clock, quiet hours and job times of anyone without their own.
    # Unset: UTC.
    timezone: str | None = None

    @field_validator("timezone")
    @classmethod
    def _known(cls, value: str | None) -> str | None:
        return None if value is None else known_zone(value)


class SessionSettings(BaseModel):
    """``[session]``: whose conversation a direct chat is."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # "person": a linked person's direct chats on every channel are one conversation, each
    # message answered in its own chat (groups stay their own); "chat": each chat its own.
    scope: SessionScope = "chat"  # "person": a linked person's direct chats are one conversation


class PersonSettings(BaseModel):
    """One known person: keyed by one address (``[people."telegram:123456"]``) or by a name
    with their addresses in ``ids`` (``[people.ann] ids = ["telegram:1", "slack:U2"]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Their addresses: one person on all of them (memory, zone, quiet hours, role, allowance,
    # usage), kept under the first. "person": their direct chats on every channel are one
    # conversation (unset: as session.scope says). home: the direct chat their scheduled
    # messages go to then (unset: the one they wrote from last).
    ids: StrList = ()  # their addresses, "<channel>:<sender id>"; kept under the first
    session: SessionScope | None = None  # "person": one conversation across their chats
    home: str | None = None  # "<channel>:<chat id>": their jobs' messages (the owner's: check-ins)

    timezone: str | None = None  # wins over a zone they set by asking
    quiet_hours: str = ""  # "22:00-07:00" in their zone: their jobs' messages wait until it ends
    daily_usd: float | None = Field(default=None, ge=0)
    monthly_usd: float | None = Field(default=None, ge=0)

    @field_validator("timezone")
    @classmethod
    def _known(cls, value: str | None) -> str | None:
        return None if value is None else known_zone(value)

    @field_validator("ids")
    @classmethod
    def _addresses(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for address in value:
            if not valid_person_key(address):
                raise ValueError(
                    f"{address!r} is not an address: write '<channel>:<sender id>', "
                    "for example telegram:123456"
                )
        if len(set(value)) != len(value):
            raise ValueError("an address is listed twice")
        return value

    @field_validator("home")
    @classmethod
    def _home(cls, value: str | None) -> str | None:
        if value is not None and not valid_person_key(value):
            raise ValueError("write '<channel>:<chat id>', for example telegram:123456")
        return value

    @field_validator("quiet_hours")
    @classmethod
    def _hours(cls, value: str) -> str:
        return hours_range(value)


def configured_addresses(name: str, person: PersonSettings) -> tuple[str, ...]:
    """The addresses config gives the person ``[people.<name>]`` (the first is their key)."""
    return (name, *person.ids) if valid_person_key(name) else tuple(person.ids)
