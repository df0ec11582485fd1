"""web_fetch's browser at its limits: time, bytes, a stuck page, a page that eats memory.

Each test has a browser of its own with tight limits (see tests/test_web_render.py for the
pages, the fake DNS and the guard).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from aiohttp import web

from agent.web.browser import Browser, BrowserSettings
from agent.web.proxy import READ_SIZE
from agent.web.render import RenderLimits
from tests.fakes.web import FakeSite
from tests.test_web_render import JS_PAGE, fetch_tool, guard, run

pytestmark = pytest.mark.skipif(not shutil.which("chromium"), reason="Chromium is not installed")


async def test_a_page_that_never_stops_loading_is_read_when_its_time_is_up(
    site: FakeSite, tmp_path: Path
) -> None:
    stopped = asyncio.Event()

    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        await response.prepare(request)
        await response.write(b"<html><body><article><h1>Live ticker</h1>")
        try:
            for n in range(10_000):
                await response.write(f"<p>Update {n}: the market is open.</p>".encode())
                await asyncio.sleep(0.2)
        finally:
            stopped.set()
        return response

    site.handle("/ticker", trickle)
    async with Browser(guard(), RenderLimits(timeout=4)) as chromium:
        result = await run(
            fetch_tool(chromium),
            tmp_path,
            url=site.url("/ticker", host="allowed.test"),
            render=True,
        )
        assert "Update 0: the market is open." in result.content
        assert "(the page was still loading after 4s; this is what had arrived)" in result.content
        async with asyncio.timeout(10):
            await stopped.wait()  # the fetch is over: its connections are gone


async def test_a_page_that_never_stops_loading_is_cut_at_the_byte_limit(site: FakeSite) -> None:
    stopped = asyncio.Event()
    block = b"<p>" + b"x" * 16_000 + b"</p>\n"

    async def flood(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        await response.prepare(request)
        try:
            await response.write(b"<html><body><h1>Flood</h1>")
            while True:
                await response.write(block)
        finally:
            stopped.set()
        return response

    site.handle("/flood", flood)
    limits = RenderLimits(timeout=15, max_bytes=300_000)
    async with Browser(guard(), limits) as chromium:
        rendered = await chromium.render(site.url("/flood", host="allowed.test"))
    assert rendered.bytes <= limits.max_bytes + 2 * READ_SIZE
    assert "the page moved more than 300000 bytes; loading was stopped there" in rendered.notes
    assert "Flood" in rendered.html
    async with asyncio.timeout(10):
        await stopped.wait()


async def test_a_page_that_hangs_the_browser_gets_a_new_one_next_time(
    site: FakeSite, tmp_path: Path
) -> None:
    site.page("/hang", "<html><body><p>Loading</p><script>while (true) {}</script></body></html>")
    site.page("/fine", JS_PAGE)
    async with Browser(guard(), RenderLimits(timeout=3)) as chromium:
        tool = fetch_tool(chromium)
        hung = await run(tool, tmp_path, url=site.url("/hang", host="allowed.test"), render=True)
        assert "(the browser could not render it (the page kept the browser busy past 3s)" in (
            hung.content
        )
        assert "Loading" in hung.content  # the page as served
        fine = await run(tool, tmp_path, url=site.url("/fine", host="allowed.test"), render=True)
        assert "The tomato harvest starts in July" in fine.content
        assert chromium.launches == 2


async def test_a_page_that_eats_memory_loses_its_tab_not_the_gateway(
    site: FakeSite, tmp_path: Path
) -> None:
    site.page(
        "/eat",
        "<html><body><p>Hungry page</p><script>"
        "const keep = []; while (true) { keep.push(new Array(1e6).fill(Math.random())); }"
        "</script></body></html>",
    )
    async with Browser(
        guard(), RenderLimits(timeout=15), BrowserSettings(memory_mb=512)
    ) as chromium:
        result = await run(
            fetch_tool(chromium), tmp_path, url=site.url("/eat", host="allowed.test"), render=True
        )
    assert "the page crashed its browser tab (too much memory?)" in result.content
    assert "Hungry page" in result.content  # the page as served


async def test_a_page_that_opens_frame_after_frame_is_stopped_at_the_document_limit(
    site: FakeSite,
) -> None:
    frames_served = 0

    async def frame(request: web.Request) -> web.Response:
        nonlocal frames_served
        frames_served += 1
        return web.Response(text="<p>frame</p>", content_type="text/html")

    frames = "".join(f'<iframe src="/frame/{n}"></iframe>' for n in range(40))
    site.page("/frames", f"<html><body><h1>Frames</h1>{frames}</body></html>")
    site.handle("/frame/{n}", frame)
    async with Browser(guard(), RenderLimits(timeout=15, max_documents=5)) as chromium:
        rendered = await chromium.render(site.url("/frames", host="allowed.test"))
    assert "Frames" in rendered.html
    assert "the page opened more than 5 documents" in rendered.notes
    assert frames_served <= 4  # the page itself is the first of the five
