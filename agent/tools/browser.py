"""``browser``: the agent acts on web pages, in a browser that keeps its sign-ins.

One tool, one ``action`` per call: ``open`` (``url``), ``snapshot`` (the page as an
accessibility tree whose elements carry refs such as ``e12``; ``screenshot`` adds a picture
the model sees and the user gets), ``click``, ``type`` (``text``), ``select`` (``text``:
the option), ``press`` (``text``: a key, on ``ref`` or on what has focus), ``scroll``
(``ref``, or ``text`` up/down), ``back``, ``wait_for`` (``text``), ``download`` (``ref``),
``close``. The session behind it (agent.web.sessions) is the agent's own for the owner and
admins, a member's own for a member; every request of its pages goes through the guard of
``web_fetch`` (agent.web.session).

- Page content is outside content: every result is wrapped as untrusted and taints the turn.
- An action that commits something (agent.web.commitment: a form sent, a purchase, text
  not in the user's own words, a download) waits for the owner's approval, with a picture of
  the page and the element marked, unless the site is in ``tools.browser.allowed_sites``.
  The page is looked at again just before the action runs: if what it would do is no
  longer what the owner approved, nothing is done.
- After outside content, ``open`` goes without approval only to a web address the turn
  has seen, as ``web_fetch`` (:func:`agent.tools.web.unseen`); the other actions follow
  the page (a click goes where the page points) or are held by the rules above.
- ``tools.browser.max_steps_per_turn`` calls per turn at most.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from yarl import URL

from agent.tools.base import (
    Effect,
    Outside,
    Reach,
    Refusal,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    schema,
)
from agent.tools.web import save_screenshot, unseen, web_guard
from agent.untrusted import wrap_untrusted
from agent.web.browser import Browser, BrowserSettings
from agent.web.chromium import BrowserUnavailable
from agent.web.commitment import Action, Commitment, commitment, site_allowed
from agent.web.profiles import Profiles
from agent.web.render import RenderLimits
from agent.web.session import Asked, BrowserSession, Snapshot, StepFailed, StepLimits
from agent.web.sessions import BrowserSessions, Key, SessionLimits
from agent.web.ssrf import BlockedTarget
from agent.workspace import ATTACHMENTS
from gateway.config.settings import BrowserToolSettings, WebToolSettings
from gateway.core.messages import Attachment, kind_of
from gateway.core.principal import Role

ACTIONS: tuple[Action, ...] = get_args(Action)
NEEDS_REF = frozenset({"click", "type", "select", "download"})
NEEDS_TEXT = frozenset({"select", "press", "wait_for"})  # type may clear a field
MAX_ASKED = 20  # approvals' pictures kept per session until their calls run
SCROLL_PIXELS = 700


class BrowserTool(Tool):
    name = "browser"
    description = (
        "Act on web pages in a browser that keeps its sign-ins. open a url; snapshot: the "
        "page as elements with refs like e12 (screenshot: true adds a picture); click, type "
        "(text), select (text: the option), press (text: a key such as Enter), download: by "
        "ref; scroll (ref, or text up/down), back, wait_for (text), close. Sending a form, "
        "buying, paying or typing what the user did not write waits for the owner's approval."
    )
    parameters = schema(
        {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "url": {"type": "string", "minLength": 1, "maxLength": 4000},
            "ref": {"type": "string", "minLength": 1, "maxLength": 20},
            "text": {"type": "string", "maxLength": 5000},
            "screenshot": {"type": "boolean"},
        },
        ("action",),
    )
    effect = Effect.REMOTE
    targets = ("url",)
    read_actions = frozenset({"snapshot", "wait_for"})
    time_sensitive = True  # a page changes by itself: the same snapshot twice is two reads
    rarely_used = True

    def __init__(self, sessions: BrowserSessions, *, allowed_sites: tuple[str, ...] = ()) -> None:
        self._sessions = sessions
        self._allowed_sites = allowed_sites

    shows_links = True  # the page's address, and what it shows, may be opened next

    def available(self) -> bool:
        return self._sessions.problem() is None

    def guarded_action(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        """Only ``open`` goes where the model says; committing actions wait by their own
        rule (approval_refusal), whether or not the turn read outside content."""
        return unseen(str(args.get("url", "")), ctx) if args.get("action") == "open" else None

    def read_from(self, args: dict[str, Any]) -> Outside:
        return Outside("a web page in the browser", str(args.get("url", "")))

    # -- approval -------------------------------------------------------------------------

    async def approval_refusal(self, args: dict[str, Any], ctx: ToolContext) -> Refusal | None:
        session = self._sessions.find(_key(ctx))
        if session is None:
            return None  # nothing is open: run() says so
        async with session.lock:
            committed = await self._commits(session, args, ctx)
        if committed is None:
            return None
        return Refusal(
            f"browser {args['action']}: {committed.reason}; the site is not in "
            "tools.browser.allowed_sites",
            askable=True,
            authority=Role.OWNER,
        )

    async def reach(self, args: dict[str, Any], ctx: ToolContext) -> Reach:
        """The page and the element, and a picture of the page with the element marked;
        remembered, so the call runs only while the page would still do what was shown."""
        session = self._sessions.find(_key(ctx))
        if session is None:
            return Reach()
        asked = session.asked.get(ctx.idempotency_key)
        if asked is None:
            from playwright.async_api import Error as PlaywrightError  # noqa: PLC0415

            async with session.lock:
                committed = await self._commits(session, args, ctx)
                png = None
                for ref in (args.get("ref"), None):  # no such element: the page alone
                    try:
                        png = await session.picture(ref)
                        break
                    except (StepFailed, PlaywrightError):
                        continue
            url = session.url
            pictures = () if png is None else (await save_screenshot(ctx.workspace.root, url, png),)
            asked = Asked(committed.reach if committed else f"page: {url}", pictures)
            session.asked[ctx.idempotency_key] = asked
            while len(session.asked) > MAX_ASKED:
                session.asked.pop(next(iter(session.asked)))
        return Reach(asked.reach, asked.files)

    async def _commits(
        self, session: BrowserSession, args: dict[str, Any], ctx: ToolContext
    ) -> Commitment | None:
        """What this call would commit, as the page is now; None when nothing (or when every
        site it reaches is allowed)."""
        action: Action = args["action"]
        if action not in ("click", "type", "press", "download"):
            return None
        ref = args.get("ref")
        try:
            target = await session.target(ref)
        except StepFailed:
            if action != "download":
                return None  # no such element: run() says so
            target = None
        committed = commitment(
            action,
            target,
            page=session.url,
            text=str(args.get("text") or ""),
            own_words=ctx.user_texts,
        )
        if committed is None or all(site_allowed(s, self._allowed_sites) for s in committed.sites):
            return None
        return committed

    # -- running ----------------------------------------------------------------------------

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        action: Action = args["action"]
        _check_arguments(action, args)
        key = _key(ctx)
        if action == "close":  # always allowed, also past the step limit
            closed = await self._sessions.close(key)
            return ToolResult("Closed the browser." if closed else "No browser page was open.")
        limit = self._sessions.limits.max_steps_per_turn
        if self._sessions.count_step(ctx.turn_id) > limit:
            raise ToolError(
                f"the browser's limit of {limit} steps for one request is reached; tell the "
                "user what was done and what is left"
            )
        if action == "open":
            await self._vet(str(args["url"]))
            try:
                session = await self._sessions.session(key)
            except BrowserUnavailable as exc:
                raise ToolError(f"no browser can run here: {exc}") from None
        else:
            found = self._sessions.find(key)
            if found is None:
                raise ToolError("no page is open in the browser: open a url first")
            session = found
        async with session.lock:
            await self._hold_to_approval(session, args, ctx)
            try:
                return await self._act(session, action, args, ctx)
            except StepFailed as exc:
                raise ToolError(f"browser {action} failed: {exc}") from None
            except BlockedTarget as exc:
                raise ToolError(
                    f"browser refused to go there: {exc}. Only public web addresses can be opened."
                ) from None

    async def _vet(self, url: str) -> None:
        try:
            await self._sessions.browser.guard.vet_url(URL(url))
        except ValueError:
            raise ToolError(f"{url!r} is not a URL") from None
        except BlockedTarget as exc:
            raise ToolError(
                f"browser refused {url}: {exc}. Only public web addresses can be opened."
            ) from None
        except OSError as exc:
            raise ToolError(f"could not open {url}: {exc}") from None

    async def _hold_to_approval(
        self, session: BrowserSession, args: dict[str, Any], ctx: ToolContext
    ) -> None:
        """Refuse a committing action nobody approved, and an approved one whose page no
        longer does what the approvers were shown."""
        committed = await self._commits(session, args, ctx)
        if committed is None:
            return
        if not ctx.approved:
            raise ToolError(
                f"not done: {committed.reason}. It needs the owner's approval "
                '(tools.approvals = "ask") or the site in tools.browser.allowed_sites; tell '
                "the user what you would do."
            )
        asked = session.asked.pop(ctx.idempotency_key, None)
        if asked is None or asked.reach != committed.reach:
            raise ToolError(
                "not done: the page changed since the owner approved this, so it would no "
                "longer do what they saw. Take a snapshot and ask again."
            )

    async def _act(
        self, session: BrowserSession, action: Action, args: dict[str, Any], ctx: ToolContext
    ) -> ToolResult:
        call = Call(str(args.get("ref") or ""), str(args.get("text") or ""), ctx)
        async with session.step() as done:
            if action == "open":
                await session.goto(str(args["url"]), done)
            else:
                await DOINGS[action](session, call)
            shot = await session.picture() if args.get("screenshot") else None
            snapshot = None if action in QUIET else await session.snapshot()
        if done.blocked is not None:
            raise ToolError(
                f"browser {action}: the page tried to go to an address that is refused "
                f"({done.blocked}); only public web addresses can be opened"
            )
        if shot is not None:
            call.files.append(await save_screenshot(ctx.workspace.root, session.url, shot))
        call.notes += done.notes(session.limits)
        if action == "open" and not session.kept:
            call.notes.append(
                "this session keeps no sign-ins once it closes; the owner can keep them with "
                "`switchboard browser create`"
            )
        body = _result(action, session, snapshot, call)
        return ToolResult(
            wrap_untrusted(f"page {session.url}", body), untrusted=True, files=tuple(call.files)
        )


@dataclass(slots=True)
class Call:
    """One call's arguments, and what its action found to say and to send."""

    ref: str
    text: str
    ctx: ToolContext
    notes: list[str] = field(default_factory=list)
    files: list[Attachment] = field(default_factory=list)


