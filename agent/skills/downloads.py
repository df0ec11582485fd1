"""Downloading an index or an archive: public https addresses only, capped in size and time.

The same SSRF guard as ``web_fetch`` (:mod:`agent.web.ssrf`) judges every address, at the
URL and again at connect time, and every redirect is followed by hand and judged again. A
registry on the loopback or a private network is refused in production; the tests serve
theirs on 127.0.0.1 and say so explicitly with :meth:`Reach.for_tests`, which no setting
reaches.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from yarl import URL

from agent.web.ssrf import AddressPolicy, BlockedTarget, Guard

if TYPE_CHECKING:
    import aiohttp

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5
USER_AGENT = "Switchboard skills"


class DownloadError(Exception):
    """The URL is refused or could not be downloaded; the message says why."""


@dataclass(frozen=True, slots=True)
class Reach:
    """Where skills may be downloaded from: https, public addresses."""

    guard: Guard = field(default_factory=Guard)
    schemes: frozenset[str] = frozenset({"https"})

    @classmethod
    def for_tests(cls, *hosts: str) -> Reach:
        """Plain http and the given private hosts too: a registry the tests serve locally."""
        return cls(Guard(AddressPolicy(hosts)), frozenset({"http", "https"}))

    async def vet(self, url: URL) -> None:
        """Refuse a URL this reach does not allow (resolving its host to judge it)."""
        if url.scheme not in self.schemes:
            allowed = " or ".join(sorted(self.schemes))
            raise DownloadError(f"{url} is refused: skills are downloaded over {allowed} only")
        try:
            await self.guard.vet_url(url)
        except BlockedTarget as exc:
            raise DownloadError(f"{url} is refused: {exc}") from None
        except OSError as exc:
            raise DownloadError(f"could not resolve {url.host}: {exc}") from None


class Downloads:
    def __init__(self, reach: Reach | None = None, *, timeout: float = 60.0) -> None:
        self.reach = reach or Reach()
        self._timeout = timeout

    async def get(self, url: str, *, max_bytes: int) -> bytes:
        """The body at ``url``; :class:`DownloadError` past ``max_bytes`` or on any failure."""
        try:
            target = URL(url.strip())
        except (ValueError, TypeError) as exc:
            raise DownloadError(f"{url!r} is not a valid URL: {exc}") from None
        try:
            async with asyncio.timeout(self._timeout):
                return await self._follow(target, max_bytes)
        except TimeoutError:
            raise DownloadError(f"{url}: no complete answer within {self._timeout:g}s") from None

    async def _follow(self, url: URL, max_bytes: int) -> bytes:
        import aiohttp  # noqa: PLC0415 - only when something is downloaded

        from agent.web.connect import guarded_connector  # noqa: PLC0415 - imports aiohttp

        async with aiohttp.ClientSession(
            connector=guarded_connector(self.reach.guard),
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,  # a proxy would connect for us, past the address checks
            headers={"User-Agent": USER_AGENT},
        ) as session:
            for _hop in range(MAX_REDIRECTS + 1):
                await self.reach.vet(url)
                try:
                    async with session.get(url, allow_redirects=False) as response:
                        location = response.headers.get("Location")
                        if response.status in REDIRECT_STATUSES and location:
                            url = url.join(URL(location))
                            continue
                        if response.status >= 400:
                            raise DownloadError(
                                f"{url}: the server answered HTTP {response.status}"
                            )
                        return await _read(response, url, max_bytes)
                except aiohttp.ClientError as exc:
                    raise DownloadError(f"{url}: {exc or type(exc).__name__}") from None
                except BlockedTarget as exc:
                    raise DownloadError(f"{url} is refused: {exc}") from None
        raise DownloadError(f"{url}: more than {MAX_REDIRECTS} redirects")


async def _read(response: aiohttp.ClientResponse, url: URL, max_bytes: int) -> bytes:
    body = bytearray()
    async for chunk in response.content.iter_any():
        body += chunk
        if len(body) > max_bytes:
            response.close()
            raise DownloadError(f"{url} is larger than {max_bytes} bytes")
    return bytes(body)
