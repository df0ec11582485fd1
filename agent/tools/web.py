"""``web_search`` and ``web_fetch``: the agent reads the web; all it reads is marked untrusted.

Both results carry ``untrusted=True`` (so guards know the turn has seen outside text) and
are wrapped between marker lines that tell the model the text is data from outside, not
instructions. Marker look-alikes inside the text are defused, so a page cannot close the
wrapper early and continue as if it were us.

A fetch reaches a server of the page's choosing with an address of the model's making:
after outside content, ``web_fetch`` goes without approval only to an address the turn has
seen (the person's message, a link on a page it read, a search result:
:mod:`agent.web.seen`), never to one the model built, which could carry what the turn read
(``?d=<the owner's memory>``). A search's words go only to the configured search service,
which the page does not choose, so ``web_search`` stays free.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from yarl import URL

from agent.llm.metered import MeteredModel
from agent.tools.base import Outside, Tool, ToolContext, ToolError, ToolResult, schema
from agent.untrusted import wrap_untrusted
from agent.web.browser import Browser, BrowserSettings
from agent.web.fetch import FetchError, FetchLimits, PageFetcher, UnsupportedContent
from agent.web.pages import CHARS_PER_TOKEN, Budget, Summarizer, fit, llm_summarizer
from agent.web.reader import Mode, PageReader
from agent.web.render import RenderLimits
from agent.web.search import SearchBackend, SearchUnavailable, ddgs_backend
from agent.web.seen import canonical
from agent.web.ssrf import AddressPolicy, BlockedTarget, Guard, HostOutOfBounds
from agent.workspace import ATTACHMENTS
from gateway.config.settings import WebToolSettings
from gateway.core.errors import ConfigError
from gateway.core.messages import Attachment

MAX_SNIPPET_CHARS = 300


class WebSearch(Tool):
    name = "web_search"
    description = "Search the web: title, URL and snippet per result (read one with web_fetch)."
    parameters = schema(
        {
            "query": {"type": "string", "minLength": 1, "maxLength": 500},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 10},
        },
        ("query",),
    )
    shows_links = True  # a result's address may be read next

    def __init__(
        self,
        *,
        search: SearchBackend | None = None,
        timeout: float = 15.0,
        default_results: int = 5,
    ) -> None:
        self._search = search or ddgs_backend(timeout=max(1, int(timeout)))
        self._timeout = timeout
        self._default_results = default_results

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = " ".join(str(args["query"]).split())
        if not query:
            raise ToolError("query is empty")
        count = int(args.get("max_results") or self._default_results)
        try:
            # ddgs is synchronous; a timed-out thread finishes on its own (ddgs has a timeout too).
            hits = await asyncio.wait_for(
                asyncio.to_thread(self._search, query, count), self._timeout
            )
        except TimeoutError:
            raise ToolError(_unavailable(f"no answer within {self._timeout:g}s")) from None
        except SearchUnavailable as exc:
            raise ToolError(_unavailable(str(exc))) from None
        if not hits:
            return ToolResult(f'No web results for "{query}".')
        lines = []
        for number, hit in enumerate(hits[:count], 1):
            snippet = hit.snippet
            if len(snippet) > MAX_SNIPPET_CHARS:
                snippet = snippet[:MAX_SNIPPET_CHARS].rsplit(" ", 1)[0] + " …"
            lines.append(f"{number}. {hit.title or '(no title)'}\n   {hit.url}\n   {snippet}")
        body = "\n".join(lines)
        return ToolResult(wrap_untrusted(f'search results for "{query}"', body), untrusted=True)

    def read_from(self, args: dict[str, Any]) -> Outside:
        return Outside("web search results", str(args.get("query", "")))


def _unavailable(reason: str) -> str:
    return (
        f"web search is unavailable right now: {reason}. Try again later, or answer "
        "without searching and say so."
    )


class WebFetch(Tool):
    name = "web_fetch"
    description = (
        "Read a public web page as markdown with links (text, JSON too); JavaScript pages "
        "open in a browser; long ones are condensed to what `question` asks. No private "
        "addresses."
    )
    parameters = schema(
        {
            "url": {"type": "string", "minLength": 1, "maxLength": 4000},
            "render": {"type": "boolean", "description": "Force the browser (slower)"},
            "screenshot": {
                "type": "boolean",
                "description": "Also a picture of the page, sent with your answer",
            },
            "max_chars": {"type": "integer", "minimum": 500},
            "question": {"type": "string", "maxLength": 1000},
        },
        ("url",),
    )
    shows_links = True  # a link on the page may be followed

    def __init__(
        self,
        *,
        fetcher: PageFetcher | None = None,
        browser: Browser | None = None,
        mode: Mode = "auto",
        summarizer: Summarizer | None = None,
        budget: Budget | None = None,
    ) -> None:
        self._reader = PageReader(fetcher or PageFetcher(), browser, mode)
        self._summarizer = summarizer
        self._budget = budget or Budget()

    def guarded_action(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        return unseen(str(args["url"]), ctx)

    def read_from(self, args: dict[str, Any]) -> Outside:
        return Outside("a web page", str(args.get("url", "")))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        url = str(args["url"]).strip()
        reader = self._reader
        bounds = ctx.state.bounds
        if bounds.narrowed:
            # Only the hosts the turn's skills declared, redirects included; no browser (a
            # rendered page loads from any host).
            fetcher = reader.fetcher
            guard = fetcher.guard.confined(bounds.host_refusal)
            reader = PageReader(PageFetcher(guard, fetcher.limits), None, "off")
        try:
            reading = await reader.read(
                url, render=bool(args.get("render")), screenshot=bool(args.get("screenshot"))
            )
        except HostOutOfBounds as exc:
            raise ToolError(f"web_fetch refused {url}: {exc}.") from None
        except BlockedTarget as exc:
            raise ToolError(
                f"web_fetch refused {url}: {exc}. Only public web addresses can be fetched."
            ) from None
        except UnsupportedContent as exc:
            raise ToolError(
                f"web_fetch reads web pages, text and JSON only; {url} cannot be read: {exc}."
            ) from None
        except FetchError as exc:
            raise ToolError(f"could not fetch {url}: {exc}") from None
        budget = self._budget
        if args.get("max_chars"):
            tokens = max(1, int(args["max_chars"]) // CHARS_PER_TOKEN)
            budget = replace(budget, tokens=min(budget.tokens, tokens))
        question = str(args.get("question") or "").strip()
        purpose = f"Keep what answers: {question}" if question else "Keep the main points."
        summarize = None if self._summarizer is None else self._summarizer(ctx.charge)
        condensed = await fit(reading.text, budget=budget, purpose=purpose, summarize=summarize)
        files: tuple[Attachment, ...] = ()
        if reading.screenshot is not None:
            files = (await save_screenshot(ctx.workspace.root, reading.url, reading.screenshot),)
        lines = []
        if reading.title:
            lines.append(f"Title: {reading.title}")
        if reading.url != str(URL(url)):  # redirected
            lines.append(f"URL: {reading.url}")
        lines.extend(f"({note})" for note in reading.notes)
        lines.extend(
            f"(a screenshot of the page is attached; the user receives it with your answer: "
            f"{ctx.workspace.relative(Path(f.path or ''))})"
            for f in files
        )
        if condensed.parts:
            lines.append(
                f"(the page has {condensed.original_chars} characters of text, condensed "
                f"from {condensed.parts} parts; pass `question` to focus on what you need)"
            )
        elif condensed.cut:
            lines.append(
                f"(the page has {condensed.original_chars} characters of text; "
                f"only the beginning is shown)"
            )
        lines.append("")
        lines.append(condensed.text or "(the page has no readable text)")
        return ToolResult(
            wrap_untrusted(f"content from {reading.url}", "\n".join(lines)),
            untrusted=True,
            files=files,
        )


def unseen(url: str, ctx: ToolContext) -> str | None:
    """For a tainted turn's fetch: what going to ``url`` does when the turn has not seen
    that address (the model built it, and it could carry what the turn read), else
    ``None``."""
    address = canonical(url)
    if address is None or address in ctx.state.seen:
        return None  # seen; or no web address at all, which the guard refuses as it runs
    return (
        "goes to a web address that is neither in the person's message nor in anything "
        "the turn read (the model made it up or changed it, so the address itself could "
        "carry what the turn read to that site)"
    )


async def save_screenshot(workspace: Path, url: str, png: bytes) -> Attachment:
    """Store a page's screenshot with the other files from outside (``attachments/web/``)."""
    host = re.sub(r"[^a-z0-9.-]+", "-", (URL(url).host or "page").lower())[:60]
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    path = workspace / ATTACHMENTS / "web" / day / f"{host}-{secrets.token_hex(4)}.png"

    def write() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png)

    await asyncio.to_thread(write)
    return Attachment(
        "image",
        path=str(path),
        mime_type="image/png",
        filename=path.name,
        size=len(png),
        note=f"Screenshot of {url}",
    )


