"""The ``browser`` tool against a local shop, in Debian's Chromium through Playwright.

Pages come from a local site reached as ``allowed.test`` (the fake DNS points it at
127.0.0.1 and the guard's policy allows that one name, as in test_web_render); "secret"
servers on 127.0.0.1 and ::1 stand for the internal services a page would aim at. One
Chromium serves the module (sessions of different agents); the whole flow through a gateway,
with approvals and a restart, is in test_browser_gateway.py.
"""

from __future__ import annotations

import re
import shutil
import stat
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from agent.tools.base import ToolContext, ToolError, ToolResult
from agent.tools.browser import BrowserTool
from agent.web.browser import Browser
from agent.web.profiles import Profiles
from agent.web.render import RenderLimits
from agent.web.session import StepLimits
from agent.web.sessions import BrowserSessions, SessionLimits
from agent.web.ssrf import AddressPolicy, Guard
from agent.workspace import Workspace
from gateway.core.principal import Principal, Role
from tests.fakes.shop import TOKEN, Shop, open_shop
from tests.fakes.tool_context import tool_context
from tests.fakes.web import FakeDNS, FakeSite

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(not shutil.which("chromium"), reason="Chromium is not installed"),
]

SECRET = "SECRET-4b9e"
HOST = "allowed.test"


def guard() -> Guard:
    dns = FakeDNS({HOST: ["127.0.0.1"], "intranet.test": ["127.0.0.1"]})
    return Guard(AddressPolicy((HOST,)), lookup=dns)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def sessions(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrowserSessions]:
    root = tmp_path_factory.mktemp("profiles")
    shared = BrowserSessions(
        Browser(guard(), RenderLimits(timeout=10)),
        Profiles(root / "browser"),
        SessionLimits(step=StepLimits(timeout=10), max_steps_per_turn=12),
    )
    yield shared
    await shared.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def shop() -> AsyncIterator[Shop]:
    site = await FakeSite().start()
    yield open_shop(site)
    await site.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def secret() -> AsyncIterator[FakeSite]:
    """An internal service on the IPv6 loopback, answering everything with the secret."""
    site = await FakeSite("::1").start()

    async def leak(request: web.Request) -> web.StreamResponse:
        return web.Response(text=SECRET, headers={"Access-Control-Allow-Origin": "*"})

    for path in ("/", "/pixel", "/data"):
        site.handle(path, leak)
    yield site
    await site.stop()


def context(tmp_path: Path, agent: str, *said: str, role: Role = Role.OWNER) -> ToolContext:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    base = tool_context(Workspace(root))
    return replace(
        base,
        turn_id=f"turn-{agent}-{role}",
        agent=agent,
        principal=Principal("telegram", "1", "Owner", role),
        user_texts=said,
    )


def read_text(path: str | None) -> str:
    return Path(path or "").read_text()


def is_png(path: str | None) -> bool:
    return Path(path or "").read_bytes()[:4] == b"\x89PNG"


def url(shop: Shop, path: str) -> str:
    return shop.site.url(path, host=HOST)


async def act(tool: BrowserTool, ctx: ToolContext, **args: Any) -> ToolResult:
    return await tool.run(args, ctx)


def ref(result: ToolResult, element: str) -> str:
    """The ref of ``element`` (``textbox "User"``) in a snapshot."""
    found = re.search(re.escape(element) + r"[^\n]*\[ref=(\w+)\]", result.content)
    assert found is not None, f"{element} not in:\n{result.content}"
    return found.group(1)


async def signed_in(tool: BrowserTool, ctx: ToolContext, shop: Shop) -> ToolResult:
    page = await act(tool, ctx, action="open", url=url(shop, "/"))
    await act(tool, ctx, action="type", ref=ref(page, 'textbox "User"'), text="alice")
    await act(tool, ctx, action="type", ref=ref(page, 'textbox "Password"'), text="hunter2")
    return await act(tool, ctx, action="click", ref=ref(page, 'button "Sign in"'))


