"""``switchboard onboard --channel matrix`` with a password: one login, whose access token
and device are saved instead of the password (the running channel then checks the token
with ``whoami``, and the password is nowhere on disk)."""

from __future__ import annotations

from typing import Any

from nio import AsyncClient, AsyncClientConfig, LoginResponse

from channels.matrix.settings import MatrixSettings
from gateway.core.errors import ChannelPermanentError, ChannelTransientError

TIMEOUT = 20


async def sign_in(settings: MatrixSettings) -> dict[str, str]:
    """The access token and device of a new login with the password."""
    assert settings.homeserver and settings.user_id and settings.password is not None
    config = AsyncClientConfig(max_limit_exceeded=0, max_timeouts=0, request_timeout=TIMEOUT)
    client = AsyncClient(settings.homeserver.rstrip("/"), settings.user_id, config=config)
    where = settings.homeserver
    try:
        answer: Any = await client.login(
            settings.password.get_secret_value(), device_name="Switchboard"
        )
    except (OSError, TimeoutError) as exc:
        raise ChannelTransientError(f"cannot reach {where} ({exc or type(exc).__name__})") from None
    finally:
        await client.close()
    if isinstance(answer, LoginResponse):
        return {"access_token": answer.access_token, "device_id": answer.device_id}
    if str(getattr(answer, "status_code", "") or "").startswith("M_"):
        raise ChannelPermanentError(
            f"{where} refused the login of {settings.user_id} ({answer}); check the password"
        )
    raise ChannelTransientError(f"cannot reach {where} ({answer})")
