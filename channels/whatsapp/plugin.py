"""The WhatsApp channel as the gateway knows it (:mod:`gateway.config.plugins`): its
section, ``[whatsapp]`` (:mod:`.settings`), how to build it, and how ``switchboard onboard
--channel whatsapp`` sets it up. Imported at every start, so it imports nothing of the
channel itself: :func:`create` does, when the channel is on."""

from __future__ import annotations

from pathlib import Path

from channels.whatsapp.settings import WhatsAppSettings
from gateway.config.plugins import ChannelPlugin, Onboarding, Question
from gateway.core.channel import Channel, ChannelContext


def create(section: WhatsAppSettings, context: ChannelContext) -> Channel:
    from channels.whatsapp.adapter import WhatsAppChannel  # noqa: PLC0415 - only when on

    return WhatsAppChannel(section, context)


async def greet(section: WhatsAppSettings, to: str, text: str) -> str:
    from channels.whatsapp.greet import greet  # noqa: PLC0415 - only when asked

    return await greet(section, to, text)


def set_up_later(problem: Exception) -> str | None:
    """Before the first run Meta has no webhook to call: the probe's complaint about it is
    expected, and what it checked before (the token, the number) passed."""
    return "token and phone number id ok" if "webhook" in str(problem) else None


def next_step(section: WhatsAppSettings, env_file: Path) -> str:
    return (
        f"make https://<your host>{section.webhook_path} reach this gateway's web server, set "
        "it as the callback URL in the app's WhatsApp > Configuration with the verify token "
        f"(in {env_file}), subscribe to 'messages'"
    )


PLUGIN = ChannelPlugin(
    name="whatsapp",
    title="WhatsApp",
    settings=WhatsAppSettings,
    create=create,
    onboarding=Onboarding(
        questions=(
            Question(
                "access_token",
                "Access token (system user, whatsapp_business_messaging)",
                secret=True,
            ),
            Question("phone_number_id", "Phone number ID (WhatsApp > API Setup)"),
            Question("app_secret", "App secret (App settings > Basic)", secret=True),
            Question(
                "verify_token",
                "Verify token for the webhook (empty: a random one)",
                secret=True,
                generated=True,
            ),
            Question("allow_from", "Your WhatsApp number (country code, digits only)"),
        ),
        greet=greet,
        set_up_later=set_up_later,
        next_step=next_step,
    ),
)
