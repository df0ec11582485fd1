"""Talk to the running gateway's web API from the command line.

``switchboard run`` serves its web API on a Unix socket in the data directory too
(:mod:`gateway.web.endpoint`); the command line calls it there, where the kernel tells the
server which user connected: the gateway's own user (or root) is the owner with nothing set
up, and nobody else can open the socket. Anything that wants the live gateway's web API
(``switchboard status``, ``switchboard web --sign-out-all``) starts here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp

from gateway.config.settings import Settings
from gateway.core.system.local_socket import reachable
from gateway.core.system.lock import holder
from gateway.web.endpoint import WebEndpoint, read_endpoint, socket_path

if TYPE_CHECKING:
    from gateway.store.cluster.nodes import NodeInfo

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


async def cluster_nodes(settings: Settings) -> list[NodeInfo]:
    """The running nodes of this home's cluster (PostgreSQL, ``storage.url``), the leader
    first, which no lock in this home shows: none on SQLite."""
    if settings.storage.url is None:
        return []
    import time  # noqa: PLC0415

    from gateway.runtime.storage import store_for  # noqa: PLC0415

    async with store_for(settings, migrates=False) as store:
        return [n for n in await store.nodes.listing() if n.alive(time.time())]


async def call(settings: Settings, method: str, path: str) -> Any:
    """``method path`` (``GET api/status``) of the running gateway, over its Unix socket;
    the JSON answer (503 bodies too: ``/readyz`` says "not ready" that way)."""
    where = socket_path(settings.data_dir)
    url = "http://localhost/" + path.lstrip("/")
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
    try:
        with reachable(where) as name:
            async with (
                aiohttp.ClientSession(
                    connector=aiohttp.UnixConnector(path=name), timeout=timeout, trust_env=False
                ) as session,
                session.request(method, url) as response,
            ):
                if response.status not in (200, 503):
                    raise GatewayUnreachable(f"{where}: {path} answered HTTP {response.status}")
                return await response.json()
    except (aiohttp.ClientError, TimeoutError, ValueError, OSError) as exc:
        raise GatewayUnreachable(f"{where} did not answer: {exc or type(exc).__name__}") from exc


async def get_json(settings: Settings, path: str) -> Any:
    return await call(settings, "GET", path)
