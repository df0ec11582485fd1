"""``[discord]``: the Discord channel's settings, and what a Discord id tells (the
account's age, for the pairing queue). Loaded at every start: no SDK here."""

from __future__ import annotations

from pydantic import Field, SecretStr

from gateway.config.channels import LiveChannelSection, is_set

DISCORD_EPOCH_MS = 1_420_070_400_000  # 2015-01-01, where Discord snowflakes count from


def account_created_at(user_id: str) -> float | None:
    """When a Discord account was made (Unix time): a user id is a snowflake, milliseconds
    since 2015 in its top bits. ``None`` for what is not one."""
    if not user_id.isdigit():
        return None
    return ((int(user_id) >> 22) + DISCORD_EPOCH_MS) / 1000


class DiscordSettings(LiveChannelSection):
    """Discord bot (docs/channels.md#discord). ``groups`` is keyed by channel id."""

    token: SecretStr | None = Field(
        default=None,
        description="the bot's token (Developer Portal → Bot → Reset Token); the channel is on when set",
    )
    reactions: bool = False  # add a reaction while a message is being processed
    reaction_emoji: str = Field(
        default="\N{EYES}", description="the reaction added while a message is processed"
    )
    # Inbound files above this are not stored (the agent is told why).
    max_attachment_bytes: int = Field(default=20_000_000, ge=0)
    ready_timeout_seconds: float = Field(default=30.0, gt=0)  # start() waits this long for READY
    # The user id tells when an account was made: a few throwaway accounts cannot fill the queue.
    pairing_min_account_age_days: int = Field(
        default=7,
        ge=0,
        description="accounts younger than this many days (a Discord id tells its age) share "
        "one open pairing slot; 0: off",
    )

    @property
    def enabled(self) -> bool:
        return is_set(self.token)

    def is_new_account(self, sender_id: str, *, now: float) -> bool:
        if not self.pairing_min_account_age_days:
            return False
        created = account_created_at(sender_id)
        return created is not None and created > now - self.pairing_min_account_age_days * 86_400
