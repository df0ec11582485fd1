"""URLs that carry a user name and password (``http://user:secret@host:8080/v1``).

Putting a password in a server's URL is the usual way to reach a model server behind a
proxy that asks for one (nginx's basic auth in front of Ollama or vLLM). Such a URL is a
secret: wherever it is shown (a notice, the log, ``switchboard doctor``, a trace) it is
shown without the user name and password (:func:`shown_url`), and an HTTP client gets them
as the ``Authorization: Basic`` header (:func:`basic_auth`), which is what the URL means
and what clients that read it themselves would send.
"""

from __future__ import annotations

import base64
from urllib.parse import unquote, urlsplit, urlunsplit


def has_userinfo(url: str | None) -> bool:
    """Whether ``url`` names a user (and maybe a password) before its host."""
    return bool(url) and "@" in urlsplit(url or "").netloc


def shown_url(url: str) -> str:
    """``url`` without its user name and password: what may be shown to anyone."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def basic_auth(url: str | None) -> tuple[str | None, str | None]:
    """``url`` without its user name and password, and the ``Authorization`` header's value
    that sends them (``None`` when it has none)."""
    if url is None or not has_userinfo(url):
        return url, None
    userinfo = urlsplit(url).netloc.rpartition("@")[0]
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    return shown_url(url), f"Basic {token}"
