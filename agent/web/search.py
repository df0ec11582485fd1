"""Web search through DuckDuckGo with the maintained ``ddgs`` package.

``duckduckgo_search`` stopped at 8.1.1 (2025-07) and warns on use that it was renamed to
``ddgs``, so we depend on ``ddgs`` only. ddgs is synchronous and loads a native HTTP
client, so it is imported on first use and the tool runs it in a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SearchHit:
    title: str
    url: str
    snippet: str


class SearchUnavailable(Exception):
    """Search cannot answer now (network down, rate limit, timeout); the message says which."""


# (query, max_results) -> hits, called in a worker thread. Tests pass a fake.
SearchBackend = Callable[[str, int], Sequence[SearchHit]]


def ddgs_backend(*, timeout: int = 10, region: str = "us-en") -> SearchBackend:
    """DuckDuckGo's text search; no results is an empty list, any failure SearchUnavailable."""

    def search(query: str, max_results: int) -> list[SearchHit]:
        from ddgs import DDGS  # noqa: PLC0415 - imported on first search

        try:
            rows = DDGS(timeout=timeout).text(
                query, max_results=max_results, backend="duckduckgo", region=region
            )
        except Exception as exc:
            unavailable = unavailable_reason(exc)
            if unavailable is None:
                return []
            raise SearchUnavailable(unavailable) from exc
        return [
            SearchHit(
                title=" ".join(str(row.get("title", "")).split()),
                url=str(row["href"]),
                snippet=" ".join(str(row.get("body", "")).split()),
            )
            for row in rows
            if row.get("href")
        ]

    return search


def unavailable_reason(exc: Exception) -> str | None:
    """Why ddgs failed, for the user; None when it only found nothing."""
    from ddgs.exceptions import (  # noqa: PLC0415 - imported on first search
        DDGSException,
        RatelimitException,
        TimeoutException,
    )

    if not isinstance(exc, DDGSException):  # the HTTP client's own errors
        return f"DuckDuckGo could not be reached ({type(exc).__name__}: {exc})"
    # ddgs wraps the engine's error as the first argument of a plain DDGSException.
    cause = exc.args[0] if exc.args and isinstance(exc.args[0], Exception) else exc
    if isinstance(cause, RatelimitException):
        return "DuckDuckGo is rate-limiting requests"
    if isinstance(cause, TimeoutException) or "timed out" in str(cause).lower():
        return "DuckDuckGo did not answer in time"
    if "no results" in str(cause).lower():
        return None
    return f"DuckDuckGo search failed ({cause})"
