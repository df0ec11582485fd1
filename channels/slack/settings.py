"""``[slack]``: the Slack channel's settings (and the HTTP Events API's port). Loaded at
every start: no SDK here."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator

from gateway.config.channels import LiveChannelSection, is_set
from gateway.core.errors import ConfigError
from gateway.core.system.listener import Listener


class SlackSettings(LiveChannelSection):
    """Slack app (docs/channels.md#slack): Socket Mode or the HTTP Events API.

    Setting any of the three credentials turns Slack on; an incomplete set is a
    :class:`ConfigError` naming the missing variable, raised when the settings load.
    ``mode = "auto"`` picks Socket Mode when an app token is set, else HTTP.
    """

    bot_token: SecretStr | None = None  # xoxb-..., always needed
    app_token: SecretStr | None = None  # xapp-..., Socket Mode (default)
    signing_secret: SecretStr | None = None  # HTTP Events API mode
    mode: Literal["auto", "socket", "http"] = Field(
        default="auto", description="`auto`, `socket` (app token) or `http` (signing secret)"
    )
    http_listen: str = Field(
        default="127.0.0.1", description="address the HTTP Events API server binds"
    )
    http_port: int = Field(default=3000, ge=0, le=65_535)  # 0: any free port (tests)
    http_path: str = Field(
        default="/slack/events", description="URL path of the HTTP Events API endpoint"
    )
    base_url: str = Field(default="https://slack.com/api/", description="Web API root (tests)")
    # Inbound files above this are not stored (the agent is told why).
    max_attachment_bytes: int = Field(default=20_000_000, ge=0)
    # 👀 on a message while it is worked on, ✅ or ❌ once answered (needs reactions:write)
    working_reactions: bool = Field(
        default=True,
        description="👀 on a message while it is answered, then ✅ (or ❌ for a failure "
        "notice); needs the `reactions:write` scope",
    )

    @property
    def enabled(self) -> bool:
        return any(is_set(s) for s in (self.bot_token, self.app_token, self.signing_secret))

    @property
    def resolved_mode(self) -> Literal["socket", "http"]:
        if self.mode != "auto":
            return self.mode
        if not is_set(self.app_token) and is_set(self.signing_secret):
            return "http"
        return "socket"

    def listen_ports(self) -> tuple[int, ...]:
        return (self.http_port,) if self.mode != "socket" else ()

    def listeners(self) -> tuple[Listener, ...]:
        return (self.http_listener(),) if self.resolved_mode == "http" else ()

    def http_listener(self) -> Listener:
        """Where the HTTP Events API server listens, and the settings that say so."""
        return Listener(
            "Slack's Events API server",
            self.http_listen,
            self.http_port,
            "slack.http_listen",
            "slack.http_port",
            "use Socket Mode (set slack.app_token)",
        )

    @model_validator(mode="after")
    def _complete_credentials(self) -> SlackSettings:
        if not self.enabled:
            return self
        if not is_set(self.bot_token):
            raise ConfigError(
                "Slack needs a bot token: set SWITCHBOARD_SLACK__BOT_TOKEN (xoxb-...)",
                field="slack.bot_token",
            )
        if self.resolved_mode == "socket" and not is_set(self.app_token):
            raise ConfigError(
                "Slack Socket Mode needs an app-level token: set SWITCHBOARD_SLACK__APP_TOKEN "
                "(xapp-..., scope connections:write), or SWITCHBOARD_SLACK__SIGNING_SECRET "
                "for the HTTP Events API",
                field="slack.app_token",
            )
        if self.resolved_mode == "http" and not is_set(self.signing_secret):
            raise ConfigError(
                "Slack HTTP mode needs the signing secret: set SWITCHBOARD_SLACK__SIGNING_SECRET",
                field="slack.signing_secret",
            )
        return self
