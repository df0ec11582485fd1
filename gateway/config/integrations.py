"""Services the assistant works with for the owner: ``[calendar]`` and ``[images]``.

``[calendar]`` is one CalDAV account (Nextcloud, iCloud, Fastmail, Radicale, Google's CalDAV
endpoint): the ``calendar`` tool lists and changes its events, the heartbeat and an opt-in
morning briefing read the day's events. ``[images]`` names one OpenAI-compatible images
endpoint (``/v1/images/generations``) for the ``generate_image`` tool. Both are off until
configured.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

_SIZE = re.compile(r"^(auto|\d{2,5}x\d{2,5})$")


def _http_url(value: str | None, key: str) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not re.match(r"^https?://[^/\s]+", value):
        raise ValueError(f"{key} must be an http(s) URL, such as https://dav.example.org/")
    return value


class CalendarSettings(BaseModel):
    """One CalDAV account the ``calendar`` tool works in (docs/tools.md#calendar); off while
    ``url`` is unset. Event times are shown and read in each person's own time zone."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str | None = None  # the server's root (calendars are found) or one calendar's address
    username: str = ""  # the login; an email address lets the tool invite people as organiser
    password: SecretStr | None = None  # an app password; with no username: a bearer token
    briefing: str = ""  # "07:30": the day's events each morning then, in the owner's zone
    heartbeat: bool = False  # the heartbeat's check-ins see the rest of the day's events
    timeout_seconds: float = Field(default=20.0, gt=0, le=300)  # per request to the server

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return _http_url(value, "calendar.url")

    @field_validator("briefing")
    @classmethod
    def _time_of_day(cls, value: str) -> str:
        value = value.strip()
        if value and not re.fullmatch(r"([01]?\d|2[0-3]):[0-5]\d", value):
            raise ValueError("use HH:MM, for example 07:30 (or leave it empty: no briefing)")
        return value

    @model_validator(mode="after")
    def _needs_a_server(self) -> CalendarSettings:
        if (self.briefing or self.heartbeat) and not self.enabled:
            key = "briefing" if self.briefing else "heartbeat"
            raise ValueError(f"calendar.{key} reads the calendar: set calendar.url too")
        return self


class ImagesSettings(BaseModel):
    """Pictures made on request (the ``generate_image`` tool, docs/tools.md#images), by an
    OpenAI-compatible images endpoint; off while neither ``base_url`` nor ``api_key`` is set.
    Each picture is counted in usage, and its price in the cost estimates."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = None  # the server's /v1 root; unset with api_key set: OpenAI's
    model: str = "gpt-image-1"  # the images model (dall-e-3, a local server's name, ...)
    api_key: SecretStr | None = None  # unset: the server needs none (a local one)
    size: str = "1024x1024"  # when the model asks for none; "auto" lets the server choose
    price_per_image: float | None = Field(default=None, ge=0)  # USD, for cost estimates
    timeout_seconds: float = Field(default=120.0, gt=0, le=600)  # per picture
    max_bytes: int = Field(default=20_000_000, ge=1_000)  # a larger picture is refused

    @property
    def enabled(self) -> bool:
        return bool(self.base_url or (self.api_key and self.api_key.get_secret_value()))

    def cost(self, images: int) -> float | None:
        """USD for ``images`` pictures; None when no price is set."""
        return None if self.price_per_image is None else images * self.price_per_image

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return _http_url(value, "images.base_url")

    @field_validator("size")
    @classmethod
    def _size(cls, value: str) -> str:
        if not _SIZE.match(value):
            raise ValueError("use WIDTHxHEIGHT, for example 1024x1024, or auto")
        return value
