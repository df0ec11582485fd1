"""``switchboard doctor``'s channel checks: log in to every enabled channel's platform, start
nothing, and say who the bot is there or what to fix."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from gateway.cli.doctor.checks import Check, Status
from gateway.core.errors import (
    ChannelPermanentError,
    ChannelRateLimited,
    ChannelTransientError,
    ConfigError,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

    from gateway.config.settings import Settings

PROBE_TIMEOUT = 15.0  # seconds for one channel's login check


async def channel_checks(settings: Settings, *, seconds: float = PROBE_TIMEOUT) -> list[Check]:
    """Log in to every enabled channel's platform at once (see :func:`probe_channel`)."""
    from channels import enabled_channels  # noqa: PLC0415
    from gateway.config.plugins import channel_plugins  # noqa: PLC0415

    enabled = enabled_channels(settings)
    if not enabled:
        known = ", ".join(channel_plugins()) or "none yet"
        return [
            Check(
                "channels",
                "warn",
                f"no chat channel configured (available: {known}); `switchboard chat` still works",
            )
        ]
    return list(await asyncio.gather(*(probe_channel(settings, n, seconds) for n in enabled)))


async def probe_channel(settings: Settings, name: str, seconds: float) -> Check:
    """Build the channel (not started) and let it log in: who are we there, or what to fix.

    A channel without :class:`SupportsProbe` is only reported as configured. Messages are
    scrubbed of the section's secrets, whatever a library put into an error.
    """
    from gateway.config.plugins import channel_plugins  # noqa: PLC0415
    from gateway.core.channel import SupportsProbe  # noqa: PLC0415

    label = f"channel {name}"
    section = settings.channel_sections()[name]
    secrets = _secrets(section)

    def check(status: Status, message: str) -> Check:
        for secret in secrets:
            message = message.replace(secret, "***")
        return Check(label, status, message)

    try:
        channel = channel_plugins()[name].create(section, settings.channel_context())
    except ConfigError as exc:
        return check("fail", str(exc))
    except ImportError as exc:
        return check("fail", f"cannot load the {name} channel ({exc}); reinstall Switchboard")
    except Exception as exc:  # the gateway would not start it either; say why, check the rest
        return check("fail", f"cannot set up the {name} channel: {type(exc).__name__}: {exc}")
    if not isinstance(channel, SupportsProbe):
        return check("ok", "configured")
    try:
        async with asyncio.timeout(seconds):
            return check("ok", await channel.probe())
    except TimeoutError:
        return check("fail", f"cannot reach {name}: no answer within {seconds:g} s")
    except ChannelPermanentError as exc:
        hint = "" if "SWITCHBOARD_" in str(exc) else f"; check the [{name}] settings"
        return check("fail", f"{exc}{hint}")
    except ChannelTransientError as exc:
        text = str(exc)
        return check("fail", text if "cannot reach" in text else f"cannot reach {name}: {text}")
    except ChannelRateLimited as exc:
        return check("warn", f"{exc}; the credentials were not checked, try again later")
    except Exception as exc:  # a probe bug must not hide the other checks
        return check("fail", f"the {name} check failed unexpectedly: {type(exc).__name__}: {exc}")


def _secrets(section: BaseModel) -> list[str]:
    from pydantic import SecretStr  # noqa: PLC0415

    """Every secret of the section, as written and stripped (the adapters strip tokens)."""
    values = (getattr(section, field) for field in type(section).model_fields)
    raw = [v.get_secret_value() for v in values if isinstance(v, SecretStr)]
    found = {text for value in raw for text in (value, value.strip()) if len(text) >= 4}
    return sorted(found, key=len, reverse=True)  # a longer one may contain a shorter one
