"""The headless browser ``web_fetch`` renders pages with: one per gateway, long-lived (the
``browser`` tool's sessions run in another instance, agent.web.sessions).

Launched on the first page that needs it (start-up never waits for Chromium), reused by
every fetch after that, each fetch in a fresh context of its own. Restarted when it
misbehaves: a crashed page, a renderer that did not answer in time, a context that would
not close, the process tree over its memory limit, or simply after ``recycle_after``
pages. A browser that cannot be launched is remembered for a while, so fetches fall back
to plain reading at once instead of trying again each time.

The launch-level proxy is a proxy that refuses everything: only the per-fetch proxies of
:mod:`agent.web.render` let anything through, and only what the guard allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.web.chromium import (
    BrowserUnavailable,
    find_chromium,
    launch_args,
    sandbox_possible,
    tree_memory_mb,
)
from agent.web.proxy import GuardedProxy
from agent.web.render import (
    Rendered,
    RenderFailed,
    RenderLimits,
    RequestGate,
    open_guarded,
    render,
)
from agent.web.ssrf import Guard

if TYPE_CHECKING:
    from playwright.async_api import Browser as PlaywrightBrowser
    from playwright.async_api import BrowserContext, Page, Playwright

log = logging.getLogger(__name__)

LAUNCH_TIMEOUT = 30.0
RETRY_LAUNCH_AFTER = 300.0  # seconds a failed launch is remembered


@dataclass(frozen=True, slots=True)
class BrowserSettings:
    executable: str | None = None  # None: find one (see agent.web.chromium)
    memory_mb: int = 1_024  # resident memory of the whole browser; over it, restart
    concurrency: int = 2  # pages rendered at once
    recycle_after: int = 200  # pages per browser process


class Browser:
    """``async with Browser(guard) as browser: await browser.render(url)``."""

    def __init__(
        self,
        guard: Guard,
        limits: RenderLimits | None = None,
        settings: BrowserSettings | None = None,
        *,
        intercept: bool = True,
    ) -> None:
        self.guard = guard
        self.limits = limits or RenderLimits()
        self.settings = settings or BrowserSettings()
        self._intercept = intercept  # False only in tests of the proxy alone
        self._slots = asyncio.Semaphore(self.settings.concurrency)
        self._lock = asyncio.Lock()
        self._playwright: Playwright | None = None
        self._browser: PlaywrightBrowser | None = None
        self._deny_all: GuardedProxy | None = None
        self._marker = secrets.token_hex(8)
        self._pages = 0  # rendered by the current process
        self._retire = False  # restart before the next page
        self._active = 0  # pages being rendered now
        self._failed: tuple[float, str] | None = None  # (when, why) the last launch failed
        self.launches = 0

    def problem(self) -> str | None:
        """Why no browser can be used here (without launching one); None when one can."""
        try:
            find_chromium(self.settings.executable)
        except BrowserUnavailable as exc:
            return str(exc)
        return None

    async def start(self) -> Browser:
        return self  # launched lazily, by the first render

    async def stop(self) -> None:
        async with self._lock:
            await self._shut()

    async def __aenter__(self) -> Browser:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def probe(self) -> str:
        """Launch the browser (if it is not running) and name it: ``/usr/bin/chromium 156.0...``."""
        browser = await self._ready()
        return f"{find_chromium(self.settings.executable)} {browser.version}"

    async def memory_mb(self) -> float | None:
        """The browser's resident memory (all its processes); None when not measurable."""
        return await asyncio.to_thread(tree_memory_mb, self._marker)

    async def render(self, url: str, *, screenshot: bool = False) -> Rendered:
        """Render ``url``; BrowserUnavailable when no browser can run here."""
        async with self._slots:
            browser = await self._ready()
            from playwright.async_api import Error as PlaywrightError  # noqa: PLC0415 - launched

            self._active += 1
            healthy = True
            try:
                rendered = await render(
                    browser,
                    self.guard,
                    url,
                    self.limits,
                    screenshot=screenshot,
                    intercept=self._intercept,
                )
                healthy = rendered.healthy
            except RenderFailed as exc:
                healthy = exc.healthy
                raise
            except PlaywrightError as exc:  # the browser went away under us
                healthy = False
                raise RenderFailed(str(exc).strip().split("\n")[0], healthy=False) from None
            finally:
                self._active -= 1
                await self._after_page(healthy=healthy)
            return rendered

    async def open_session(
        self, proxy: GuardedProxy, gate: RequestGate, *, storage_state: dict[str, Any] | None
    ) -> tuple[BrowserContext, Page]:
        """A long-lived context and its page for one of the ``browser`` tool's sessions
        (agent.web.session), held to ``proxy`` and ``gate`` like a rendered page, with
        downloads allowed (its ``download`` action saves them); BrowserUnavailable when no
        browser can run here."""
        browser = await self._ready()
        return await open_guarded(
            browser,
            proxy,
            gate,
            intercept=self._intercept,
            downloads=True,
            storage_state=storage_state,
        )

    # -- the process ------------------------------------------------------------------

    async def _ready(self) -> PlaywrightBrowser:
        async with self._lock:
            if self._failed is not None:
                when, why = self._failed
                if time.monotonic() - when < RETRY_LAUNCH_AFTER:
                    raise BrowserUnavailable(why)
                self._failed = None
            browser = self._browser
            # A browser due for a restart finishes the pages it is rendering first.
            if (
                browser is not None
                and browser.is_connected()
                and (not self._retire or self._active > 0)
            ):
                return browser
            await self._shut()
            try:
                self._browser = await self._launch()
            except BrowserUnavailable as exc:
                self._failed = (time.monotonic(), str(exc))
                raise
            return self._browser

    async def _launch(self) -> PlaywrightBrowser:
        executable = find_chromium(self.settings.executable)
        try:
            browser = await self._start(executable)
        except Exception as exc:  # the driver or Chromium failed to start, however it did
            await self._shut()
            text = str(exc).strip()
            first = text.splitlines()[0] if text else type(exc).__name__
            raise BrowserUnavailable(f"{executable} did not start: {first}") from None
        self.launches += 1
        self._pages = 0
        self._retire = False
        log.info("browser started: %s %s", executable, browser.version)
        return browser

    async def _start(self, executable: Path) -> PlaywrightBrowser:
        from playwright.async_api import Error as PlaywrightError  # noqa: PLC0415
        from playwright.async_api import async_playwright  # noqa: PLC0415

        self._deny_all = await GuardedProxy(self.guard, max_bytes=0).start()
        self._playwright = await async_playwright().start()
        options: dict[str, Any] = {
            "executable_path": str(executable),
            "args": launch_args(
                js_heap_mb=max(64, self.settings.memory_mb // 4), marker=self._marker
            ),
            "proxy": {"server": self._deny_all.server},
            "timeout": LAUNCH_TIMEOUT * 1000,
            "handle_sigint": False,
            "handle_sigterm": False,
            "handle_sighup": False,
        }
        if sandbox_possible():
            try:
                return await self._playwright.chromium.launch(chromium_sandbox=True, **options)
            except PlaywrightError:
                log.warning(
                    "Chromium did not start with its sandbox (no user namespaces?); "
                    "rendering pages without it"
                )
        return await self._playwright.chromium.launch(chromium_sandbox=False, **options)

    async def _after_page(self, *, healthy: bool) -> None:
        """Decide whether the browser gets another page or is restarted first."""
        self._pages += 1
        reason = None
        if not healthy:
            reason = "it misbehaved"
        elif self._pages >= self.settings.recycle_after:
            reason = f"it rendered {self._pages} pages"
        else:
            memory = await self.memory_mb()
            if memory is not None and memory > self.settings.memory_mb:
                reason = f"it uses {memory:.0f} MB (limit {self.settings.memory_mb} MB)"
        if reason is not None and not self._retire:
            log.info("restarting the browser: %s", reason)
            self._retire = True

    async def _shut(self) -> None:
        browser, self._browser = self._browser, None
        playwright, self._playwright = self._playwright, None
        deny_all, self._deny_all = self._deny_all, None
        if browser is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10):
                    await browser.close()
        if playwright is not None:
            with contextlib.suppress(Exception):
                await playwright.stop()
        if deny_all is not None:
            await deny_all.stop()