def web_tools(
    settings: WebToolSettings,
    *,
    llm: MeteredModel | None = None,
    browser: Browser | None = None,
) -> list[Tool]:
    """Both web tools from ``[tools.web]``; with ``llm`` long pages are condensed by it, with
    ``browser`` (see :func:`web_browser`) pages that need scripts are rendered."""
    limits = FetchLimits(
        timeout=settings.timeout_seconds,
        max_bytes=settings.max_bytes,
        max_redirects=settings.max_redirects,
    )
    budget = Budget(
        tokens=settings.page_token_budget,
        chunk_tokens=settings.chunk_tokens,
        max_chunks=settings.max_chunks,
        concurrency=settings.summarize_concurrency,
    )
    return [
        WebSearch(
            timeout=settings.search_timeout_seconds,
            default_results=settings.search_max_results,
        ),
        WebFetch(
            fetcher=PageFetcher(web_guard(settings), limits),
            browser=browser,
            mode=settings.browser,
            summarizer=llm_summarizer(llm) if llm is not None else None,
            budget=budget,
        ),
    ]


def web_guard(settings: WebToolSettings) -> Guard:
    return Guard(AddressPolicy(settings.allow_private_hosts))


def web_browser(settings: WebToolSettings) -> Browser | None:
    """The gateway's one browser for web_fetch (not launched yet), or None when switched off.

    ``always`` promises rendering, so a browser that cannot run here is a configuration
    error at start; ``auto`` reads pages without one and says so.
    """
    if not settings.enabled or settings.browser == "off":
        return None
    browser = Browser(
        web_guard(settings),
        RenderLimits(
            timeout=settings.browser_timeout_seconds,
            max_bytes=settings.browser_max_bytes,
        ),
        BrowserSettings(executable=settings.browser_path, memory_mb=settings.browser_memory_mb),
    )
    problem = browser.problem() if settings.browser == "always" else None
    if problem is not None:
        raise ConfigError(
            f"tools.web.browser is 'always' but {problem}; or set "
            "SWITCHBOARD_TOOLS__WEB__BROWSER=auto to read pages without a browser",
            field="tools.web.browser",
        )
    return browser
