"""Fetching one web page for the agent: public addresses only, capped in size and time.

Redirects are followed by hand (at most ``max_redirects``) so that every hop's scheme, host
and resolved addresses go through the :class:`~agent.web.ssrf.Guard` again. The body is
streamed and reading stops at ``max_bytes``; binary content is refused after looking at
its first bytes, before the rest is downloaded.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from yarl import URL

from agent.web.ssrf import BlockedTarget, Guard

if TYPE_CHECKING:
    import aiohttp

Kind = Literal["html", "text", "json"]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
SNIFF_BYTES = 1024
DEFAULT_USER_AGENT = "Mozilla/5.0 (compatible; Switchboard/0.1; +web_fetch)"
ACCEPT = "text/html,application/xhtml+xml,text/plain,text/markdown,application/json;q=0.9,*/*;q=0.1"

_KINDS: dict[str, Kind] = {
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/json": "json",
    "text/json": "json",
    "application/xml": "text",
    "application/rss+xml": "text",
    "application/atom+xml": "text",
    "application/javascript": "text",
}
_UNLABELLED = frozenset({"", "application/octet-stream", "binary/octet-stream"})
_BINARY_MAGIC = {
    b"%PDF": "a PDF document",
    b"\x89PNG": "a PNG image",
    b"GIF8": "a GIF image",
    b"\xff\xd8\xff": "a JPEG image",
    b"RIFF": "a media file",
    b"PK\x03\x04": "a ZIP archive (or office document)",
    b"\x1f\x8b": "a gzip archive",
    b"7z\xbc\xaf": "a 7-zip archive",
    b"\x7fELF": "a program",
    b"\x00\x00\x00": "a binary file",
}


class FetchError(Exception):
    """The page could not be fetched; the message says why, for the model and the user."""


class UnsupportedContent(FetchError):
    """The URL serves something that is not a web page, text or JSON (PDF, image, archive)."""


@dataclass(frozen=True, slots=True)
class FetchLimits:
    timeout: float = 20.0  # the whole fetch, redirects included
    max_bytes: int = 2_000_000  # of the body after decompression; reading stops there
    max_redirects: int = 5


@dataclass(frozen=True, slots=True)
class Page:
    url: str  # after redirects
    kind: Kind
    content_type: str
    charset: str | None
    body: bytes
    truncated: bool  # the body was longer than max_bytes


def classify(media_type: str, head: bytes) -> Kind:
    """What the body is, from its declared media type and its first bytes."""
    for magic, what in _BINARY_MAGIC.items():
        if head.startswith(magic):
            raise UnsupportedContent(f"it is {what} ({media_type or 'no content type'})")
    if b"\x00" in head:
        raise UnsupportedContent(f"it is binary data ({media_type or 'no content type'})")
    if media_type in _KINDS:
        return _KINDS[media_type]
    if media_type.endswith("+json"):
        return "json"
    if media_type.startswith("text/") or media_type.endswith("+xml"):
        return "text"
    if media_type not in _UNLABELLED:
        raise UnsupportedContent(f"it is {media_type}, not a web page, text or JSON")
    start = head.lstrip()[:512].lower()
    if start.startswith((b"<!doctype html", b"<html")) or b"<html" in start:
        return "html"
    if start.startswith((b"{", b"[")):
        return "json"
    return "text"


class PageFetcher:
    """GET one URL through the guard. Each fetch has its own session (no shared cookies)."""

    def __init__(
        self,
        guard: Guard | None = None,
        limits: FetchLimits | None = None,
        *,
        user_agent: str = DEFAULT_USER_AGENT,
    ) -> None:
        self.guard = guard or Guard()
        self.limits = limits or FetchLimits()
        self._user_agent = user_agent

    async def fetch(self, url: str) -> Page:
        """The page at ``url``; raises BlockedTarget, FetchError or UnsupportedContent."""
        try:
            target = URL(url.strip())
        except (ValueError, TypeError) as exc:
            raise FetchError(f"{url!r} is not a valid URL: {exc}") from None
        try:
            async with asyncio.timeout(self.limits.timeout):
                return await self._follow(target)
        except TimeoutError:
            raise FetchError(f"timed out after {self.limits.timeout:g}s") from None

    async def _follow(self, url: URL) -> Page:
        import aiohttp  # noqa: PLC0415 - on first fetch, not at start-up

        from agent.web.connect import guarded_connector  # noqa: PLC0415 - imports aiohttp

        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.limits.timeout)
        async with aiohttp.ClientSession(
            connector=guarded_connector(self.guard),
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,  # a proxy would connect for us, past the address checks
            timeout=timeout,
            headers={"User-Agent": self._user_agent, "Accept": ACCEPT},
        ) as session:
            for _hop in range(self.limits.max_redirects + 1):
                await self._vet(url)
                try:
                    async with session.get(url, allow_redirects=False) as response:
                        location = response.headers.get("Location")
                        if response.status in REDIRECT_STATUSES and location:
                            url = _join(url, location)
                            continue
                        if response.status >= 400:
                            raise FetchError(
                                f"the server answered HTTP {response.status} {response.reason or ''}".rstrip()
                            )
                        return await self._read(response)
                except aiohttp.ClientError as exc:
                    raise FetchError(f"could not fetch {url.host}: {_describe(exc)}") from None
        raise FetchError(f"stopped after {self.limits.max_redirects} redirects")

    async def _vet(self, url: URL) -> None:
        try:
            await self.guard.vet_url(url)
        except BlockedTarget:
            raise
        except OSError as exc:
            raise FetchError(f"could not resolve {url.host}: {exc}") from None

    async def _read(self, response: aiohttp.ClientResponse) -> Page:
        declared = response.headers.get("Content-Type", "")
        media_type = declared.split(";", 1)[0].strip().lower()
        limit = self.limits.max_bytes
        body = bytearray()
        kind: Kind | None = None
        truncated = False
        try:
            async for chunk in response.content.iter_any():
                body += chunk
                if kind is None and len(body) >= SNIFF_BYTES:
                    kind = classify(media_type, bytes(body[:SNIFF_BYTES]))
                if len(body) > limit:
                    truncated = True
                    del body[limit:]
                    break
            if kind is None:
                kind = classify(media_type, bytes(body[:SNIFF_BYTES]))
        finally:
            if truncated or kind is None:
                response.close()  # drop the connection instead of downloading the rest
        return Page(
            url=str(response.url),
            kind=kind,
            content_type=media_type or "unlabelled",
            charset=response.charset,
            body=bytes(body),
            truncated=truncated,
        )


def _join(base: URL, location: str) -> URL:
    try:
        return base.join(URL(location))
    except ValueError as exc:
        raise FetchError(f"the server redirected to an invalid URL: {exc}") from None


def _describe(exc: aiohttp.ClientError) -> str:
    os_error = getattr(exc, "os_error", None)  # ClientConnectorError
    if isinstance(os_error, OSError):
        return f"connection failed ({os_error.strerror or os_error})"
    return str(exc) or type(exc).__name__