async def test_a_page_is_a_tree_of_refs_and_a_sign_in_form_is_no_commitment(
    sessions: BrowserSessions, shop: Shop, tmp_path: Path
) -> None:
    tool = BrowserTool(sessions)
    ctx = context(tmp_path, "signin", "sign in as alice with password hunter2")
    page = await act(tool, ctx, action="open", url=url(shop, "/"))
    assert page.untrusted and page.content.startswith("[untrusted page http://allowed.test")
    assert "Title: Sign in" in page.content
    assert 'heading "Sign in to the shop"' in page.content

    form = await signed_in(tool, ctx, shop)
    assert "Title: Delivery form" in form.content  # the POST, its redirect and the cookie
    assert 'textbox "Name"' in form.content and 'textbox "City"' not in form.content
    shot = await act(tool, ctx, action="snapshot", screenshot=True)
    [picture] = shot.files
    assert picture.kind == "image" and is_png(picture.path)
    assert "a screenshot of the page is attached" in shot.content

    await act(tool, ctx, action="click", ref=ref(form, 'button "Next"'))  # only shows step two
    step_two = await act(tool, ctx, action="snapshot")
    assert 'textbox "City"' in step_two.content
    assert shop.submissions == []
    assert (await act(tool, ctx, action="close")).content == "Closed the browser."
    with pytest.raises(ToolError, match="no page is open"):
        await act(tool, ctx, action="snapshot")


async def test_a_page_that_asks_for_buy_gets_its_click_held_and_nothing_ordered(
    sessions: BrowserSessions, shop: Shop, tmp_path: Path
) -> None:
    tool = BrowserTool(sessions)
    ctx = context(tmp_path, "buy", "what does the offer page say?")
    page = await act(tool, ctx, action="open", url=url(shop, "/offer"))
    assert "must press Buy now" in page.content  # read, as outside content
    buy = ref(page, 'button "Buy now"')
    with pytest.raises(ToolError, match="not done: it reads like a purchase"):
        await act(tool, ctx, action="click", ref=buy)
    refusal = await tool.approval_refusal({"action": "click", "ref": buy}, ctx)
    assert refusal is not None and refusal.askable and refusal.authority is Role.OWNER
    shown = await tool.reach({"action": "click", "ref": buy}, ctx)
    assert shown.text == f'page: {url(shop, "/offer")}\nelement: button "Buy now"'
    [picture] = shown.files
    assert is_png(picture.path)
    assert shop.orders == 0

    allowed = BrowserTool(sessions, allowed_sites=(HOST,))  # the owner allowed the site
    assert await allowed.approval_refusal({"action": "click", "ref": buy}, ctx) is None
    await act(allowed, ctx, action="click", ref=buy)
    done = await act(allowed, ctx, action="wait_for", text="Ordered")
    assert "]: Ordered" in done.content and shop.orders == 1
    await act(tool, ctx, action="close")


async def test_text_the_user_did_not_write_is_held_before_a_page_can_read_it(
    sessions: BrowserSessions, shop: Shop, tmp_path: Path
) -> None:
    tool = BrowserTool(sessions)
    ctx = context(tmp_path, "keys", "sign me up with my city, Lyon")
    page = await act(tool, ctx, action="open", url=url(shop, "/keys"))
    box = ref(page, 'textbox "Address"')
    with pytest.raises(ToolError, match="not in the user's own words"):
        await act(tool, ctx, action="type", ref=box, text="12 Rue des Lilas, Lyon")
    assert shop.typed == []  # the page's script never saw a keystroke
    shown = await tool.reach({"action": "type", "ref": box, "text": "12 Rue"}, ctx)
    assert shown.text.endswith('element: text field "Address"')
    await act(tool, ctx, action="type", ref=box, text="Lyon")  # the user's own word
    await shop.until(lambda: shop.typed == ["Lyon"])
    await act(tool, ctx, action="close")


