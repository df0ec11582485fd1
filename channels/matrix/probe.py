"""``switchboard doctor``'s Matrix check: who the homeserver says we are, without syncing.

With an access token: ``GET /account/whoami``. With a password: a login, which makes a
device the running channel reuses (the device id is remembered), then a logout-free close.
A refused credential is permanent and names the setting; no answer is "cannot reach".
"""

from __future__ import annotations

from typing import Any

from nio import AsyncClient, AsyncClientConfig, LoginResponse, WhoamiResponse

from channels.matrix.settings import MatrixSettings
from gateway.core.errors import ChannelPermanentError, ChannelTransientError

TIMEOUT = 10


async def probe(settings: MatrixSettings) -> str:
    assert settings.homeserver and settings.user_id
    config = AsyncClientConfig(max_limit_exceeded=0, max_timeouts=0, request_timeout=TIMEOUT)
    client = AsyncClient(settings.homeserver.rstrip("/"), settings.user_id, config=config)
    where = settings.homeserver
    try:
        token = settings.access_token.get_secret_value().strip() if settings.access_token else ""
        if token:
            client.access_token = token
            answer: Any = await client.whoami()
            setting = "SWITCHBOARD_MATRIX__ACCESS_TOKEN"
            if isinstance(answer, WhoamiResponse):
                return f"{answer.user_id} (device {answer.device_id or '?'}) on {where}"
        else:
            assert settings.password is not None
            answer = await client.login(
                settings.password.get_secret_value(), device_name="Switchboard doctor"
            )
            setting = "SWITCHBOARD_MATRIX__PASSWORD"
            if isinstance(answer, LoginResponse):
                await client.logout()
                return f"{answer.user_id} logs in on {where}"
    except (OSError, TimeoutError) as exc:
        raise ChannelTransientError(f"cannot reach {where} ({exc or type(exc).__name__})") from None
    finally:
        await client.close()
    code = str(getattr(answer, "status_code", "") or "")
    if code.startswith("M_"):
        raise ChannelPermanentError(f"{where} refused the login ({answer}); check {setting}")
    raise ChannelTransientError(f"cannot reach {where} ({answer})")
