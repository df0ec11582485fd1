"""One ``browser`` session: a page that stays open between tool calls, held to the guard.

Its context is made like a rendered page's (agent.web.render.open_guarded): a
:class:`~agent.web.proxy.GuardedProxy` of its own is the only way out, the request route
judges each request first, service workers are blocked, popups closed, WebRTC removed. What
differs is time: the page lives across steps, so the proxy's byte budget and the route's
request counts start afresh with every step (:meth:`BrowserSession.step`), each step is
bounded in time, and the cookies and site storage are kept in the session's profile
(agent.web.profiles) after every step, when it has one.

Elements are addressed by the refs of the page's last accessibility snapshot (Playwright's
``aria_snapshot(mode="ai")``: ``[ref=e12]``, ``f1e3`` inside a frame), resolved by
Playwright in its own script world, not by attributes a page could move.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agent.web.browser import Browser
from agent.web.commitment import FACTS, Target
from agent.web.profiles import Profiles
from agent.web.proxy import REFUSED_HEADER, GuardedProxy
from agent.web.render import (
    IDLE_WAIT,
    READ_RESERVE,
    RenderLimits,
    RequestGate,
    close_context,
    first_line,
    settle,
)
from agent.web.ssrf import BlockedTarget
from gateway.core.messages import Attachment

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Locator, Page, Request, Response

log = logging.getLogger(__name__)

REF = re.compile(r"(?:f\d+)?e\d+")
BLANK = "about:blank"


class StepFailed(Exception):
    """A step could not be done; the message says why, for the model."""


@dataclass(frozen=True, slots=True)
class StepLimits:
    timeout: float = 20.0  # one navigation or action, waits included
    max_bytes: int = 20_000_000  # moved through the proxy in one step
    snapshot_chars: int = 8_000  # a longer snapshot is cut


@dataclass(frozen=True, slots=True)
class Snapshot:
    url: str
    title: str
    tree: str  # the accessibility tree, with refs
    cut: bool  # longer than the limit: the end is missing


@dataclass(slots=True)
class Step:
    """What one step's page did: requests refused (``blocked``: the page itself, when the
    main document was refused), its traffic cut."""

    refusals: list[str] = field(default_factory=list)
    blocked: str | None = None
    exhausted: bool = False

    def notes(self, limits: StepLimits) -> list[str]:
        notes = []
        if self.refusals:
            notes.append(
                f"{len(self.refusals)} request(s) of the page were refused (non-public "
                "addresses or limits)"
            )
        if self.exhausted:
            notes.append(
                f"the page moved more than {limits.max_bytes} bytes in this step; its "
                "connections were cut"
            )
        return notes


@dataclass(frozen=True, slots=True)
class Asked:
    """What approvers were shown of one call (agent.tools.browser), kept until it runs."""

    reach: str
    files: tuple[Attachment, ...]


class BrowserSession:
    """A context and its one page; ``lock`` serialises the turns that share it."""

    def __init__(
        self,
        browser: Browser,
        *,
        profiles: Profiles,
        profile: Path,
        limits: StepLimits,
    ) -> None:
        self._browser = browser
        self._profiles = profiles
        self.profile = profile
        self.limits = limits
        self.lock = asyncio.Lock()
        self.last_used = time.monotonic()
        self.kept = False  # its cookies are saved in the profile
        self.asked: dict[str, Asked] = {}  # call key -> what its approvers saw
        self._proxy: GuardedProxy | None = None
        self._gate: RequestGate | None = None
        self._context: BrowserContext | None = None
        self._page: Page | None = None
        self._step: Step | None = None  # the step under way
        self._crashed = False
        self._deadline = 0.0  # of the step under way (time.monotonic)

    @property
    def page(self) -> Page:
        if self._page is None or not self.open:
            raise StepFailed("the page was closed (or crashed); open it again")
        return self._page

    @property
    def url(self) -> str:
        return self._page.url if self._page is not None else BLANK

    @property
    def open(self) -> bool:
        """Its page is there and alive (a crashed tab is not: the session is started afresh,
        its cookies kept)."""
        return self._page is not None and not self._page.is_closed() and not self._crashed

    async def start(self) -> BrowserSession:
        guard = self._browser.guard
        self._proxy = await GuardedProxy(guard, max_bytes=self.limits.max_bytes).start()
        self._gate = RequestGate(guard, RenderLimits(max_bytes=self.limits.max_bytes))
        state = self._profiles.load(self.profile)
        self.kept = state is not None
        try:
            self._context, self._page = await self._browser.open_session(
                self._proxy, self._gate, storage_state=state
            )
        except BaseException:
            await self._proxy.stop()
            raise
        self._context.set_default_timeout(self.limits.timeout * 1000)
        self._page.on("response", self._response)
        self._page.on("requestfailed", self._failed)
        self._page.on("crash", self._crash)
        return self

    def _crash(self, page: Page) -> None:
        log.warning("a browser session's page crashed (too much memory?): %s", page.url)
        self._crashed = True

    def _response(self, response: Response) -> None:
        """The proxy answered a navigation of the page itself with a refusal."""
        if (
            self._step is not None
            and self._proxy is not None
            and response.request.is_navigation_request()
            and response.frame.parent_frame is None  # the page itself, not a frame of it
            and response.headers.get(REFUSED_HEADER.lower())
        ):
            refusals = self._proxy.traffic.refusals
            self._step.blocked = refusals[-1] if refusals else "the proxy refused the page"

    def _failed(self, request: Request) -> None:
        """A navigation of the page itself was refused by the route, or (HTTPS) its tunnel
        by the proxy."""
        if (
            self._step is None
            or self._gate is None
            or self._proxy is None
            or not request.is_navigation_request()
            or request.frame.parent_frame is not None
        ):
            return
        failure = request.failure or ""
        if "BLOCKED_BY_CLIENT" in failure:
            refusals = self._gate.refusals
        elif "TUNNEL_CONNECTION_FAILED" in failure:
            refusals = self._proxy.traffic.refusals
        else:
            return
        if refusals:
            self._step.blocked = refusals[-1]

    async def close(self) -> None:
        """Save what it holds (into its profile, if it has one) and close it."""
        context, self._context = self._context, None
        self._page = None
        if context is not None:
            with contextlib.suppress(Exception):
                await self._save(context)
            await close_context(context)
        if self._proxy is not None:
            await self._proxy.stop()
            self._proxy = None

    # -- steps ----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def step(self) -> AsyncIterator[Step]:
        """One bounded step: a fresh byte budget and request count, its time capped, what it
        holds saved afterwards."""
        from playwright.async_api import Error as PlaywrightError  # noqa: PLC0415

        assert self._proxy is not None and self._gate is not None
        self.last_used = time.monotonic()
        self._proxy.renew()
        self._gate.next_step()
        done = self._step = Step()
        self._deadline = time.monotonic() + self.limits.timeout
        if self._context is not None:
            await self._forget_if_deleted(self._context)
        try:
            async with asyncio.timeout(self.limits.timeout + 5):
                yield done
        except TimeoutError:
            raise StepFailed(
                f"the page kept the browser busy past {self.limits.timeout:g}s"
            ) from None
        except PlaywrightError as exc:
            raise StepFailed(_said(exc)) from None
        finally:
            self._step = None
            done.refusals = [*self._gate.refusals, *self._proxy.traffic.refusals]
            done.exhausted = self._proxy.traffic.exhausted
            self.last_used = time.monotonic()
            if self._context is not None:
                try:
                    await self._save(self._context)
                except Exception as exc:  # the step's own outcome matters more
                    log.warning("browser profile %s was not saved: %s", self.profile, exc)

    async def goto(self, url: str, done: Step) -> None:
        """Open ``url``; BlockedTarget when it (or a redirect of it) is not a public address."""
        from playwright.async_api import Error as PlaywrightError  # noqa: PLC0415
        from playwright.async_api import TimeoutError as PlaywrightTimeout  # noqa: PLC0415

        try:
            await self.page.goto(url, wait_until="domcontentloaded", timeout=self.time_left())
        except PlaywrightTimeout:
            return  # read what has arrived
        except PlaywrightError as exc:
            if done.blocked is not None:
                raise BlockedTarget(done.blocked) from None
            raise StepFailed(_said(exc)) from None
        if done.blocked is not None:
            raise BlockedTarget(done.blocked)
        await self.settled()

    async def settled(self) -> None:
        """Let what an action started load: the document, then a quiet network (capped),
        within the step's time."""
        await settle(self.page, "load", self.time_left())
        await settle(self.page, "networkidle", self.time_left(IDLE_WAIT))

    def time_left(self, cap: float | None = None) -> float:
        """Milliseconds a wait may take of what is left of the step (some is kept back for
        reading the page afterwards); at least one (Playwright takes 0 as no limit)."""
        left = self._deadline - time.monotonic() - READ_RESERVE
        return max(1.0, (left if cap is None else min(cap, left)) * 1000)

    async def snapshot(self) -> Snapshot:
        page = self.page
        tree = await page.aria_snapshot(mode="ai")
        cut = len(tree) > self.limits.snapshot_chars
        if cut:
            tree = tree[: self.limits.snapshot_chars].rsplit("\n", 1)[0]
        return Snapshot(page.url, await page.title(), tree, cut)

    async def element(self, ref: str) -> Locator:
        """The element ``ref`` of the latest snapshot; StepFailed at once when there is none
        (rather than waiting for one to appear)."""
        if not REF.fullmatch(ref):
            raise StepFailed(f"{ref!r} is not a ref: use one such as e12 from the latest snapshot")
        element = self.page.get_by_ref(ref)
        if await element.count() != 1:
            raise StepFailed(
                f"no element {ref} in the latest snapshot of this page; take a snapshot and "
                "use its refs"
            )
        return element

    async def target(self, ref: str | None) -> Target | None:
        """What the page says about the element ``ref`` (or the focused one, without a ref)."""
        from playwright.async_api import Error as PlaywrightError  # noqa: PLC0415

        try:
            if ref is None:  # a frame that has the focus is the element here
                focused = await self.page.evaluate_handle("document.activeElement")
                element = focused.as_element()
                if element is None:
                    return None
                raw = await element.evaluate(FACTS)
            else:
                raw = await (await self.element(ref)).evaluate(FACTS, timeout=2_000)
        except PlaywrightError as exc:
            raise StepFailed(_said(exc)) from None
        return Target.parse(raw)

    async def picture(self, ref: str | None = None) -> bytes:
        """A screenshot of the page; with ``ref``, that element marked (and scrolled to)."""
        page = self.page
        if ref is None:
            return await page.screenshot(type="png")
        element = await self.element(ref)
        await element.scroll_into_view_if_needed(timeout=2_000)
        await element.highlight()
        try:
            return await page.screenshot(type="png")
        finally:
            await page.hide_highlight()

    async def download(self, ref: str, folder: Path) -> Path:
        """Click ``ref`` and keep the file it downloads in ``folder``."""
        page = self.page
        async with page.expect_download(timeout=self.limits.timeout * 1000) as started:
            await (await self.element(ref)).click()
        download = await started.value
        failure = await download.failure()
        if failure is not None:
            raise StepFailed(f"the download failed: {failure}")
        path = await asyncio.to_thread(_free_path, folder, _file_name(download.suggested_filename))
        await download.save_as(path)
        return path

    async def _save(self, context: BrowserContext) -> None:
        """Keep the cookies and site storage in the profile, if there is one (the owner may
        have made it since the session opened); never into one the owner deleted."""
        if not self.kept and not self._profiles.exists(self.profile):
            return
        state = await context.storage_state()
        self.kept = await asyncio.to_thread(self._profiles.save, self.profile, dict(state))

    async def _forget_if_deleted(self, context: BrowserContext) -> None:
        """The owner deleted the profile while the session was open: from this step on it
        holds none of the sign-ins it had."""
        if self.kept and not self._profiles.exists(self.profile):
            log.info("browser profile %s was deleted: its session forgets it", self.profile)
            self.kept = False
            await context.clear_cookies()


def _said(exc: Exception) -> str:
    return first_line(exc).split(": ", 1)[-1] if ": " in first_line(exc) else first_line(exc)


_UNSAFE = re.compile(r"[^\w.-]+")


def _free_path(folder: Path, name: str) -> Path:
    """``folder/name``, or ``name-1``, ``name-2``... when taken (the folder made first)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    counter = 1
    while path.exists():
        path = folder / f"{Path(name).stem}-{counter}{Path(name).suffix}"
        counter += 1
    return path


def _file_name(suggested: str) -> str:
    """A download's name as the site suggested it, made safe for a file of ours."""
    name = _UNSAFE.sub("-", Path(suggested).name).strip(".-")[:100]
    return name or "download"