async def _click(session: BrowserSession, call: Call) -> None:
    await (await session.element(call.ref)).click()
    await session.settled()


async def _type(session: BrowserSession, call: Call) -> None:
    await (await session.element(call.ref)).fill(call.text)


async def _select(session: BrowserSession, call: Call) -> None:
    from playwright.async_api import Error as PlaywrightError  # noqa: PLC0415

    element = await session.element(call.ref)
    try:
        await element.select_option(label=call.text, timeout=2_000)
    except PlaywrightError:
        await element.select_option(value=call.text, timeout=2_000)


async def _press(session: BrowserSession, call: Call) -> None:
    if call.ref:
        await (await session.element(call.ref)).press(call.text)
    else:
        await session.page.keyboard.press(call.text)
    await session.settled()


async def _scroll(session: BrowserSession, call: Call) -> None:
    if call.ref:
        await (await session.element(call.ref)).scroll_into_view_if_needed()
        return
    up = call.text.strip().lower() == "up"
    await session.page.mouse.wheel(0, -SCROLL_PIXELS if up else SCROLL_PIXELS)
    await session.settled()


async def _back(session: BrowserSession, call: Call) -> None:
    if await session.page.go_back() is None:
        call.notes.append("there was no earlier page to go back to")
    await session.settled()


