"""Refresh the pictures of the web pages in docs/: ``python -m tests.web_screenshots``.

Runs the real gateway (web chat channel, Telegram on the in-memory channel, fake LLM with
scripted answers) in a temporary home, signs a browser in with a one-time link as
`switchboard run` prints it, and photographs the web chat on a phone (docs/web-chat.png),
the control center's conversations at a desk (docs/control-conversations.png) and its
people on a phone in dark mode (docs/control-people.png), with Playwright and the system
Chromium. The pictures are reduced to 256 colours to stay small in the repository.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from PIL import Image
from playwright.async_api import Browser, Page, async_playwright, expect

from channels.memory import MemoryChannel
from channels.webchat import create
from gateway.config.settings import Settings
from gateway.runtime.app import Gateway
from gateway.runtime.home import onboard
from tests.fakes.llm import FakeLLM, text
from tests.test_control_center import job
from tests.test_web_browser import CHROMIUM, CHROMIUM_ARGS

DOCS = Path(__file__).resolve().parents[1] / "docs"
ANSWERS = (
    "Here is a plan for **Saturday**:\n\n"
    "1. Farmers' market at 9\n"
    "2. Bike ride along the river\n"
    "3. Dinner with Ann at 7\n\n"
    "Want me to add these to your calendar notes?",
    "Sure, this counts the lines of every Python file:\n\n"
    "```sh\nfind . -name '*.py' | xargs wc -l | sort -n | tail\n```\n\n"
    "`tail` keeps the largest ones at the bottom.",
)
PEOPLE = (
    ("101", "Ann Lee", "Can you remind me what we decided about the garden shed?"),
    ("102", "Ben Okafor", "What time is the train to Leeds on Friday?"),
)


async def chat(page: Page, message: str, answers: int) -> None:
    await page.locator("#text").fill(message)
    await page.locator("#text").press("Enter")
    await expect(page.locator(".msg.assistant:not(.streaming)")).to_have_count(answers)


async def signed_in(browser: Browser, gateway: Gateway, width: int, scheme: str) -> Page:
    assert gateway.web is not None
    context = await browser.new_context(
        viewport={"width": width, "height": 760 if width < 500 else 820},
        color_scheme="dark" if scheme == "dark" else "light",
    )
    page = await context.new_page()
    await page.goto(gateway.web.sign_in_link())
    return page


def small(path: Path) -> None:
    """256 colours: a page's picture loses nothing a reader would see."""
    with Image.open(path) as image:
        image.convert("RGB").quantize(colors=256).save(path, optimize=True)


async def main() -> None:
    fake = await FakeLLM().start()
    with tempfile.TemporaryDirectory() as home:
        settings = Settings(
            home=Path(home),
            llm={
                "provider": "openai",
                "model": "gpt-4o-mini",
                "base_url": fake.openai_url,
                "api_key": "sk-screenshot",  # priced by the shipped table
            },
            limits={"gateway_daily_usd": 1.0},  # a money cap for the page to chart
            agent={"reflection": False},
            web={"port": 0},
            telegram={"token": "123:screenshot", "owners": ["101"], "allow_from": ["102"]},
        )
        onboard(settings.home, settings.workspace_dir)
        telegram = MemoryChannel("telegram")
        async with Gateway(settings, channels=[create(settings), telegram]) as gateway:
            assert gateway.web is not None
            for n, (person, name, question) in enumerate(PEOPLE, start=1):
                fake.queue(text(f"Of course, {name.split()[0]}: here is what I found."))
                await telegram.push(question, sender_id=person, chat_id=person, sender_name=name)
                await telegram.wait_for(n)
            await telegram.push("hello?", sender_id="4242", chat_id="4242", sender_name="Sam")
            await gateway.store.jobs.add(job("3fa2c1d0"))
            fake.queue(*(text(a) for a in ANSWERS))
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(
                    executable_path=CHROMIUM, args=CHROMIUM_ARGS
                )
                phone = await signed_in(browser, gateway, 390, "light")
                await chat(phone, "What should I do on Saturday?", 1)
                await chat(phone, "How do I find my longest Python files?", 2)
                await gateway.wait_idle()
                await phone.screenshot(path=str(DOCS / "web-chat.png"))
                desktop = await signed_in(browser, gateway, 1280, "light")
                await desktop.goto(gateway.web.url + "conversations")
                await expect(desktop.locator("#content tbody tr")).to_have_count(3)
                await desktop.screenshot(path=str(DOCS / "control-conversations.png"))
                dark = await signed_in(browser, gateway, 390, "dark")
                await dark.goto(gateway.web.url + "people")
                await expect(dark.locator("#content")).to_contain_text("Sam")
                await dark.screenshot(path=str(DOCS / "control-people.png"))
                await browser.close()
    await fake.stop()
    for name in ("web-chat.png", "control-conversations.png", "control-people.png"):
        small(DOCS / name)
        print(f"wrote {DOCS / name} ({(DOCS / name).stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    asyncio.run(main())
