"""``[telegram]``: the Telegram channel's settings, and what they mean for the gateway
(the webhook's port, the older speech keys). Loaded at every start: no SDK here."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from gateway.config.channels import LiveChannelSection
from gateway.config.media import VoiceSettings
from gateway.core.system.listener import Listener


class TelegramSettings(LiveChannelSection):
    """Telegram bot through the Bot API (docs/channels.md#telegram), by long polling or a
    webhook. ``groups`` is keyed by chat id."""

    token: SecretStr | None = Field(
        default=None,
        description="the bot's token from @BotFather; the channel is on when set",
    )
    base_url: str = Field(
        default="https://api.telegram.org",
        description="Bot API server root (self-hosted Bot API server, tests)",
    )
    mode: Literal["polling", "webhook"] = Field(
        default="polling", description="`polling` or `webhook`"
    )
    webhook_url: str | None = None  # public https URL Telegram posts to
    webhook_listen: str = Field(default="127.0.0.1", description="address the webhook server binds")
    webhook_port: int = Field(default=8443, ge=0, le=65_535)  # 0: any free port (tests)
    webhook_path: str = Field(default="telegram", description="URL path of the webhook")
    webhook_secret: SecretStr | None = None  # generated per start when unset
    poll_timeout_seconds: int = Field(
        default=30, ge=0, le=50, description="long-poll duration of getUpdates"
    )
    max_attachment_bytes: int = Field(default=20_000_000, ge=0)  # larger inbound files: a note
    messages_per_second: float = Field(
        default=30.0,
        gt=0,
        le=1000,
        description="sustained sending rate over all chats; bursts of up to 100 leave at once "
        "(Telegram allows 30, up to 1000 with paid broadcasts)",
    )
    # Deprecated: [voice] configures transcription for every channel. These still work, as
    # [voice]'s base_url, api_key and model when [voice] sets neither base_url nor api_key.
    transcription_base_url: str | None = Field(
        default=None,
        description="deprecated: use `voice.base_url` (still read when `[voice]` names no server)",
    )
    transcription_api_key: SecretStr | None = Field(
        default=None, description="deprecated: use `voice.api_key`"
    )
    transcription_model: str = Field(
        default="whisper-1", description="deprecated: use `voice.model`"
    )

    @property
    def enabled(self) -> bool:
        return self.token is not None and bool(self.token.get_secret_value())

    @property
    def transcription_enabled(self) -> bool:
        return bool(self.transcription_base_url or self.transcription_api_key)

    def listen_ports(self) -> tuple[int, ...]:
        return (self.webhook_port,) if self.mode == "webhook" else ()

    def listeners(self) -> tuple[Listener, ...]:
        return (self.webhook_listener(),) if self.mode == "webhook" else ()

    def webhook_listener(self) -> Listener:
        """Where the webhook server listens, and the settings that say so."""
        return Listener(
            "the Telegram webhook",
            self.webhook_listen,
            self.webhook_port,
            "telegram.webhook_listen",
            "telegram.webhook_port",
            'telegram.mode = "polling"',
        )

    def speech_settings(self, configured: VoiceSettings) -> VoiceSettings:
        """``[voice]``, or the older ``transcription_*`` keys when only those are set (kept
        working: they now configure transcription for every channel)."""
        if configured.enabled or not self.transcription_enabled:
            return configured
        return configured.model_copy(
            update={
                "base_url": self.transcription_base_url,
                "api_key": self.transcription_api_key,
                "model": self.transcription_model,
            }
        )
