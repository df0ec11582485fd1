"""web_fetch with a real browser (Debian's Chromium through Playwright), still behind the guard.

Pages come from a local site reached as ``allowed.test`` (the fake DNS points it at
127.0.0.1 and the policy allows that one name). "Secret" servers listen on 127.0.0.1 and
::1 like the internal services an attacker would aim at; every test that lets a page try
to reach them ends by counting their hits: zero. The SSRF tests run twice, once with the
request route (the second layer) and once without it, so the proxy is shown to hold alone.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from agent.tools.base import ToolContext, ToolError, ToolResult
from agent.tools.web import WebFetch
from agent.web.browser import Browser, BrowserSettings
from agent.web.fetch import FetchLimits, PageFetcher
from agent.web.render import RenderLimits
from agent.web.ssrf import AddressPolicy, Guard
from agent.workspace import Workspace
from tests.fakes.tool_context import tool_context
from tests.fakes.web import FakeDNS, FakeSite

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(not shutil.which("chromium"), reason="Chromium is not installed"),
]

SECRET = "SECRET-7d1f0c"
JS_PAGE = """<html><head><title>Harvest</title></head><body><div id="root"></div>
<script>
document.getElementById('root').innerHTML =
  '<article><h1>Harvest calendar</h1><p>The tomato harvest starts in July and runs ' +
  'until the first frost in October. Pick the fruit when it is evenly red.</p></article>';
</script></body></html>"""


def guard() -> Guard:
    dns = FakeDNS(
        {
            "allowed.test": ["127.0.0.1"],
            "intranet.test": ["127.0.0.1"],  # not allowed: the proxy judges the DNS answer
            "mixed.test": ["93.184.216.34", "10.1.2.3"],
        }
    )
    return Guard(AddressPolicy(("allowed.test",)), lookup=dns)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with Browser(guard(), RenderLimits(timeout=10)) as shared:
        yield shared


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def proxy_only() -> AsyncIterator[Browser]:
    """The same browser without the request route: only the proxy stands in the way."""
    async with Browser(guard(), RenderLimits(timeout=10), intercept=False) as shared:
        yield shared


@pytest.fixture
def layers(request: pytest.FixtureRequest, browser: Browser, proxy_only: Browser) -> Browser:
    """The browser with both layers, or the one with the proxy alone (parametrized)."""
    return {"proxy and route": browser, "proxy alone": proxy_only}[request.param]


@pytest_asyncio.fixture(loop_scope="module")
async def site() -> AsyncIterator[FakeSite]:
    fake = await FakeSite().start()
    yield fake
    await fake.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def secrets() -> AsyncIterator[tuple[FakeSite, FakeSite]]:
    """Internal services on the IPv4 and IPv6 loopback, each serving the secret everywhere."""
    sites = (await FakeSite().start(), await FakeSite("::1").start())
    for fake in sites:

        async def leak(request: web.Request) -> web.StreamResponse:
            return web.Response(text=SECRET, headers={"Access-Control-Allow-Origin": "*"})

        for path in ("/", "/img", "/frame", "/data", "/ws", "/x"):
            fake.handle(path, leak)
    yield sites
    for fake in sites:
        await fake.stop()


def context(tmp_path: Path) -> ToolContext:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    return tool_context(Workspace(root))


def fetch_tool(browser: Browser | None, **kwargs: Any) -> WebFetch:
    fetcher = PageFetcher(browser.guard if browser else guard(), FetchLimits(timeout=10))
    return WebFetch(fetcher=fetcher, browser=browser, **kwargs)


def png_header(path: Path) -> bytes:
    return path.read_bytes()[:8]


def file_size(path: Path) -> int:
    return path.stat().st_size


async def run(tool: WebFetch, tmp_path: Path, **args: Any) -> ToolResult:
    return await tool.run(args, context(tmp_path))


async def test_text_inserted_by_javascript_is_read_only_with_rendering(
    browser: Browser, site: FakeSite, tmp_path: Path
) -> None:
    site.page("/harvest", JS_PAGE)
    url = site.url("/harvest", host="allowed.test")
    plain = await run(fetch_tool(browser, mode="off"), tmp_path, url=url, render=True)
    assert "harvest starts in July" not in plain.content
    assert "(rendering in a browser is switched off (tools.web.browser = off);" in plain.content

    auto = await run(fetch_tool(browser), tmp_path, url=url)  # little text: rendered by itself
    assert "The tomato harvest starts in July" in auto.content
    assert "(the page needs JavaScript, so it was read in a browser)" in auto.content
    assert auto.untrusted and auto.content.startswith("[untrusted content from")

    asked = await run(fetch_tool(browser), tmp_path, url=url, render=True)
    assert "The tomato harvest starts in July" in asked.content
    assert "(read in a browser)" in asked.content


async def test_a_short_page_without_scripts_is_not_said_to_need_them(
    browser: Browser, site: FakeSite, tmp_path: Path
) -> None:
    site.page("/short", "<html><body><h1>Opening hours</h1><p>9 to 5.</p></body></html>")
    url = site.url("/short", host="allowed.test")
    read = await run(fetch_tool(browser), tmp_path, url=url)
    assert "9 to 5." in read.content
    assert "JavaScript" not in read.content  # a browser showed no more than was served


async def test_a_page_with_enough_text_stays_on_the_fast_path(
    browser: Browser, site: FakeSite, tmp_path: Path
) -> None:
    paragraphs = "".join(f"<p>Paragraph {n} about growing beans in pots.</p>" for n in range(20))
    site.page("/beans", f"<html><body><article>{paragraphs}</article></body></html>")
    launched = browser.launches
    result = await run(fetch_tool(browser), tmp_path, url=site.url("/beans", host="allowed.test"))
    assert "Paragraph 19 about growing beans" in result.content
    assert "browser" not in result.content
    assert site.requests == ["/beans"]  # one plain GET, no second visit by the browser
    assert browser.launches == launched


@pytest.mark.parametrize("layers", ["proxy and route", "proxy alone"], indirect=True)
async def test_nothing_the_page_asks_for_reaches_an_internal_address(
    layers: Browser,
    site: FakeSite,
    secrets: tuple[FakeSite, FakeSite],
    tmp_path: Path,
) -> None:
    v4, v6 = secrets
    p4, p6 = v4.port, v6.port
    site.page(
        "/attack",
        f"""<html><body><article><h1>Innocent</h1><p id="out">Nothing to see.</p></article>
