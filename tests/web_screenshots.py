"""Refresh docs/web-chat.png and docs/status.png: ``python -m tests.web_screenshots``.

Runs the real gateway (web chat channel, fake LLM with scripted answers) in a temporary
home and photographs both pages with Playwright and the system Chromium.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from playwright.async_api import Page, async_playwright, expect

from channels.memory import MemoryChannel
from channels.webchat import create
from gateway.config.settings import Settings
from gateway.runtime.app import Gateway
from gateway.runtime.home import onboard
from tests.fakes.llm import FakeLLM, text
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


async def chat(page: Page, message: str, answers: int) -> None:
    await page.locator("#text").fill(message)
    await page.locator("#text").press("Enter")
    await expect(page.locator(".msg.assistant:not(.streaming)")).to_have_count(answers)


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
            telegram={"token": "123:screenshot"},
        )
        onboard(settings.home, settings.workspace_dir)
        telegram = MemoryChannel("telegram")
        async with Gateway(settings, channels=[create(settings), telegram]) as gateway:
            assert gateway.web is not None
            fake.queue(*(text(a) for a in ANSWERS))
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(
                    executable_path=CHROMIUM, args=CHROMIUM_ARGS
                )
                phone = await browser.new_page(viewport={"width": 390, "height": 720})
                await phone.goto(gateway.web.url)
                await chat(phone, "What should I do on Saturday?", 1)
                await chat(phone, "How do I find my longest Python files?", 2)
                await gateway.wait_idle()
                await phone.screenshot(path=str(DOCS / "web-chat.png"))
                await telegram.push("hello?", sender_id="4242", sender_name="Sam")
                await telegram.wait_for(1)
                desktop = await browser.new_page(viewport={"width": 1280, "height": 900})
                await desktop.goto(gateway.web.url + "status")
                await expect(desktop.locator("#pairing")).to_contain_text("Sam")
                await expect(desktop.locator("#turns tbody tr")).to_have_count(2)
                await desktop.screenshot(path=str(DOCS / "status.png"), full_page=True)
                await browser.close()
    await fake.stop()
    print(f"wrote {DOCS / 'web-chat.png'} and {DOCS / 'status.png'}")


if __name__ == "__main__":
    asyncio.run(main())
