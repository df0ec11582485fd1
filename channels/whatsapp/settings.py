"""``[whatsapp]``: the WhatsApp channel's settings. Loaded at every start."""

from __future__ import annotations

import re

from pydantic import Field, SecretStr, field_validator, model_validator

from gateway.config.channels import LiveChannelSection, is_set
from gateway.core.errors import ConfigError


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
    window_template: str | None = Field(
        default=None,
        description="an approved template sent instead of a message outside WhatsApp's "
        "24-hour window (one body variable, which gets the start of the message)",
    )
    window_template_language: str = Field(
        default="en_US", description="`window_template`'s language code"
    )
    read_receipts: bool = True  # mark a message read (blue ticks) once it is journaled
    max_attachment_bytes: int = Field(default=20_000_000, ge=0)  # larger inbound files: a note
    # A send whose outcome is unknown (a crash, a time-out) first waits for Meta's tagged
    # report of the message (channels/whatsapp/sender.py)
    resend_wait_seconds: float = Field(default=60.0, ge=0, le=3600)  # wait for a lost send's report

    @property
    def enabled(self) -> bool:
        return is_set(self.access_token) or bool(self.phone_number_id)

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
            ("access_token", is_set(self.access_token), "the system user's access token"),
            ("phone_number_id", bool(self.phone_number_id), "the phone number id"),
            ("app_secret", is_set(self.app_secret), "the app secret (App settings > Basic)"),
            ("verify_token", is_set(self.verify_token), "a verify token of your choosing"),
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