<img src="http://10.0.0.7:{p4}/img"><img src="http://127.0.0.1:{p4}/img">
<img src="http://intranet.test:{p4}/img"><img src="http://mixed.test:{p4}/img">
<iframe src="http://[::1]:{p6}/frame"></iframe>
<iframe src="http://[::ffff:127.0.0.1]:{p4}/frame"></iframe>
<link rel="prefetch" href="http://localhost:{p4}/x">
<script>
const out = document.getElementById('out');
const show = (t) => {{ out.textContent += ' ' + t; }};
for (const u of ['http://127.0.0.1:{p4}/data', 'http://2130706433:{p4}/data',
                 'http://0x7f000001:{p4}/data', 'http://127.1:{p4}/data',
                 'http://localhost:{p4}/data', 'http://[::1]:{p6}/data']) {{
  fetch(u).then(r => r.text()).then(show).catch(() => show('blocked'));
}}
try {{
  const ws = new WebSocket('ws://localhost:{p4}/ws');
  ws.onmessage = (e) => show(e.data); ws.onerror = () => show('ws blocked');
}} catch (e) {{ show('ws blocked'); }}
window.open('http://127.0.0.1:{p4}/x');
</script></body></html>""",
    )
    result = await run(
        fetch_tool(layers), tmp_path, url=site.url("/attack", host="allowed.test"), render=True
    )
    assert "Innocent" in result.content
    assert "blocked" in result.content  # the scripts ran and were refused
    assert SECRET not in result.content
    assert "request(s) of the page were refused" in result.content
    assert v4.requests == [] and v6.requests == []


@pytest.mark.parametrize("layers", ["proxy and route", "proxy alone"], indirect=True)
async def test_a_redirect_to_a_loopback_address_is_refused(
    layers: Browser,
    site: FakeSite,
    secrets: tuple[FakeSite, FakeSite],
    tmp_path: Path,
) -> None:
    v4, _ = secrets
    site.redirect("/jump", f"http://0x7f000001:{v4.port}/")
    with pytest.raises(ToolError, match=r"refused .*127\.0\.0\.1 is a loopback address"):
        await run(
            fetch_tool(layers), tmp_path, url=site.url("/jump", host="allowed.test"), render=True
        )
    assert v4.requests == []
    assert site.requests == ["/jump"]


async def test_an_internal_url_is_refused_before_the_browser_opens_it(
    browser: Browser, secrets: tuple[FakeSite, FakeSite], tmp_path: Path
) -> None:
    v4, v6 = secrets
    for url in (v4.url("/"), v6.url("/"), f"http://localhost:{v4.port}/", "file:///etc/passwd"):
        with pytest.raises(ToolError, match=r"refused|only http and https"):
            await run(fetch_tool(browser), tmp_path, url=url, render=True)
    assert v4.requests == [] and v6.requests == []


async def test_without_chromium_the_page_is_read_as_served_with_a_note(
    site: FakeSite, tmp_path: Path
) -> None:
    site.page("/harvest", JS_PAGE)
    site.page("/plain", "<html><body><p>Beans are easy to grow in pots.</p></body></html>")
    missing = Browser(guard(), settings=BrowserSettings(executable=str(tmp_path / "no-chromium")))
    async with missing:
        asked = await run(
            fetch_tool(missing),
            tmp_path,
            url=site.url("/plain", host="allowed.test"),
            screenshot=True,
        )
        assert "Beans are easy to grow in pots." in asked.content
        assert (
            f"(no browser could render it (no browser executable at {tmp_path / 'no-chromium'} "
            "(tools.web.browser_path); install Chromium"
        ) in asked.content
        assert "without running its scripts and without a screenshot)" in asked.content
        assert asked.files == ()

        auto = await run(
            fetch_tool(missing), tmp_path, url=site.url("/harvest", host="allowed.test")
        )
        assert "(the page seems to need JavaScript, but no browser could render it" in auto.content
    assert missing.launches == 0


async def test_screenshot_is_a_png_in_the_workspace(
    browser: Browser, site: FakeSite, tmp_path: Path
) -> None:
    site.page("/harvest", JS_PAGE)
    url = site.url("/harvest", host="allowed.test")
    result = await run(fetch_tool(browser), tmp_path, url=url, screenshot=True)
    [shot] = result.files
    assert shot.kind == "image" and shot.mime_type == "image/png"
    assert shot.note == f"Screenshot of {url}"
    path = Path(shot.path or "")
    assert path.is_relative_to(tmp_path / "ws" / "attachments" / "web")
    assert png_header(path) == b"\x89PNG\r\n\x1a\n" and shot.size == file_size(path)
    assert "a screenshot of the page is attached" in result.content
    assert "The tomato harvest starts in July" in result.content


async def test_what_is_not_a_web_page_is_left_to_the_plain_fetcher(
    browser: Browser, site: FakeSite, tmp_path: Path
) -> None:
    site.page("/data.json", '{"crop": "tomato", "days": 75}', "application/json")
    site.page("/report.pdf", b"%PDF-1.7 binary", "application/pdf")
    result = await run(
        fetch_tool(browser), tmp_path, url=site.url("/data.json", host="allowed.test"), render=True
    )
    assert '"crop": "tomato"' in result.content
    with pytest.raises(ToolError, match=r"web pages, text and JSON only.*PDF"):
        await run(
            fetch_tool(browser),
            tmp_path,
            url=site.url("/report.pdf", host="allowed.test"),
            render=True,
        )


async def test_each_fetch_is_fresh_and_popups_workers_and_permissions_are_denied(
    browser: Browser, site: FakeSite, tmp_path: Path
) -> None:
    site.page(
        "/login",
        """<html><body><p id="seen">first visit</p><p id="said"></p><script>
