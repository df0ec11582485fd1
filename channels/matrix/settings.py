"""``[matrix]``: the Matrix channel's settings. Loaded at every start: no SDK here."""

from __future__ import annotations

import re

from pydantic import Field, SecretStr, model_validator

from gateway.config.channels import LiveChannelSection, is_set
from gateway.core.errors import ConfigError


class MatrixSettings(LiveChannelSection):
    """Matrix through a homeserver's client-server API (docs/channels.md#matrix). Ids are
    full Matrix ids: ``@dana:example.org`` for people, ``!abc:example.org`` for rooms."""

    homeserver: str | None = None  # https://matrix.example.org
    user_id: str | None = None  # the bot's account, @switchboard:example.org
    access_token: SecretStr | None = None  # or password: a login at start
    password: SecretStr | None = None  # instead of a token: the bot logs in at start
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
        if not (is_set(self.access_token) or is_set(self.password)):
            raise ConfigError(
                "Matrix needs SWITCHBOARD_MATRIX__ACCESS_TOKEN or SWITCHBOARD_MATRIX__PASSWORD",
                field="matrix.access_token",
            )
        return self
