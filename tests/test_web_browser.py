"""The web chat and the control center's first pages in a real browser: Debian's Chromium
driven by Playwright (tests/test_control_browser.py drives every section).

One browser per module (a fresh context per test); each test runs the real gateway with
the web chat channel against the fake LLM. `playwright install` cannot download browsers
here, so the system Chromium is used; the tests skip only when it is not installed.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from channels.memory import MemoryChannel
from channels.webchat import create
from gateway.config.settings import Settings
from gateway.runtime.app import Gateway
from gateway.runtime.intake.pairing import WELCOME
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, held, text
from tests.fakes.speech import FakeSpeech
from tests.system import missing

pytestmark = pytest.mark.asyncio(loop_scope="module")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FOUND = Path(CHROMIUM).exists()
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    # a microphone that plays a tone, allowed without asking: the record button's recording
    "--use-fake-device-for-media-stream",
    "--use-fake-ui-for-media-stream",
]
TOKEN = "browser-token-0123456789abcdef"
WAIT_MS = 10_000

# Records every text a streaming answer bubble showed, so a test can tell that fragments
# were on screen before the final answer replaced them.
RECORD_STREAM = """
window.__streamed = [];
new MutationObserver(() => {
  for (const el of document.querySelectorAll('.msg.streaming .body')) {
    window.__streamed.push(el.textContent);
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


@pytest_asyncio.fixture(loop_scope="module")
async def fake_llm() -> AsyncIterator[FakeLLM]:
    """The conftest fake, started on the module's loop (shared with the browser)."""
    fake = await FakeLLM().start()
    yield fake
    await fake.stop()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def browser() -> AsyncIterator[Browser]:
    if not CHROMIUM_FOUND:
        pytest.skip(f"Chromium is not installed {missing('chromium')}")
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=30_000
        )
        yield chromium
        await chromium.close()


@pytest_asyncio.fixture(loop_scope="module")
async def context(browser: Browser) -> AsyncIterator[BrowserContext]:
    ctx = await browser.new_context(viewport={"width": 390, "height": 780})  # a phone
    ctx.set_default_timeout(WAIT_MS)
    yield ctx
    await ctx.close()


@asynccontextmanager
async def serving(settings: Settings, *extra: MemoryChannel) -> AsyncIterator[Gateway]:
    async with Gateway(settings, channels=[create(settings), *extra]) as gateway:
        assert gateway.web is not None
        yield gateway


async def signed_in(page: Page, gateway: Gateway, path: str = "") -> None:
    """Open ``path`` as the owner's browser: the one-time link (as `switchboard run` prints
    it) signs the page in and leads to the chat."""
    assert gateway.web is not None
    await page.goto(gateway.web.sign_in_link())
    if path:
        await page.goto(gateway.web.url + path)


async def send(page: Page, message: str) -> None:
    await page.locator("#text").fill(message)
    await page.locator("#text").press("Enter")


async def test_chat_streams_the_answer_and_keeps_the_session_across_reloads(
    make_settings: SettingsFactory, fake_llm: FakeLLM, context: BrowserContext
) -> None:
    answer = "Hello there, **friend**. This answer arrives in several pieces."
    fake_llm.queue(text(answer))
    async with serving(make_settings(web={"port": 0})) as gateway:
        assert gateway.web is not None
        page = await context.new_page()
        await page.add_init_script(RECORD_STREAM)
        await signed_in(page, gateway)
        await expect(page.locator("#connection")).to_have_text("connected")
        await expect(page.locator("#record")).to_be_hidden()  # nothing would hear it: no [voice]
        hint = page.locator("#empty")  # a new chat is not a blank page
        await expect(hint).to_be_visible()
        await expect(hint).to_contain_text("/help lists the commands")
        await send(page, "hi there")
        await expect(hint).to_be_hidden()

        final = page.locator(".msg.assistant:not(.streaming)")
        await expect(final).to_have_count(1)
        await expect(final).to_contain_text("Hello there, friend. This answer arrives")
        await expect(final.locator("strong")).to_have_text("friend")
        streamed: list[str] = await page.evaluate("window.__streamed")
        partial = [s for s in streamed if s and len(s) < len(answer)]
        assert partial, "no fragment was shown before the final answer"
        assert answer.startswith(partial[0])

        await page.reload()
        await expect(page.locator(".msg.user")).to_have_text(re.compile("hi there"))
        await expect(hint).to_be_hidden()  # the transcript came back, not the hint
        await expect(page.locator(".msg.assistant")).to_contain_text("This answer arrives")

        await send(page, "and a second question")
        await expect(page.locator(".msg.assistant")).to_have_count(2)
        await gateway.wait_idle()
        assert fake_llm.requests[-1].user_texts[-2:] == ["hi there", "and a second question"]

        cookie = next(c for c in await context.cookies() if c["name"] == "switchboard_auth")
        assert cookie["httpOnly"] is True
        assert cookie["sameSite"] == "Strict"
        assert cookie["value"] not in page.url


async def test_a_voice_message_recorded_in_the_browser_is_heard_and_answered(
    make_settings: SettingsFactory, fake_llm: FakeLLM, context: BrowserContext
) -> None:
    speech = await FakeSpeech(transcript="please water the plants").start()
    try:
        fake_llm.queue(text("The plants were watered on Sunday."))
        voice = {"base_url": speech.base_url, "api_key": "sk-voice"}
        async with serving(make_settings(web={"port": 0}, voice=voice)) as gateway:
            page = await context.new_page()
            await signed_in(page, gateway)
            await expect(page.locator("#connection")).to_have_text("connected")
            record = page.locator("#record")
            await record.click()
            await expect(record).to_have_attribute("aria-pressed", "true")
            # a second or more recorded, and the time shows where the person types
            await expect(record).to_have_attribute(
                "title", re.compile(r"Stop and send \(0:0[1-9]\)")
            )
            await expect(page.locator("#text")).to_have_attribute(
                "placeholder", re.compile("Recording")
            )
            await record.click()
            await expect(record).to_have_attribute("aria-pressed", "false")
            await expect(page.locator(".msg.assistant")).to_contain_text(
                "The plants were watered on Sunday."
            )
            await gateway.wait_idle()
            await page.close()
    finally:
        await speech.stop()
    [heard] = speech.calls
    assert heard.upload[:4] == b"\x1aE\xdf\xa3"  # a WebM file, as the browser recorded it
    said = fake_llm.requests[-1].last_user_text
    assert "please water the plants" in said and "[voice attached: voice message.webm" in said


async def test_model_output_with_script_is_shown_as_text(
    make_settings: SettingsFactory, fake_llm: FakeLLM, context: BrowserContext
) -> None:
    hostile = (
        "<script>window.__pwned = 1</script>"
        '<img src="x" onerror="window.__pwned = 2"> '
        "[click](javascript:window.__pwned=3) **still bold**"
    )
    fake_llm.queue(text(hostile))
    async with serving(make_settings(web={"port": 0})) as gateway:
        assert gateway.web is not None
        page = await context.new_page()
        await signed_in(page, gateway)
        await send(page, "say something dangerous")
        final = page.locator(".msg.assistant:not(.streaming)")
        await expect(final).to_contain_text("<script>window.__pwned = 1</script>")
        await expect(final).to_contain_text('<img src="x" onerror="window.__pwned = 2">')
        await expect(final.locator("strong")).to_have_text("still bold")
        assert await final.locator("script, img, a[href^='javascript']").count() == 0
        await page.reload()
        await expect(page.locator(".msg.assistant")).to_contain_text("<script>")
        assert await page.evaluate("window.__pwned") is None


async def test_a_task_list_shows_its_boxes_and_no_bullets(
    make_settings: SettingsFactory, fake_llm: FakeLLM, context: BrowserContext
) -> None:
    fake_llm.queue(text("Your list:\n\n- [ ] buy milk\n- [x] call mum\n- plain item"))
    async with serving(make_settings(web={"port": 0})) as gateway:
        assert gateway.web is not None
        page = await context.new_page()
        await signed_in(page, gateway)
        await send(page, "my list?")
        items = page.locator(".msg.assistant:not(.streaming) li")
        await expect(items).to_have_text(["☐ buy milk", "☑ call mum", "plain item"])
        bullets = await items.evaluate_all("els => els.map(e => getComputedStyle(e).listStyleType)")
    assert bullets[:2] == ["none", "none"]  # the box is the bullet
    assert bullets[2] != "none"


async def test_health_and_people_pages_show_channels_turns_traces_and_approve_pairing(
    make_settings: SettingsFactory, fake_llm: FakeLLM, context: BrowserContext
) -> None:
    settings = make_settings(web={"port": 0}, telegram={"token": "123:abc"})
    telegram = MemoryChannel("telegram")
    async with serving(settings, telegram) as gateway:
        assert gateway.web is not None
        page = await context.new_page()
        await signed_in(page, gateway)
        await send(page, "hello status")
        await expect(page.locator(".msg.assistant:not(.streaming)")).to_contain_text("echo:")
        await gateway.wait_idle()
        await telegram.push("let me in", sender_id="777", sender_name="Newcomer")
        await telegram.wait_for(1)

        await page.get_by_role("link", name="Health").click()  # one click from the chat
        await expect(page).to_have_url(re.compile(r"/health$"))
        webchat = page.locator("#channels tr", has_text="webchat")
        await expect(webchat).to_contain_text("connected")
        model = page.locator("#models tr", has_text="fake-model")
        await expect(model).to_contain_text("answered last")
        await expect(model).to_contain_text("llm")
        turn = page.locator("#turns tbody tr").first
        await expect(turn).to_contain_text("done")
        await expect(turn).to_contain_text("You, in the web chat")
        await signed_in(page, gateway, "usage")
        await expect(page.locator("#content")).to_contain_text("Per day")
        await signed_in(page, gateway, "jobs")
        await expect(page.locator("#content")).to_contain_text(re.compile("Heartbeat|no scheduler"))
        await signed_in(page, gateway, "memory")
        await page.get_by_role("button", name="AGENTS.md").click()
        await expect(page.get_by_label("Contents of AGENTS.md")).not_to_be_empty()

        await signed_in(page, gateway, "people")
        request = page.locator("#content tr", has_text="Newcomer")
        await expect(request).to_contain_text("telegram user 777")
        await request.get_by_role("button", name="Approve", exact=True).click()
        await expect(page.locator("#content")).to_contain_text("No one is waiting.")
        assert (await telegram.wait_for(2))[1].text == WELCOME

        await signed_in(page, gateway, "health")
        await page.locator("#turns tbody tr").first.locator("a").click()
        await expect(page).to_have_url(re.compile(r"/trace/[0-9a-f]+$"))
        await expect(page.locator("#events")).to_contain_text("llm")


async def test_with_a_token_the_browser_must_sign_in_and_the_token_stays_out_of_urls(
    make_settings: SettingsFactory, context: BrowserContext
) -> None:
    async with serving(make_settings(web={"port": 0, "token": TOKEN})) as gateway:
        assert gateway.web is not None
        page = await context.new_page()
        seen_urls: list[str] = []
        page.on("request", lambda request: seen_urls.append(request.url))
        await page.goto(gateway.web.url + "status")
        await expect(page).to_have_url(re.compile(r"/login\?next=/status$"))
        await page.locator("input[name=token]").fill("not-the-token")
        await page.locator("button[type=submit]").click()
        await expect(page.get_by_role("alert")).to_contain_text("That token is not right")
        await page.locator("input[name=token]").fill(TOKEN)
        await page.locator("button[type=submit]").click()
        await expect(page).to_have_url(re.compile(r"/health$"))  # where the status page went
        await expect(page.locator("h2#title")).to_have_text("Health")
        await page.goto(gateway.web.url)
        await expect(page.locator("#connection")).to_have_text("connected")
        assert not any(TOKEN in url for url in seen_urls)
        auth = next(c for c in await context.cookies() if c["name"] == "switchboard_auth")
        assert auth["httpOnly"] is True
        assert auth["value"] != TOKEN


async def test_on_a_phone_the_health_page_fits_and_the_chat_shows_it_is_working(
    make_settings: SettingsFactory, fake_llm: FakeLLM, context: BrowserContext
) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "All done."))
    async with serving(
        make_settings(web={"port": 0}, llm={"model": "a-rather-long-model-name-v2"})
    ) as gateway:
        assert gateway.web is not None
        page = await context.new_page()
        await signed_in(page, gateway)
        await send(page, "take your time")
        working = page.locator("#typing")
        await expect(working).to_be_visible()  # while the model is still writing
        await expect(working).to_contain_text("Working")
        height = await working.evaluate("e => e.getBoundingClientRect().height")
        assert height >= 20, height  # more than a grey ellipsis
        gate.set()
        await expect(page.locator(".msg.assistant:not(.streaming)")).to_contain_text("All done.")
        await expect(working).to_be_hidden()

        await signed_in(page, gateway, "health")
        await expect(page.locator("#turns tbody tr").first).to_contain_text("done")
        await expect(page.locator("#models tr", has_text="a-rather-long")).to_be_visible()
        title = page.locator("header h1")
        await expect(title).to_have_text("Switchboard")
        assert await title.evaluate("e => e.scrollWidth <= e.clientWidth")  # not "St…"
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page is {width} px wide on a 390 px phone"
        icon = await page.request.get(gateway.web.url + "favicon.ico")
        assert icon.ok and icon.headers["content-type"].startswith("image/")


