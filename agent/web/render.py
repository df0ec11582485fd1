"""One page rendered in a fresh browser context, every request of it behind the SSRF guard.

The context gets its own :class:`~agent.web.proxy.GuardedProxy` (the only way out) and,
as a second layer, a request route that refuses non-http(s) schemes, IP literals and
internal names before Chromium even asks the proxy, and caps the number of requests and
of documents (the page and its frames). Service workers are blocked, downloads refused,
popups closed as they open, permissions never granted, WebRTC removed from the page.
The context is closed afterwards, so no cookie or storage outlives the fetch.

Timing: open the page, wait for ``load`` and then for the network to go quiet (both
capped), scroll once to the bottom for lazily loaded content, wait briefly again, and take
the DOM. A page that never finishes is read as far as it got when its time is up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from yarl import URL

from agent.web.proxy import REFUSED_HEADER, GuardedProxy
from agent.web.ssrf import ALLOWED_SCHEMES, BlockedTarget, Guard, normalise_host, parse_ip

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Request, Route

log = logging.getLogger(__name__)
T = TypeVar("T")

VIEWPORT = {"width": 1280, "height": 900}
IDLE_WAIT = 3.0  # seconds of waiting for a quiet network after `load`
SCROLL_WAIT = 1.5  # and after scrolling once
READ_RESERVE = 2.0  # seconds kept back from the waits for reading the DOM and screenshot
CLOSE_TIMEOUT = 5.0
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
# WebRTC can open UDP paths the proxy never sees, and popups would load more pages; a
# page does not need either to be read. (The route refuses popups' requests as well.)
PAGE_RULES = """
for (const name of ['RTCPeerConnection', 'webkitRTCPeerConnection', 'RTCDataChannel']) {
  try { delete window[name]; } catch (e) {}
  try { Object.defineProperty(window, name, {value: undefined}); } catch (e) {}
}
try { window.open = function () { return null; }; } catch (e) {}
"""


class RenderFailed(Exception):
    """The browser could not produce the page; the message says why. ``healthy`` is False
    when the browser itself misbehaved (and should be restarted)."""

    def __init__(self, message: str, *, healthy: bool = True) -> None:
        super().__init__(message)
        self.healthy = healthy


class NavigationFailed(RenderFailed):
    """The page itself could not be opened (a network error, or a refused address)."""


class NotAPage(RenderFailed):
    """The URL serves something other than HTML; the plain fetcher reads (or refuses) it."""


@dataclass(frozen=True, slots=True)
class RenderLimits:
    timeout: float = 20.0  # the whole render
    max_bytes: int = 20_000_000  # moved by the page through the proxy, both directions
    max_requests: int = 500
    max_documents: int = 20  # the page, its redirects and its frames


@dataclass(frozen=True, slots=True)
class Rendered:
    url: str  # after redirects
    html: str
    status: int | None
    screenshot: bytes | None
    bytes: int  # moved through the proxy
    notes: tuple[str, ...] = ()  # limits reached, requests refused
    healthy: bool = True  # False: the browser misbehaved and should be restarted


@dataclass  # not slots: Playwright marks the bound route handler with attributes
class RequestGate:
    """The second layer: a Playwright route that judges each request before the proxy."""

    guard: Guard
    limits: RenderLimits
    page: Page | None = None  # the fetch's page; requests of any other page are refused
    requests: int = 0
    documents: int = 0
    refusals: list[str] = field(default_factory=list)

    def refusal(self, url: str, resource_type: str) -> str | None:
        target = URL(url)
        if target.scheme not in ALLOWED_SCHEMES:
            return f"{target.scheme}: URLs are not loaded"
        host = normalise_host(target.raw_host)
        literal = parse_ip(host)
        reason = (
            self.guard.policy.address_refusal(literal)
            if literal is not None
            else self.guard.policy.name_refusal(host)
        )
        if reason is not None:
            return f"{host} is {reason}"
        self.requests += 1
        if self.requests > self.limits.max_requests:
            return f"the page made more than {self.limits.max_requests} requests"
        if resource_type == "document":
            self.documents += 1
            if self.documents > self.limits.max_documents:
                return f"the page opened more than {self.limits.max_documents} documents"
        return None

    def next_step(self) -> None:
        """Count afresh: the browser tool's sessions have these limits per step, not per page."""
        self.requests = self.documents = 0
        self.refusals.clear()

    def _popup(self, request: Request) -> str | None:
        """A request of another page (a popup, a link opened in a new tab) is refused."""
        from playwright.async_api import Error as PlaywrightError  # noqa: PLC0415

        try:
            page = request.frame.page
        except PlaywrightError:  # no frame yet: a new window's first navigation, or a worker
            return "popups are not opened" if request.resource_type == "document" else None
        return "popups are not opened" if page is not self.page else None

    async def route(self, route: Route, request: Request) -> None:
        try:
            reason = self.refusal(request.url, request.resource_type) or self._popup(request)
        except ValueError:
            reason = "an invalid URL"
        if reason is None:
            await route.continue_()
            return
        self.refusals.append(reason)
        await route.abort("blockedbyclient")