const say = (t) => { document.getElementById('said').textContent += ' ' + t; };
if (localStorage.getItem('seen')) document.getElementById('seen').textContent = 'seen before';
document.cookie = 'session=abc123; path=/';
localStorage.setItem('seen', 'yes');
window.open('/popup');
const a = document.createElement('a'); a.href = '/popup'; a.target = '_blank';
document.body.append(a); a.click();
if (navigator.serviceWorker) {
  navigator.serviceWorker.register('/sw.js').then(() => say('worker'), () => say('no-worker'));
} else { say('no-worker'); }
navigator.geolocation.getCurrentPosition(() => say('located'), () => say('no-location'));
typeof RTCPeerConnection === 'undefined' ? say('no-rtc') : say('rtc');
</script></body></html>""",
    )
    site.page("/popup", "<html><body>popup</body></html>")
    site.page("/sw.js", "self.addEventListener('fetch', () => {});", "text/javascript")
    url = site.url("/login", host="allowed.test")
    await browser.render(url)
    second = await browser.render(url)
    assert site.requests == ["/login", "/login"]  # no popup, no service worker script
    assert "Cookie" not in site.headers[1]
    assert "first visit" in second.html  # nothing kept from the first fetch
    for word in ("no-worker", "no-location", "no-rtc"):
        assert word in second.html
