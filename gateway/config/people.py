"""``[user]`` and ``[people]``: whose time is whose.

``user.timezone`` is the gateway's default zone (the owner's): the prompt clock, quiet hours
and scheduled jobs of anyone without a zone of their own (``heartbeat.timezone`` before:
moved to it at start, gateway/config/moves.py).
``[people."<channel>:<sender id>"]`` gives a known person their own zone and quiet hours;
people may also set their zone by asking (the ``timezone`` tool, stored in the database),
which a zone in config overrides. ``daily_usd`` / ``monthly_usd`` there give the person money
caps of their own (gateway/runtime/people/spend.py): a member another cap than
``limits.person_*_usd``, the owner one at all.
"""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

_PERSON_KEY = re.compile(r"^[a-z][a-z0-9_-]*:[^\s:][^\s]*$")


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
    """A ``[people]`` key names a person the way allowances do: ``channel:sender id``."""
    return bool(_PERSON_KEY.match(key))


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


class PersonSettings(BaseModel):
    """One known person, keyed ``"<channel>:<sender id>"`` (``"telegram:123456"``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timezone: str | None = None  # wins over a zone they set by asking
    quiet_hours: str = ""  # "22:00-07:00" in their zone: their jobs' messages wait until it ends
    daily_usd: float | None = Field(default=None, ge=0)
    monthly_usd: float | None = Field(default=None, ge=0)

    @field_validator("timezone")
    @classmethod
    def _known(cls, value: str | None) -> str | None:
        return None if value is None else known_zone(value)

    @field_validator("quiet_hours")
    @classmethod
    def _hours(cls, value: str) -> str:
        return hours_range(value)
