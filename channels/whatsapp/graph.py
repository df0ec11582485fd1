"""A thin client of the WhatsApp Cloud API (Meta's Graph API), on aiohttp.

Why our own and not pywa: the calls we need are few (send a message, mark read with a
typing indicator, upload and fetch media, and the reads ``doctor`` makes), pywa fixes the
host to graph.facebook.com (we need ``whatsapp.base_url`` for tests and proxies) and brings
httpx and its own webhook server integrations, while our webhook must journal before it
answers on the gateway's own aiohttp server. Errors come back as :class:`GraphError` with
Meta's numeric code, which :mod:`.errors` turns into the outbox's error types.

Each request is made once (no retries here: a repeated send could deliver twice; the
outbox decides). The access token goes only to the Graph API's host and, for media, to
Meta's CDN hosts (:func:`media_host_allowed`): a URL in a webhook is data.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import mimetypes
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from gateway.core.system.bodies import read_capped

TIMEOUT = aiohttp.ClientTimeout(total=60, connect=10)
MEDIA_HOSTS = ("fbsbx.com", "facebook.com", "fbcdn.net", "whatsapp.net")


class GraphError(Exception):
    """The Graph API refused a request: ``code`` is Meta's error code (131047, 130429, ...)."""

    def __init__(
        self, status: int, code: int, message: str, *, subcode: int = 0, details: str = ""
    ) -> None:
        super().__init__(f"{code}: {message}" + (f" ({details})" if details else ""))
        self.status = status
        self.code = code
        self.subcode = subcode
        self.message = message
        self.details = details
        self.retry_after: float | None = None


class GraphUnreachable(Exception):
    """No answer (connection refused, reset, timed out); ``sent`` when the request may
    have reached Meta before the connection failed."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


def media_host_allowed(url: str, api_base: str) -> bool:
    """Whether the token may go to ``url``: Meta's media hosts or the API's own host."""
    host = (urlsplit(url).hostname or "").lower()
    if urlsplit(url).scheme not in ("https", "http") or not host:
        return False
    if host == (urlsplit(api_base).hostname or "").lower():
        return True
    return urlsplit(url).scheme == "https" and any(
        host == allowed or host.endswith("." + allowed) for allowed in MEDIA_HOSTS
    )


class GraphClient:
    def __init__(self, base_url: str, token: str, *, phone_number_id: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.phone_number_id = phone_number_id
        self._token = token
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=TIMEOUT)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"}

    # -- calls ----------------------------------------------------------------------------

    async def send(self, payload: dict[str, Any]) -> str:
        """``POST /<phone number id>/messages``; returns the new message's id (``wamid.…``)."""
        body = {"messaging_product": "whatsapp", "recipient_type": "individual", **payload}
        data = await self.request("POST", f"{self.phone_number_id}/messages", json_body=body)
        messages = data.get("messages") or [{}]
        return str(messages[0].get("id") or "")

    async def mark_read(self, message_id: str, *, typing: bool) -> None:
        """Blue ticks for ``message_id``, with "typing…" for up to 25 s when ``typing``."""
        body: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": message_id,
        }
        if typing:
            body["typing_indicator"] = {"type": "text"}
        await self.request("POST", f"{self.phone_number_id}/messages", json_body=body)

    async def upload(self, path: Path, mime_type: str | None) -> str:
        """Upload a file for sending; returns its media id."""
        mime = mime_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        form = aiohttp.FormData()
        form.add_field("messaging_product", "whatsapp")
        form.add_field("type", mime)
        data = await asyncio.to_thread(path.read_bytes)
        form.add_field("file", data, filename=path.name, content_type=mime)
        answer = await self.request("POST", f"{self.phone_number_id}/media", form=form)
        return str(answer.get("id") or "")

    async def media_info(self, media_id: str) -> dict[str, Any]:
        """Where an inbound file can be fetched (``url``, valid for minutes), its type, size."""
        return await self.request("GET", media_id)

    async def download(self, url: str, max_bytes: int) -> bytes | None:
        """The file at ``url`` (a media URL), or None when it is larger than ``max_bytes``."""
        if not media_host_allowed(url, self.base_url):
            raise GraphUnreachable(f"not a WhatsApp media address: {url}", sent=False)
        try:
            async with self._http().get(url, headers=self._auth) as response:
                if response.status >= 400:
                    raise GraphError(
                        response.status, 0, f"media download answered {response.status}"
                    )
                return await read_capped(response.content, max_bytes)
        except aiohttp.ClientError as exc:
            raise GraphUnreachable(str(exc) or type(exc).__name__, sent=False) from exc

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: dict[str, Any] | None = None,
        form: aiohttp.FormData | None = None,
        params: dict[str, str] | None = None,
        token: str | None = None,
    ) -> dict[str, Any]:
        """One Graph API call; the JSON answer, or :class:`GraphError` / :class:`GraphUnreachable`."""
        url = f"{self.base_url}/{path.lstrip('/')}"
        headers = {"Authorization": f"Bearer {token or self._token}"}
        try:
            async with self._http().request(
                method, url, json=json_body, data=form, params=params, headers=headers
            ) as response:
                text = await response.text()
                return _answer(response.status, text, response.headers)
        except aiohttp.ClientConnectorError as exc:  # never connected: nothing was sent
            raise GraphUnreachable(str(exc) or type(exc).__name__, sent=False) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise GraphUnreachable(str(exc) or type(exc).__name__, sent=True) from exc


def _answer(status: int, text: str, headers: Any) -> dict[str, Any]:
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    if status < 400 and "error" not in data:
        return data
    found = data.get("error")
    error: dict[str, Any] = found if isinstance(found, dict) else {}
    details = (error.get("error_data") or {}).get("details")
    exc = GraphError(
        status,
        int(error.get("code") or 0),
        str(error.get("message") or text[:200] or f"HTTP {status}"),
        subcode=int(error.get("error_subcode") or 0),
        details=str(details or ""),
    )
    retry_after = headers.get("Retry-After") if headers is not None else None
    if retry_after:
        with contextlib.suppress(ValueError):
            exc.retry_after = max(0.0, float(retry_after))
    raise exc