async def open_guarded(
    browser: Browser,
    proxy: GuardedProxy,
    gate: RequestGate,
    *,
    intercept: bool = True,
    downloads: bool = False,
    storage_state: dict[str, Any] | None = None,
) -> tuple[BrowserContext, Page]:
    """A fresh context whose only way out is ``proxy``, with ``gate`` judging each request
    first, and its one page: service workers blocked, popups closed, WebRTC and
    ``window.open`` removed, downloads refused unless ``downloads``. ``storage_state``
    (cookies and local storage, as Playwright saves them) is what the browser tool's
    sessions keep in a profile; a rendered page starts with none."""
    context = await browser.new_context(
        proxy={"server": proxy.server},
        service_workers="block",
        accept_downloads=downloads,
        viewport=VIEWPORT,  # type: ignore[arg-type]
        locale="en-US",
        storage_state=storage_state,  # type: ignore[arg-type]
    )
    try:
        await context.add_init_script(PAGE_RULES)
        if intercept:
            await context.route("**/*", gate.route)
        page = gate.page = await context.new_page()
    except BaseException:
        await close_context(context)
        raise
    context.on("page", lambda other: _close_popup(other) if other is not page else None)
    return context, page


async def render(
    browser: Browser,
    guard: Guard,
    url: str,
    limits: RenderLimits,
    *,
    screenshot: bool,
    intercept: bool = True,
) -> Rendered:
    """The page at ``url`` as the browser shows it; BlockedTarget, NotAPage or RenderFailed.

    ``intercept=False`` leaves out the route (the second layer): tests use it to show that
    the proxy alone holds.
    """
    from playwright.async_api import Error as PlaywrightError  # noqa: PLC0415

    deadline = time.monotonic() + limits.timeout
    async with GuardedProxy(guard, max_bytes=limits.max_bytes) as proxy:
        gate = RequestGate(guard, limits)
        context, page = await open_guarded(browser, proxy, gate, intercept=intercept)
        try:
            crashed = asyncio.Event()
            page.on("crash", lambda _: crashed.set())
            try:
                async with asyncio.timeout_at(_loop_time(deadline)):
                    loaded = await _load(page, url, deadline, proxy.cut, screenshot=screenshot)
            except TimeoutError:  # a renderer that cannot answer in time may be stuck
                raise RenderFailed(
                    f"the page kept the browser busy past {limits.timeout:g}s", healthy=False
                ) from None
            except (PlaywrightError, RenderFailed) as exc:
                if crashed.is_set():  # its tab died (out of memory, most likely); not the browser
                    raise RenderFailed(
                        "the page crashed its browser tab (too much memory?)"
                    ) from None
                if isinstance(exc, PlaywrightError):  # the browser died under us
                    raise RenderFailed(first_line(exc), healthy=False) from None
                if not isinstance(exc, NavigationFailed):
                    raise
                refusals = [*gate.refusals, *proxy.traffic.refusals]
                if refusals:  # the page (or a redirect of it) is not a public address
                    raise BlockedTarget(refusals[-1]) from None
                raise
        finally:
            closed = await close_context(context)
    return Rendered(
        url=loaded.url,
        html=loaded.html,
        status=loaded.status,
        screenshot=loaded.screenshot,
        bytes=proxy.traffic.bytes,
        notes=_notes(limits, gate, proxy, timed_out=loaded.timed_out),
        healthy=closed and not crashed.is_set(),
    )


@dataclass(frozen=True, slots=True)
class _Loaded:
    url: str
    html: str
    status: int | None
    screenshot: bytes | None
    timed_out: bool


