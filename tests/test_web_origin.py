"""A signed-in browser's session is bound to the origin: scheme, host *and* port
(gateway/web/access/security.py, docs/security.md).

A browser sends the cookies of ``127.0.0.1`` to every port of it, so a program listening on
another loopback port (another local user's, a sandboxed command with a network) receives
the owner's session cookie as soon as the owner's browser opens it. These drive Debian's
Chromium (Playwright, as tests/test_web_browser.py does) against the real gateway and such
a listener: the listener gets the cookie, and its replay (any ``Origin`` it likes) of the
status, the settings (read, page and change) and the chat's socket is refused, while the
owner's own pages, which hold the sign-in's page key in the origin's storage, work end to
end. A browser that lost its key is sent to sign in again and told why.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from playwright.async_api import Browser, BrowserContext, Page, expect

from gateway.config.settings import load_settings
from tests.fakes.llm import FakeLLM, text
from tests.test_live_settings import write_home
from tests.test_web_browser import WAIT_MS, browser, fake_llm, send, serving

pytestmark = pytest.mark.asyncio(loop_scope="module")
__all__ = ["browser", "fake_llm"]  # the module's browser and fake model (fixtures)


@asynccontextmanager
async def listener() -> AsyncIterator[tuple[str, list[str]]]:
    """Another program on another loopback port: its URL, and the Cookie headers that the
    browsers which opened it sent."""
    cookies: list[str] = []

    async def page(request: web.Request) -> web.Response:
        cookies.append(request.headers.get("Cookie", ""))
        return web.Response(text="<!doctype html><title>Another program</title><p>Hello.")

    app = web.Application()
    app.router.add_get("/", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/", cookies
    finally:
        await runner.cleanup()


async def owners_browser(browser: Browser) -> tuple[BrowserContext, Page]:
    context = await browser.new_context()
    context.set_default_timeout(WAIT_MS)
    return context, await context.new_page()


async def test_a_listener_on_another_port_gets_the_cookie_but_its_replay_opens_nothing(
    tmp_path: Path, fake_llm: FakeLLM, browser: Browser
) -> None:
    home = tmp_path / "home"
    config = write_home(home, fake_llm, web={"enabled": True, "port": 0})
    before = config.read_text()
    fake_llm.queue(text("Your plans are kept in plans.txt."), text("Still yours."))
    async with serving(load_settings(home=home)) as gateway, listener() as (other, cookies):
        assert gateway.web is not None
        url = gateway.web.url
        origin = url.rstrip("/")
        context, page = await owners_browser(browser)
        await page.goto(gateway.web.sign_in_link())
        await expect(page.locator("#connection")).to_have_text("connected")
        await page.locator("#files").set_input_files(
            {"name": "plans.txt", "mimeType": "text/plain", "buffer": b"the owner's plans"}
        )
        await send(page, "my plans")
        await expect(page.locator(".msg.assistant:not(.streaming)")).to_have_count(1)
        entry = await page.locator(".msg.user").get_attribute("data-id")

        # the owner opens the other program's page (a link, a bookmark, a typed address)
        elsewhere = await context.new_page()
        await elsewhere.goto(other)
        kept_there = await elsewhere.evaluate("localStorage.getItem('switchboard-key')")
        await elsewhere.close()
        [stolen] = cookies
        assert "switchboard_auth=" in stolen  # cookies are the host's, not the port's
        assert kept_there is None  # the key is the origin's: that page cannot read it

        # the other program replays the cookie with the gateway's own Origin
        replay = {"Cookie": stolen, "Origin": origin}
        refused: dict[str, int] = {}
        async with aiohttp.ClientSession(headers=replay) as thief:
            async with thief.get(url + "api/status") as r:
                refused["status"] = r.status
                status_body = await r.text()
            async with thief.get(url + "api/settings") as r:
                refused["settings"] = r.status
            async with thief.post(
                url + "api/settings", json={"values": {"llm.model": "the-thiefs-model"}}
            ) as r:
                refused["change"] = r.status
            async with thief.get(url + "api/settings/form") as r:
                refused["form"] = r.status
            async with thief.get(url + "settings", headers={"Accept": "text/html"}) as r:
                settings_page = (r.status, await r.text())
            async with thief.get(url + "api/events") as r:
                refused["events"] = r.status
            async with thief.get(url + f"api/chat/files/{entry}/0") as r:
                refused["file"] = r.status
            for offered in (("switchboard",), ("switchboard", "switchboard.key.guess")):
                with pytest.raises(aiohttp.WSServerHandshakeError) as socket_refused:
                    await thief.ws_connect(url + "api/chat/socket", protocols=offered)
                refused[f"socket {len(offered)}"] = socket_refused.value.status
            async with thief.post(url + "logout", allow_redirects=False) as r:
                refused["logout"] = r.status  # it only drops the cookie the thief sent

        # the owner's pages go on: the chat and its files, a control page, the settings
        await expect(page.locator("#connection")).to_have_text("connected")
        await send(page, "is this still mine?")
        answers = page.locator(".msg.assistant:not(.streaming)")
        await expect(answers.last).to_contain_text("Still yours.")
        async with page.expect_download() as downloading:
            await page.get_by_role("link", name="file: plans.txt").click()
        download = await downloading.value
        saved = await asyncio.to_thread(Path(await download.path()).read_bytes)
        await page.goto(url + "health")
        await expect(page.locator("body[data-loaded='1']")).to_be_attached()
        await page.goto(url + "settings")
        await expect(page.locator('input[name="llm.model"]')).to_have_value("fake-model")
        await gateway.wait_idle()
        await context.close()
    assert refused == {
        "status": 401,
        "settings": 401,
        "change": 401,
        "form": 401,
        "events": 401,
        "file": 401,
        "socket 1": 401,
        "socket 2": 401,
        "logout": 303,
    }
    assert "sign in again" in status_body and "turns_running" not in status_body
    status, shell = settings_page
    assert status == 200  # a page shell, which holds nothing of the owner's
    assert "fake-model" not in shell and 'name="llm.model"' not in shell
    assert config.read_text() == before  # nothing changed
    assert [r.body["model"] for r in fake_llm.requests] == ["fake-model"] * 2
    assert (download.suggested_filename, saved) == ("plans.txt", b"the owner's plans")


async def test_a_browser_that_lost_its_key_is_sent_to_sign_in_again_and_told_why(
    tmp_path: Path, fake_llm: FakeLLM, browser: Browser
) -> None:
    """Its cookie still opens the page shells, but the page knows it holds no key: off to
    the sign-in page, which says what happened; a new link signs it in again."""
    home = tmp_path / "home"
    write_home(home, fake_llm, web={"enabled": True, "port": 0})
    async with serving(load_settings(home=home)) as gateway:
        assert gateway.web is not None
        url = gateway.web.url
        context, page = await owners_browser(browser)
        await page.goto(gateway.web.sign_in_link())
        await expect(page.locator("#connection")).to_have_text("connected")
        await page.evaluate("localStorage.clear()")  # the site's data cleared, say
        await page.goto(url + "settings")
        await page.wait_for_url("**/login?next=%2Fsettings&why=key")
        told = page.get_by_role("alert")
        await expect(told).to_contain_text("A cookie alone opens nothing here")
        await expect(told).to_contain_text("Sign in again")
        await page.goto(gateway.web.sign_in_link())
        await expect(page.locator("#connection")).to_have_text("connected")
        await page.goto(url + "settings")
        await expect(page.locator('input[name="llm.model"]')).to_have_value("fake-model")
        await context.close()