async def _wait_for(session: BrowserSession, call: Call) -> None:
    from playwright.async_api import TimeoutError as PlaywrightTimeout  # noqa: PLC0415

    try:
        await session.page.get_by_text(call.text).first.wait_for(
            state="visible", timeout=session.time_left()
        )
    except PlaywrightTimeout:
        call.notes.append(f"{call.text!r} did not appear in time")


async def _snapshot(session: BrowserSession, call: Call) -> None:
    return None  # the snapshot every action but the quiet ones ends with


async def _download(session: BrowserSession, call: Call) -> None:
    """The file a click on the ref downloads, kept with the other files from outside."""
    folder = call.ctx.workspace.root / ATTACHMENTS / "web" / "downloads"
    path = await session.download(call.ref, folder)
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    call.files.append(
        Attachment(
            kind_of(mime),
            path=str(path),
            mime_type=mime,
            filename=path.name,
            size=path.stat().st_size,
            note=f"Downloaded from {session.url}",
        )
    )


DOINGS: dict[Action, Callable[[BrowserSession, Call], Awaitable[None]]] = {
    "snapshot": _snapshot,
    "click": _click,
    "type": _type,
    "select": _select,
    "press": _press,
    "scroll": _scroll,
    "back": _back,
    "wait_for": _wait_for,
    "download": _download,
}
QUIET = frozenset({"type", "select", "download"})  # end without a snapshot: little changed