async def _load(
    page: Page, url: str, deadline: float, cut: asyncio.Event, *, screenshot: bool
) -> _Loaded:
    """Open, wait (capped; cut short when the byte budget is spent), scroll, read."""
    from playwright.async_api import Error as PlaywrightError  # noqa: PLC0415
    from playwright.async_api import TimeoutError as PlaywrightTimeout  # noqa: PLC0415

    def remaining(cap: float | None = None) -> float:
        left = deadline - time.monotonic() - READ_RESERVE
        return max(0.0, left if cap is None else min(cap, left)) * 1000

    timed_out = False
    response = None
    try:
        response = await _unless_cut(
            cut, page.goto(url, wait_until="domcontentloaded", timeout=remaining())
        )
    except PlaywrightTimeout:
        timed_out = True  # read what has arrived so far
    except PlaywrightError as exc:
        if not cut.is_set():
            raise NavigationFailed(first_line(exc).removeprefix("Page.goto: ")) from None
    if response is not None:
        if response.headers.get(REFUSED_HEADER.lower()):
            raise NavigationFailed("the proxy refused the page")
        media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type and media_type not in HTML_TYPES:
            raise NotAPage(f"it is {media_type}")
        if response.status >= 400:
            raise RenderFailed(f"the server answered HTTP {response.status}")
    if not (timed_out or cut.is_set()):
        timed_out = await _unless_cut(cut, settle(page, "load", remaining())) is False
    if not (timed_out or cut.is_set()):
        await _unless_cut(cut, settle(page, "networkidle", remaining(IDLE_WAIT)))
        with contextlib.suppress(PlaywrightError):
            await page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
            await _unless_cut(cut, settle(page, "networkidle", remaining(SCROLL_WAIT)))
            await page.evaluate("window.scrollTo(0, 0)")
    try:
        html = await page.content()
    except PlaywrightError:  # the page navigated away (a script redirect) just now
        await settle(page, "domcontentloaded", remaining(SCROLL_WAIT))
        html = await page.content()
    shot = await page.screenshot(type="png") if screenshot else None
    return _Loaded(page.url, html, response.status if response else None, shot, timed_out)


async def _unless_cut(cut: asyncio.Event, work: Coroutine[Any, Any, T]) -> T | None:
    """``work``'s result, or None as soon as the page's traffic is cut (``work`` is dropped)."""
    task = asyncio.ensure_future(work)
    stop = asyncio.ensure_future(cut.wait())
    try:
        await asyncio.wait((task, stop), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return None if task.cancelled() else task.result()


async def settle(page: Page, state: str, timeout_ms: float) -> bool:
    """Wait for a load state; False when the time ran out first."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout  # noqa: PLC0415

    if timeout_ms <= 0:
        return False
    try:
        await page.wait_for_load_state(state, timeout=timeout_ms)  # type: ignore[arg-type]
    except PlaywrightTimeout:
        return False
    return True


def _notes(
    limits: RenderLimits, gate: RequestGate, proxy: GuardedProxy, *, timed_out: bool
) -> tuple[str, ...]:
    notes = []
    if timed_out:
        notes.append(
            f"the page was still loading after {limits.timeout:g}s; this is what had arrived"
        )
    if proxy.traffic.exhausted:
        notes.append(
            f"the page moved more than {limits.max_bytes} bytes; loading was stopped there"
        )
    refused = len(gate.refusals) + len(proxy.traffic.refusals)
    if refused:
        notes.append(
            f"{refused} request(s) of the page were refused (non-public addresses or limits)"
        )
    # the limits it ran into, once each and in order (addresses stay out: they name internals)
    notes.extend(dict.fromkeys(r for r in gate.refusals if r.startswith("the page ")))
    return tuple(notes)


def first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


async def _close_popup(page: Page) -> None:
    log.info("closed a popup the page opened: %s", page.url)
    with contextlib.suppress(Exception):
        await page.close()


async def close_context(context: BrowserContext) -> bool:
    """Close the context; False when the browser did not manage it in time."""
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await context.close()
    except Exception as exc:
        log.warning("a browser context did not close cleanly: %s", exc)
        return False
    return True


def _loop_time(deadline: float) -> float:
    """``deadline`` (time.monotonic) on the event loop's clock."""
    return asyncio.get_running_loop().time() + (deadline - time.monotonic())