async def test_a_form_is_sent_only_as_approved_and_not_once_the_page_changed(
    sessions: BrowserSessions, shop: Shop, tmp_path: Path
) -> None:
    tool = BrowserTool(sessions)
    said = "sign in as alice, password hunter2; name Alice Smith, city Lyon"
    ctx = context(tmp_path, "submit", said)
    form = await signed_in(tool, ctx, shop)
    await act(tool, ctx, action="type", ref=ref(form, 'textbox "Name"'), text="Alice Smith")
    await act(tool, ctx, action="click", ref=ref(form, 'button "Next"'))
    step_two = await act(tool, ctx, action="snapshot")
    await act(tool, ctx, action="type", ref=ref(step_two, 'textbox "City"'), text="Lyon")
    submit = {"action": "click", "ref": ref(step_two, 'button "Submit"')}
    refusal = await tool.approval_refusal(submit, ctx)
    assert refusal is not None and "it sends a form to the site" in refusal.reason
    shown = await tool.reach(submit, ctx)
    assert f"sends: POST {url(shop, '/submit')}" in shown.text
    assert "  name: Alice Smith\n  city: Lyon" in shown.text

    # approved, but the page changed meanwhile: what the owner saw is not what would go
    await act(tool, ctx, action="type", ref=ref(step_two, 'textbox "City"'), text="Alice")
    with pytest.raises(ToolError, match="the page changed since the owner approved"):
        await act(tool, replace(ctx, approved=True), **submit)
    assert shop.submissions == []

    await act(tool, ctx, action="type", ref=ref(step_two, 'textbox "City"'), text="Lyon")
    await tool.reach(submit, ctx)
    done = await act(tool, replace(ctx, approved=True), **submit)
    assert "Thank you, Alice Smith from Lyon" in done.content
    assert shop.submissions == [{"name": "Alice Smith", "city": "Lyon"}]
    await act(tool, ctx, action="close")


async def test_nothing_the_page_does_reaches_an_internal_address(
    sessions: BrowserSessions, shop: Shop, secret: FakeSite, tmp_path: Path
) -> None:
    tool = BrowserTool(sessions)
    ctx = context(tmp_path, "ssrf")
    port = secret.port
    shop.site.page(
        "/lure",
        f"""<html><body><h1>Lure</h1><img src="http://[::1]:{port}/pixel">
<img src="http://intranet.test:{port}/pixel"><p id="out"></p>
<a href="http://[::1]:{port}/">Inside</a><a href="/jump">Jump</a>
<script>fetch('http://127.0.0.1:{port}/data').then(r => r.text())
  .then(t => {{ document.getElementById('out').textContent = t; }})
  .catch(() => {{ document.getElementById('out').textContent = 'blocked'; }});</script>
</body></html>""",
    )
    shop.site.redirect("/jump", f"http://[::1]:{port}/")
    page = await act(tool, ctx, action="open", url=url(shop, "/lure"))
    assert 'heading "Lure"' in page.content and SECRET not in page.content
    assert "request(s) of the page were refused" in page.content
    for link in ('link "Jump"', 'link "Inside"'):  # a redirect, and a link straight in
        page = await act(tool, ctx, action="open", url=url(shop, "/lure"))
        with pytest.raises(ToolError, match=r"refused .*::1 is a loopback address"):
            await act(tool, ctx, action="click", ref=ref(page, link))
    with pytest.raises(ToolError, match="no element e1 in the latest snapshot"):
        await act(tool, ctx, action="click", ref="e1")  # the refused page left no refs
    for address in (f"http://[::1]:{port}/", f"http://localhost:{port}/", "file:///etc/passwd"):
        with pytest.raises(ToolError, match=r"refused|only http and https"):
            await act(tool, ctx, action="open", url=address)
    assert secret.requests == []
    await act(tool, ctx, action="close")