def _key(ctx: ToolContext) -> Key:
    """The agent's own session for its owner and admins; a member's own for a member."""
    principal = ctx.principal
    return (ctx.agent, None if principal.is_admin else principal.person)


def _check_arguments(action: Action, args: dict[str, Any]) -> None:
    if action == "open" and not args.get("url"):
        raise ToolError("open needs a url")
    if action in NEEDS_REF and not args.get("ref"):
        raise ToolError(f"{action} needs the ref of an element from the latest snapshot")
    if action in NEEDS_TEXT and not args.get("text"):
        raise ToolError(f"{action} needs text")


def _result(action: Action, session: BrowserSession, snapshot: Snapshot | None, call: Call) -> str:
    lines = []
    if action == "type":
        lines.append(f"Typed into {call.ref}.")
    elif action == "select":
        lines.append(f"Selected {call.text!r} in {call.ref}.")
    for attached in call.files:
        if action == "download":
            lines.append(
                f"Downloaded {attached.filename} ({attached.size} bytes); the user receives it "
                "with your answer."
            )
        else:
            lines.append("(a screenshot of the page is attached; the user receives it too)")
    if snapshot is not None:
        lines.append(f"URL: {snapshot.url}")
        if snapshot.title:
            lines.append(f"Title: {snapshot.title}")
    lines.extend(f"({note})" for note in call.notes)
    if snapshot is not None:
        lines += ["", snapshot.tree or "(the page is empty)"]
        if snapshot.cut:
            lines.append(
                f"(the snapshot is cut at {session.limits.snapshot_chars} characters; scroll "
                "or act on a part to see more)"
            )
    return "\n".join(lines)


def browser_sessions(
    settings: BrowserToolSettings, web: WebToolSettings, data_dir: Path
) -> BrowserSessions | None:
    """The gateway's browser sessions for the ``browser`` tool (nothing launched yet), or
    None when the tool is switched off. Pages reach what ``[tools.web]`` allows, with its
    Chromium settings; profiles live in ``<data>/browser``."""
    if not settings.enabled:
        return None
    step = StepLimits(
        timeout=settings.step_timeout_seconds,
        max_bytes=settings.step_max_bytes,
        snapshot_chars=settings.snapshot_max_chars,
    )
    browser = Browser(
        web_guard(web),
        RenderLimits(timeout=settings.step_timeout_seconds, max_bytes=settings.step_max_bytes),
        BrowserSettings(executable=web.browser_path, memory_mb=web.browser_memory_mb),
    )
    return BrowserSessions(
        browser,
        Profiles(data_dir / "browser"),
        SessionLimits(
            step=step,
            max_sessions=settings.max_sessions,
            idle_seconds=settings.idle_minutes * 60,
            max_steps_per_turn=settings.max_steps_per_turn,
        ),
    )
