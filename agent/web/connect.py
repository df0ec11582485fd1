"""The connect-time half of the SSRF guard: an aiohttp connector that judges every address.

Its resolver judges what a name resolves to when aiohttp is about to connect (and aiohttp
connects to exactly those addresses, so a second, different DNS answer never gets used),
and its socket factory judges the final address of every attempt, including IP literals,
for which aiohttp skips the resolver. Kept apart from :mod:`agent.web.ssrf` so importing
the tools does not import aiohttp; only a fetch does.
"""

from __future__ import annotations

import ipaddress
import socket

import aiohttp
from aiohappyeyeballs import AddrInfoType
from aiohttp.abc import AbstractResolver, ResolveResult

from agent.web.ssrf import Guard, IPAddress, normalise_host


def guarded_connector(guard: Guard) -> aiohttp.TCPConnector:
    """A connector for one fetch: every resolution and every socket is judged."""
    approved: set[IPAddress] = set()  # addresses of allowlisted names, for this fetch only

    def make_socket(addr_info: AddrInfoType) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        ip = ipaddress.ip_address(sockaddr[0])
        if ip not in approved:
            guard.check_address(ip, str(ip))
        return socket.socket(family, type_, proto)

    return aiohttp.TCPConnector(
        resolver=GuardedResolver(guard, approved),
        use_dns_cache=False,  # every connection resolves (and is judged) afresh
        happy_eyeballs_delay=None,  # one attempt at a time, so a refusal ends the fetch
        socket_factory=make_socket,
        limit=4,
    )


class GuardedResolver(AbstractResolver):
    """Resolves through the guard's lookup and refuses any answer that is not public."""

    def __init__(self, guard: Guard, approved: set[IPAddress]) -> None:
        self._guard = guard
        self._approved = approved

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        name = normalise_host(host)
        refusal = self._guard.policy.name_refusal(name)
        if refusal is not None:
            raise self._guard.refuse(name, refusal)
        allowed_name = self._guard.policy.name_allowed(name)
        results: list[ResolveResult] = []
        for ip in await self._guard.resolve(name, port):
            if allowed_name:
                self._approved.add(ip)
            else:
                self._guard.check_address(ip, name)
            ip_family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
            if family not in (socket.AF_UNSPEC, ip_family):
                continue
            results.append(
                {
                    "hostname": host,
                    "host": str(ip),
                    "port": port,
                    "family": ip_family,
                    "proto": 0,
                    "flags": socket.AI_NUMERICHOST,
                }
            )
        if not results:
            raise OSError(f"{host} has no usable address")
        return results

    async def close(self) -> None:
        return None