async def test_the_step_limit_ends_a_turns_browsing(
    sessions: BrowserSessions, shop: Shop, tmp_path: Path
) -> None:
    tool = BrowserTool(sessions)
    ctx = context(tmp_path, "steps")
    await act(tool, ctx, action="open", url=url(shop, "/offer"))
    for _ in range(11):
        await act(tool, ctx, action="scroll", text="down")
    with pytest.raises(ToolError, match="limit of 12 steps"):
        await act(tool, ctx, action="snapshot")
    await act(tool, replace(ctx, turn_id="next"), action="snapshot")  # a new turn: afresh
    await act(tool, ctx, action="close")  # closing is always allowed


async def test_a_profile_keeps_the_sign_in_and_only_the_owner_makes_or_deletes_it(
    sessions: BrowserSessions, shop: Shop, tmp_path: Path
) -> None:
    tool = BrowserTool(sessions)
    said = "sign in as alice with password hunter2"
    ephemeral = context(tmp_path, "nokeep", said)
    await signed_in(tool, ephemeral, shop)
    await act(tool, ephemeral, action="close")  # no profile: forgotten
    forgotten = await act(tool, ephemeral, action="open", url=url(shop, "/account"))
    assert shop.account_cookies[-1] is None
    assert "keeps no sign-ins once it closes" in forgotten.content
    await act(tool, ephemeral, action="close")

    path = sessions.profiles.create("kept")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    kept = context(tmp_path, "kept", said)
    await signed_in(tool, kept, shop)
    await act(tool, kept, action="close")
    page = await act(tool, kept, action="open", url=url(shop, "/account"))
    assert "Signed in as alice" in page.content and shop.account_cookies[-1] == TOKEN
    assert "keeps no sign-ins" not in page.content
    [info] = [p for p in sessions.profiles.listing() if p.agent == "kept"]
    assert info.person is None and info.sites == (HOST,)

    member = context(tmp_path, "kept", said, role=Role.MEMBER)  # never the owner's session
    page = await act(tool, member, action="open", url=url(shop, "/account"))
    assert "Not signed in" in page.content
    await act(tool, member, action="close")

    sessions.profiles.delete("kept")  # while the session is open: it stops keeping it
    await act(tool, kept, action="open", url=url(shop, "/account"))
    assert not path.exists() and shop.account_cookies[-1] is None
    await act(tool, kept, action="close")
    assert not path.exists()  # closing did not write it back


async def test_a_download_is_held_like_a_send_and_then_goes_with_the_answer(
    sessions: BrowserSessions, shop: Shop, tmp_path: Path
) -> None:
    shop.site.page("/export.csv", "crop,days\ntomato,75\n", "text/csv")
    shop.site.page(
        "/exports", '<html><body><a href="/export.csv" download="crops.csv">Export</a></body>'
    )
    tool = BrowserTool(sessions)
    ctx = context(tmp_path, "download", "download the crops export")
    page = await act(tool, ctx, action="open", url=url(shop, "/exports"))
    export = {"action": "download", "ref": ref(page, 'link "Export"')}
    with pytest.raises(ToolError, match="not done: it downloads a file"):
        await act(tool, ctx, **export)
    shown = await tool.reach(export, ctx)
    assert f"file from: {url(shop, '/export.csv')}" in shown.text
    assert "/export.csv" not in shop.site.requests

    done = await act(BrowserTool(sessions, allowed_sites=(HOST,)), ctx, **export)
    [saved] = done.files
    assert saved.filename == "crops.csv" and saved.kind == "document"
    assert Path(saved.path or "").parent == tmp_path / "ws" / "attachments" / "web" / "downloads"
    assert read_text(saved.path) == "crop,days\ntomato,75\n"
    assert "Downloaded crops.csv (20 bytes)" in done.content
    await act(tool, ctx, action="close")