async def test_a_chat_left_open_is_cut_off_when_its_browser_signs_out(
    make_settings: SettingsFactory, fake_llm: FakeLLM, browser: Browser, context: BrowserContext
) -> None:
    """Signed out in one tab, the chat open in another says so, shows the conversation no
    more and does not reconnect: what another browser writes next never reaches it."""
    fake_llm.queue(text("the answer only the phone sees"))
    async with serving(make_settings(web={"port": 0})) as gateway:
        assert gateway.web is not None
        chat = await context.new_page()
        await signed_in(chat, gateway)
        await expect(chat.locator("#connection")).to_have_text("connected")
        other_tab = await context.new_page()
        await other_tab.goto(gateway.web.url + "conversations")
        await other_tab.get_by_role("button", name="Sign out").click()
        await expect(other_tab).to_have_url(re.compile(r"/login"))

        await expect(chat.locator("#connection")).to_have_text("signed out")
        await expect(chat.get_by_role("alert")).to_contain_text("Signed out: sign in again.")
        phone_context = await browser.new_context(viewport={"width": 390, "height": 780})
        try:
            phone = await phone_context.new_page()
            await signed_in(phone, gateway)
            await send(phone, "plans for after the laptop signed out")
            answer = phone.locator(".msg.assistant:not(.streaming)")
            await expect(answer).to_contain_text("the answer only the phone sees")
        finally:
            await phone_context.close()
        await expect(chat.locator(".msg")).to_have_count(0)
        await expect(chat.locator("#connection")).to_have_text("signed out")  # not back
        assert chat.url == gateway.web.url


async def test_the_chat_and_a_turns_trace_have_sign_out_in_their_header(
    make_settings: SettingsFactory, context: BrowserContext
) -> None:
    async with serving(make_settings(web={"port": 0})) as gateway:
        assert gateway.web is not None
        page = await context.new_page()
        await signed_in(page, gateway, "trace/0123abcd")
        trace_header = page.locator("header")
        await expect(trace_header.get_by_role("button", name="Sign out")).to_be_visible()
        await expect(trace_header.locator("#live")).to_have_text("live")  # as every section

        await page.goto(gateway.web.url)
        await expect(page.locator("#connection")).to_have_text("connected")
        sign_out = page.locator("header").get_by_role("button", name="Sign out")
        await expect(sign_out).to_be_visible()
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the chat is {width} px wide on a 390 px phone"
        await sign_out.click()
        await expect(page).to_have_url(re.compile(r"/login$"))
        await page.goto(gateway.web.url)
        await expect(page).to_have_url(re.compile(r"/login\?next=/$"))  # signed out for real
