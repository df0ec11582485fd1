"""Reading one page for ``web_fetch``: a plain fetch first, a real browser when it takes one.

``tools.web.browser`` decides (:data:`Mode`):

- ``auto``: the plain fetch is the fast path. When it returns HTML with little main text,
  or an empty single-page-app shell (:func:`~agent.web.extract.needs_scripts`), the page is
  rendered in the browser and the fuller of the two readings is kept. ``render`` and
  ``screenshot`` go to the browser directly.
- ``always``: every page goes to the browser first; what is not HTML (JSON, text, a PDF)
  is then read (or refused) by the plain fetcher.
- ``off``: never the browser; asking for it gets a note saying so.

When the browser cannot run here (no Chromium, no Playwright) or fails on a page, the
plain reading is returned with a note that says so, never nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Literal

from yarl import URL

from agent.web.browser import Browser
from agent.web.chromium import BrowserUnavailable
from agent.web.extract import html_to_markdown, needs_scripts, page_text
from agent.web.fetch import FetchError, PageFetcher
from agent.web.render import NotAPage, Rendered, RenderFailed
from agent.web.ssrf import BlockedTarget

Mode = Literal["auto", "always", "off"]
AS_SERVED = "this is the page as served, without running its scripts"
READ_IN_BROWSER = "read in a browser"


@dataclass(frozen=True, slots=True)
class Reading:
    url: str  # after redirects
    title: str | None
    text: str
    notes: tuple[str, ...] = ()  # for the model: how the page was read, what is missing
    rendered: bool = False
    screenshot: bytes | None = None  # PNG of the rendered page, when asked for
    needs_scripts: bool = False  # read as served, it seems to lack what scripts would add


class PageReader:
    def __init__(
        self, fetcher: PageFetcher, browser: Browser | None = None, mode: Mode = "auto"
    ) -> None:
        self.fetcher = fetcher
        self.browser = browser if mode != "off" else None
        self.mode = mode

    async def read(self, url: str, *, render: bool = False, screenshot: bool = False) -> Reading:
        """The page's text; raises BlockedTarget, FetchError or UnsupportedContent."""
        asked = render or screenshot
        if self.browser is None:
            why = (
                "rendering in a browser is switched off (tools.web.browser = off)"
                if self.mode == "off"
                else "no browser is set up for rendering"
            )
            return await self._plain(url, (f"{why}; {AS_SERVED}",) if asked else ())
        if asked or self.mode == "always":
            return await self._browser_first(self.browser, url, screenshot=screenshot)
        return await self._auto(self.browser, url)

    async def _browser_first(self, browser: Browser, url: str, *, screenshot: bool) -> Reading:
        await self._vet(url)
        try:
            rendered = await browser.render(url, screenshot=screenshot)
        except NotAPage:
            return await self._plain(url)  # JSON, text, a PDF: the plain fetcher's job
        except BrowserUnavailable as exc:
            return await self._plain(url, (_unavailable(exc, screenshot=screenshot),))
        except RenderFailed as exc:
            return await self._plain(
                url, (f"the browser could not render it ({exc}); {AS_SERVED}",)
            )
        return await _from_render(rendered)

    async def _auto(self, browser: Browser, url: str) -> Reading:
        plain = await self._plain(url)
        if not plain.needs_scripts:
            return plain
        try:
            rendered = await _from_render(await browser.render(plain.url))
        except BrowserUnavailable as exc:
            return _noted(plain, f"the page seems to need JavaScript, but {_unavailable(exc)}")
        except (RenderFailed, BlockedTarget) as exc:
            return _noted(plain, f"the page seems to need JavaScript; rendering it failed ({exc})")
        if len(rendered.text) < len(plain.text):
            return _noted(
                plain, "rendered in a browser it had less text, so this is the page as served"
            )
        if rendered.text.split() == plain.text.split():
            return plain  # a short page: a browser shows it as it was served, no more
        return _noted(rendered, "the page needs JavaScript, so it was read in a browser")

    async def _plain(self, url: str, notes: tuple[str, ...] = ()) -> Reading:
        page = await self.fetcher.fetch(url)
        extracted = await asyncio.to_thread(page_text, page)
        if page.truncated:
            notes = (*notes, f"only the first {len(page.body)} bytes of the page were downloaded")
        return Reading(
            page.url,
            extracted.title,
            extracted.text,
            notes,
            needs_scripts=page.kind == "html" and needs_scripts(page.body, extracted.text),
        )

    async def _vet(self, url: str) -> None:
        try:
            target = URL(url.strip())
        except (ValueError, TypeError) as exc:
            raise FetchError(f"{url!r} is not a valid URL: {exc}") from None
        try:
            await self.fetcher.guard.vet_url(target)
        except BlockedTarget:
            raise
        except OSError as exc:
            raise FetchError(f"could not resolve {target.host}: {exc}") from None


async def _from_render(rendered: Rendered) -> Reading:
    extracted = await asyncio.to_thread(html_to_markdown, rendered.html, url=rendered.url)
    return Reading(
        rendered.url,
        extracted.title,
        extracted.text,
        (READ_IN_BROWSER, *rendered.notes),
        rendered=True,
        screenshot=rendered.screenshot,
    )


def _unavailable(exc: BrowserUnavailable, *, screenshot: bool = False) -> str:
    missing = " and without a screenshot" if screenshot else ""
    return f"no browser could render it ({exc}); {AS_SERVED}{missing}"


def _noted(reading: Reading, note: str) -> Reading:
    return replace(reading, notes=(note, *(n for n in reading.notes if n != READ_IN_BROWSER)))
