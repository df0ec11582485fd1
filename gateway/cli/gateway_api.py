"""Talk to the running gateway's loopback web API from the command line.

``switchboard run`` writes where its web server listens (:mod:`gateway.web.endpoint`); this
finds it and calls it as a browser on this machine would: no credentials on a loopback bind
without ``web.token``, ``Authorization: Bearer <web.token>`` otherwise. Anything that wants
the live gateway (``switchboard status``, an attached terminal chat) starts here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp

from gateway.config.settings import Settings
from gateway.core.lock import holder
from gateway.web.endpoint import WebEndpoint, read_endpoint

TIMEOUT_SECONDS = 5.0


class GatewayUnreachable(Exception):
    """The gateway runs, but its web API did not answer (the message says why)."""


@dataclass(frozen=True, slots=True)
class RunningGateway:
    pid: int  # -1 when the lock holder did not write its pid
    endpoint: WebEndpoint | None  # None: it serves no web API (web.enabled = false)


def find_running(settings: Settings) -> RunningGateway | None:
    """The gateway process using this home, or None when none runs."""
    pid = holder(settings.data_dir / "switchboard.lock")
    if pid is None:
        return None
    endpoint = read_endpoint(settings.data_dir)
    if endpoint is not None and pid > 0 and endpoint.pid != pid:
        endpoint = None  # left behind by an earlier process
    return RunningGateway(pid, endpoint)


def auth_headers(settings: Settings) -> dict[str, str]:
    token = settings.web.token
    if token is None or not token.get_secret_value().strip():
        return {}
    return {"Authorization": f"Bearer {token.get_secret_value().strip()}"}


async def get_json(settings: Settings, endpoint: WebEndpoint, path: str) -> Any:
    """GET ``path`` (``api/status``) of the running gateway; 503 bodies are returned too
    (``/readyz`` says "not ready" that way)."""
    url = endpoint.url.rstrip("/") + "/" + path.lstrip("/")
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout, trust_env=False) as session,
            session.get(url, headers=auth_headers(settings)) as response,
        ):
            if response.status == 401:
                raise GatewayUnreachable(
                    f"{url} wants the web token: set SWITCHBOARD_WEB__TOKEN as the gateway has it"
                )
            if response.status not in (200, 503):
                raise GatewayUnreachable(f"{url} answered HTTP {response.status}")
            return await response.json()
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise GatewayUnreachable(f"{url} did not answer: {exc or type(exc).__name__}") from exc
