"""The owner's control center in a real browser (issue 46): Debian's Chromium driven by
Playwright, against the real gateway (web chat, platform channels on their fakes, the fake
LLM). Signed in with a one-time link as `switchboard run` prints it.

Every section is opened at 1280 px and 390 px, light and dark, and photographed: the
pictures are kept in build/screenshots/control/ for a person to look at after the run.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Dialog, Page, expect
from playwright.async_api import TimeoutError as PlaywrightTimeout

from channels.memory import MemoryChannel
from channels.webchat import create
from gateway.config.settings import Settings, load_settings
from gateway.runtime.app import Gateway
from gateway.runtime.intake.pairing import WELCOME
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, calls, held, streamed, text
from tests.fakes.mailservers import free_port
from tests.fakes.telegram import FakeTelegram, fast_channel, random_token, section
from tests.test_approvals import COMMAND, runs
from tests.test_cli import switchboard
from tests.test_control_center import job
from tests.test_live_settings import write_home
from tests.test_settings_routes import said, served_env, switchboard_run
from tests.test_web_browser import WAIT_MS, browser, fake_llm, send, serving

__all__ = ["browser", "fake_llm"]  # the module's fixtures, shared with test_web_browser

pytestmark = pytest.mark.asyncio(loop_scope="module")

SHOTS = Path(__file__).resolve().parents[1] / "build" / "screenshots" / "control"
SECTIONS = {  # path: the heading it shows
    "conversations": "Conversations",
    "people": "People and access",
    "approvals": "Approvals",
    "memory": "Memory and workspace",
    "jobs": "Heartbeat and scheduled jobs",
    "usage": "Usage and cost",
    "health": "Health",
}
OWNER, MEMBER = "1", "3"


@pytest_asyncio.fixture(loop_scope="module")
async def telegram_api() -> AsyncIterator[FakeTelegram]:
    fake = await FakeTelegram(random_token()).start()
    yield fake
    await fake.stop()


async def owner_page(
    browser: Browser, gateway: Gateway, *, width: int = 1280, scheme: str = "light"
) -> tuple[BrowserContext, Page]:
    """A browser signed in as the owner, at ``width`` px in the ``scheme`` colours."""
    assert gateway.web is not None
    context = await browser.new_context(
        viewport={"width": width, "height": 900 if width > 500 else 780},
        color_scheme="dark" if scheme == "dark" else "light",
    )
    context.set_default_timeout(WAIT_MS)
    page = await context.new_page()
    await page.goto(gateway.web.sign_in_link())
    return context, page


async def open_section(page: Page, gateway: Gateway, path: str) -> None:
    assert gateway.web is not None
    await page.goto(gateway.web.url + path)
    await expect(page.locator("body[data-loaded='1']")).to_be_attached()


def shot(name: str) -> str:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return str(SHOTS / f"{name}.png")


def approval_ready(make_settings: SettingsFactory, **more: object) -> Settings:
    return make_settings(
        web={"port": 0},
        telegram={"token": "1:a", "owners": [OWNER], "allow_from": [OWNER, MEMBER]},
        tools={"approvals": "ask", "exec": {"sandbox": "off"}},
        **more,
    )


async def test_every_section_at_desktop_and_phone_width_in_light_and_dark(
    make_settings: SettingsFactory, fake_llm: FakeLLM, browser: Browser
) -> None:
    settings = approval_ready(
        make_settings, llm={"input_price_per_million": 0.15, "output_price_per_million": 0.6}
    )
    telegram = MemoryChannel("telegram")
    async with serving(settings, telegram) as gateway:
        fake_llm.queue(calls(("read_file", {"path": "AGENTS.md"})), text("It is in **AGENTS.md**."))
        await telegram.push(
            "where are my notes?", sender_id=OWNER, chat_id=OWNER, sender_name="Olga"
        )
        await telegram.wait_for(1, chat_id=OWNER)
        fake_llm.queue(calls(("exec", {"command": COMMAND})), text("Done, it ran."))
        await telegram.push("run the echo", sender_id=MEMBER, chat_id=MEMBER, sender_name="Ann Lee")
        await telegram.wait_for(2, chat_id=OWNER)  # the approval request
        await telegram.push("hello?", sender_id="77", chat_id="77", sender_name="Newcomer")
        await gateway.store.jobs.add(job("ab12cd34"))
        errors: list[str] = []
        for width in (1280, 390):
            for scheme in ("light", "dark"):
                context, page = await owner_page(browser, gateway, width=width, scheme=scheme)
                page.on("pageerror", lambda error: errors.append(str(error)))
                for path, title in SECTIONS.items():
                    await open_section(page, gateway, path)
                    await expect(page.locator("h2#title")).to_have_text(title)
                    await expect(
                        page.locator("nav.sections a[aria-current='page']")
                    ).to_be_visible()
                    wide = await page.evaluate("document.documentElement.scrollWidth")
                    assert wide <= width, f"/{path} is {wide} px wide at {width} px ({scheme})"
                    # ids never wrap a few characters a line (issue 54)
                    split = await page.evaluate(
                        "[...document.querySelectorAll('.id')]"
                        ".filter(e => e.getClientRects().length > 1).map(e => e.textContent)"
                    )
                    assert split == [], f"/{path}: ids wrapped at {width} px: {split}"
                    await page.screenshot(path=shot(f"{path}-{width}-{scheme}"), full_page=True)
                await open_section(page, gateway, "conversations?session=telegram:1")
                await expect(page.locator(".entry.tool")).to_contain_text("read_file")
                await page.screenshot(path=shot(f"transcript-{width}-{scheme}"), full_page=True)
                await context.close()
        # what each section showed, by name and not by id
        context, page = await owner_page(browser, gateway)
        await open_section(page, gateway, "conversations")
        await expect(page.locator("#content")).to_contain_text("Ann Lee (telegram)")
        await expect(page.locator("#content tr", has_text="Ann Lee")).to_contain_text(
            "waiting for approval"
        )
        await expect(page.locator("[data-badge='approvals']")).to_have_text("1")
        await expect(page.locator("[data-badge='pairing']")).to_have_text("1")
        await open_section(page, gateway, "approvals")
        await expect(page.locator("#content")).to_contain_text(COMMAND)
        await open_section(page, gateway, "usage")
        await expect(page.locator("#per-person ~ ol")).to_contain_text("Olga")
        await open_section(page, gateway, "health")
        model = page.locator("#models tr", has_text="fake-model")
        await expect(model).to_contain_text("answered last")
        name = model.locator("td").first.locator("span")
        assert await name.evaluate("e => e.getClientRects().length") == 1  # no "fake-mo del"
        await context.close()
    assert errors == []


async def test_the_usage_chart_ends_on_the_owners_today_not_the_browsers(
    make_settings: SettingsFactory, fake_llm: FakeLLM, browser: Browser
) -> None:
    """The owner's day (user.timezone, Kiritimati: UTC+14) is a day ahead of a browser in
    Los Angeles most of the time; the chart of days is the owner's, as its numbers are."""
    owners = ZoneInfo("Pacific/Kiritimati")
    settings = make_settings(web={"port": 0}, user={"timezone": "Pacific/Kiritimati"})
    async with serving(settings) as gateway:
        assert gateway.web is not None
        context = await browser.new_context(timezone_id="America/Los_Angeles")
        context.set_default_timeout(WAIT_MS)
        page = await context.new_page()
        await page.goto(gateway.web.sign_in_link())
        before = f"{datetime.now(owners):%Y-%m-%d}"
        await open_section(page, gateway, "usage")
        last = await page.locator("#per-day ~ figure .axis-bottom span").last.text_content()
        after = f"{datetime.now(owners):%Y-%m-%d}"
        await context.close()
    assert last in (before, after)


async def test_usage_says_only_true_things_before_any_use_and_after_a_price_is_set(
    tmp_path: Path, fake_llm: FakeLLM, browser: Browser
) -> None:
    """Nothing used: no 'highest: 1 tokens a day' over an empty chart. A price set after a
    call: not 'No model in use has a price' (the model has one now; the call so far was
    made before it, which is why it costs nothing)."""
    home = tmp_path / "home"
    write_home(home, fake_llm, web={"enabled": True, "port": 0})
    chat = MemoryChannel()
    async with serving(load_settings(home=home), chat) as gateway:
        context, page = await owner_page(browser, gateway)

        async def usage() -> str:
            await open_section(page, gateway, "usage")
            return await page.locator("#content").inner_text()

        unused = await usage()
        fake_llm.queue(text("Hello."))
        await chat.push("hello")
        await chat.wait_for(1)
        await gateway.wait_idle()
        used = await usage()
        prices = json.dumps({"fake-model": {"input": 1.0, "output": 2.0}})
        change = await gateway.change_settings({"llm.prices": prices}, by="test")
        priced_later = await usage()
        await context.close()
    assert "nothing used on these days" in unused and "highest" not in unused
    assert "Nothing used yet. fake-model (openai) has no price" in unused
    assert "highest: " in used and "fake-model (openai) has no price" in used
    assert "llm.prices" in change.applied
    assert "no price" not in priced_later
    assert "made before their model had a price" in priced_later


# Whether, in the navigation's visible part (between the chevrons shown), the current
# page's item can be seen, and the Health count can be, or is added up on a chevron.
NAV_IN_SIGHT = """() => {
  const box = document.querySelector("nav.sections .strip").getBoundingClientRect();
  const edge = (side) => document.querySelector(`nav.sections .edge.${side}:not([hidden])`);
  const start = edge("start"), end = edge("end");
  const left = start ? start.getBoundingClientRect().right : box.left;
  const right = end ? end.getBoundingClientRect().left : box.right;
  const seen = (node) => {
    const r = node.getBoundingClientRect();
    return r.width > 0 && r.left >= left - 0.5 && r.right <= right + 0.5;
  };
  const problems = document.querySelector("[data-badge='problems']");
  const summed = [start, end].some((e) => e && e.querySelector(".badge:not([hidden])")?.textContent === "1");
  return seen(document.querySelector("nav.sections [aria-current='page']"))
    && !problems.hidden && (seen(problems) || summed);
}"""


async def test_on_a_phone_the_navigation_shows_the_current_page_and_every_problem(
    make_settings: SettingsFactory, browser: Browser
) -> None:
    """At 390 px the row of sections is twice as wide as the screen: each page opens with
    its own item in sight, and Telegram being down (Health's count) is seen on every page,
    added up on the chevron of the edge that hides Health."""
    nobody = f"http://127.0.0.1:{free_port()}"  # Telegram down
    settings = make_settings(web={"port": 0}, telegram={"token": "1:a", "base_url": nobody})
    async with Gateway(settings, channels=[create(settings), fast_channel(settings)]) as gateway:
        assert gateway.web is not None
        context, page = await owner_page(browser, gateway, width=390)
        wide = await page.evaluate("document.querySelector('nav.sections .strip').scrollWidth")
        in_sight = {}
        for path in [*SECTIONS, "settings"]:
            await page.goto(gateway.web.url + path)
            await expect(page.locator("[data-badge='problems']")).to_have_text("1")
            try:
                await page.wait_for_function(NAV_IN_SIGHT, timeout=3000)
                in_sight[path] = True
            except PlaywrightTimeout:
                in_sight[path] = False
        await page.goto(gateway.web.url + "conversations")
        more = page.locator("nav.sections .edge.end")
        await expect(more.locator(".badge")).to_have_text("1")
        await more.click()  # scrolls the row on
        await expect(page.locator("nav.sections .edge.start")).to_be_visible()
        await page.screenshot(path=shot("nav-390-scrolled"))
        await context.close()
    assert wide > 700
    assert in_sight == dict.fromkeys([*SECTIONS, "settings"], True)


async def test_approving_a_pairing_request_answers_the_person_on_telegram(
    make_settings: SettingsFactory, browser: Browser, telegram_api: FakeTelegram
) -> None:
    settings = make_settings(
        web={"port": 0}, telegram=section(telegram_api, allow_from=[], dm_policy="pairing")
    )
    async with Gateway(settings, channels=[create(settings), fast_channel(settings)]) as gateway:
        await telegram_api.say("hello, may I?", chat_id=555, user_id=555, first_name="Dana")
        [code] = await telegram_api.wait_sent(1, chat_id=555)
        context, page = await owner_page(browser, gateway, width=390)
        await open_section(page, gateway, "people")
        waiting = page.locator("tr", has_text="Dana")
        await expect(waiting).to_contain_text("telegram user 555")
        pairing = await gateway.store.pairings.listing()
        assert pairing[0].code in code.params["text"]
        await waiting.get_by_role("button", name="Approve", exact=True).click()
        await expect(page.locator("#notice")).to_contain_text("Done")
        await expect(page.locator("#content")).to_contain_text("No one is waiting.")
        sent = await telegram_api.wait_sent(2, chat_id=555)
        await expect(page.locator("tr", has_text="Dana")).to_contain_text("paired")
        # linking her to the owner would make her an owner: it asks first, as Confirm does
        await page.get_by_label("Link").fill("telegram:555")
        await page.get_by_label("to the person of").fill("webchat:owner")
        asked: list[str] = []
        declined = asyncio.Event()

        async def decline(dialog: Dialog) -> None:
            asked.append(dialog.message)
            await dialog.dismiss()
            declined.set()

        page.once("dialog", decline)
        await page.get_by_role("button", name="Link", exact=True).click()
        await asyncio.wait_for(declined.wait(), WAIT_MS / 1000)
        links_after_no = await gateway.store.links.listing()
        await context.close()
    assert sent[1].params["text"] == WELCOME
    assert "becomes an owner" in asked[0] and "telegram:555" in asked[0]
    assert links_after_no == []


async def test_revoke_on_the_people_page_takes_a_listed_member_out_and_says_who_still_may_write(
    tmp_path: Path, fake_llm: FakeLLM, browser: Browser, telegram_api: FakeTelegram
) -> None:
    """A member config.toml's telegram.allow_from lists had no Revoke (the row said
    "config"); now the page revokes them as `switchboard pairing revoke` does, and its
    answer shows, on a line of its own, that "*" still lets anyone write."""
    home = tmp_path / "home"
    connect = section(telegram_api, poll_timeout_seconds=1)
    listed = {"owners": ["1"], "allow_from": ["*", "555"]}
    write_home(home, fake_llm, web={"enabled": True, "port": 0}, telegram=connect | listed)
    async with Gateway(load_settings(home=home)) as gateway:
        context, page = await owner_page(browser, gateway, width=390)
        await open_section(page, gateway, "people")
        asked: list[str] = []

        async def accept(dialog: Dialog) -> None:
            asked.append(dialog.message)
            await dialog.accept()

        page.once("dialog", accept)
        row = page.locator("tr", has_text="555")
        await row.get_by_role("button", name=re.compile("^Revoke")).click()
        notice = page.locator("#notice")
        await expect(notice).to_contain_text("Revoked telegram user 555")
        shown = await notice.inner_text()
        await expect(page.locator("tr", has_text="555")).to_have_count(0)
        await context.close()
    assert "allow_from in config.toml" in asked[0]
    assert shown == (
        "Revoked telegram user 555: their place in telegram.allow_from (config.toml).\n"
        'Note: telegram.allow_from has "*": anyone may still write to the bot there.'
    )
    assert load_settings(home=home).telegram.allow_from == ("*",)


async def test_an_edit_of_memory_md_is_in_the_next_turns_prompt(
    make_settings: SettingsFactory, fake_llm: FakeLLM, browser: Browser
) -> None:
    fact = "- The owner's cat is called Pixel."
    async with serving(make_settings(web={"port": 0})) as gateway:
        context, page = await owner_page(browser, gateway, scheme="dark")
        await open_section(page, gateway, "memory")
        await page.get_by_role("button", name="MEMORY.md").click()
        editor = page.get_by_label("Contents of MEMORY.md")
        await expect(editor).to_be_focused()
        before = await editor.input_value()
        await editor.fill(before.rstrip("\n") + "\n- Not reviewed.\n")
        await page.get_by_role("button", name="Review changes").click()
        await expect(page.get_by_role("button", name="Save", exact=True)).to_be_visible()
        # an edit after the review takes its Save away: what is saved was always reviewed
        await editor.fill(before.rstrip("\n") + "\n" + fact + "\n")
        await expect(page.get_by_role("button", name="Save", exact=True)).to_have_count(0)
        await page.get_by_role("button", name="Review changes").click()
        await expect(page.locator("pre.diff .add")).to_contain_text(["+" + fact])
        await page.get_by_role("button", name="Save", exact=True).click()
        await expect(page.locator("#review")).to_have_text("Saved MEMORY.md.")
        await page.screenshot(path=shot("memory-edit-1280-dark"), full_page=True)
        saved = (settings_memory := gateway.settings.workspace_dir / "MEMORY.md").read_text()
        assert fact in saved and "Not reviewed" not in saved
        await page.get_by_role("button", name="Close").click()
        await expect(page.locator("#content tr", has_text="MEMORY.md")).to_contain_text("web:owner")
        await page.goto(gateway.web.url if gateway.web else "")
        await send(page, "what is my cat called?")
        await expect(page.locator(".msg.assistant:not(.streaming)")).to_have_count(1)
        await gateway.wait_idle()
        await context.close()
    assert fact in fake_llm.requests[-1].system_text
    assert settings_memory.exists()


async def assistant_notes(telegram: MemoryChannel, gateway: Gateway, fake_llm: FakeLLM) -> str:
    """The assistant adds a line to MEMORY.md in a turn of the owner's Telegram chat (its
    memory_append tool, under the lock its notes take); the line."""
    fake_llm.queue(
        calls(("memory_append", {"content": "Ann likes green tea.", "to": "memory"})),
        text("Noted."),
    )
    await telegram.push("remember that Ann likes green tea", sender_id=OWNER, chat_id=OWNER)
    await telegram.wait_for(1, chat_id=OWNER)
    await gateway.wait_idle()
    return "- Ann likes green tea.\n"


async def test_a_note_the_assistant_wrote_while_the_owner_edited_is_kept_by_the_save(
    make_settings: SettingsFactory, fake_llm: FakeLLM, browser: Browser
) -> None:
    """The owner opens MEMORY.md, the assistant adds a note to it meanwhile, the owner changes
    the heading, reviews and saves: the note stays (the save merges, as the review shows),
    where one more Save used to write the editor's text over it."""
    settings = make_settings(web={"port": 0}, telegram={"token": "1:a", "owners": [OWNER]})
    telegram = MemoryChannel("telegram")
    memory = settings.workspace_dir / "MEMORY.md"
    async with serving(settings, telegram) as gateway:
        context, page = await owner_page(browser, gateway)
        await open_section(page, gateway, "memory")
        await page.get_by_role("button", name="MEMORY.md").click()
        editor = page.get_by_label("Contents of MEMORY.md")
        before = await editor.input_value()
        note = await assistant_notes(telegram, gateway, fake_llm)
        assert memory.read_text().endswith(note)
        await editor.fill(before.replace("# Long-term memory", "# What I keep about Olga", 1))
        await page.get_by_role("button", name="Review changes").click()
        await expect(page.locator("#review")).to_contain_text("those changes are kept")
        await expect(page.locator("pre.diff .add")).to_have_text(["+# What I keep about Olga"])
        await expect(page.locator("pre.diff .del")).to_have_text(["-# Long-term memory"])
        await expect(editor).to_have_value(re.compile("Ann likes green tea"))
        await page.get_by_role("button", name="Save", exact=True).click()
        await expect(page.locator("#review")).to_have_text("Saved MEMORY.md.")
        await page.screenshot(path=shot("memory-merged-1280-light"), full_page=True)
        await context.close()
    saved = memory.read_text()
    assert saved.startswith("# What I keep about Olga\n")
    assert saved.endswith(note)


async def test_where_both_changed_the_file_the_owner_decides_and_nothing_is_dropped(
    make_settings: SettingsFactory, fake_llm: FakeLLM, browser: Browser
) -> None:
    """The owner adds a line at the end of MEMORY.md while the assistant adds its note
    there: the review shows both as a conflict, nothing is written until the owner decides,
    and "Keep both" saves both lines."""
    settings = make_settings(web={"port": 0}, telegram={"token": "1:a", "owners": [OWNER]})
    telegram = MemoryChannel("telegram")
    memory = settings.workspace_dir / "MEMORY.md"
    mine = "- The owner's cat is called Pixel.\n"
    async with serving(settings, telegram) as gateway:
        context, page = await owner_page(browser, gateway, width=390, scheme="dark")
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await open_section(page, gateway, "memory")
        await page.get_by_role("button", name="MEMORY.md").click()
        editor = page.get_by_label("Contents of MEMORY.md")
        before = await editor.input_value()
        await editor.fill(before + mine)
        note = await assistant_notes(telegram, gateway, fake_llm)
        noted = memory.read_text()
        await page.get_by_role("button", name="Review changes").click()
        conflict = page.get_by_role("group", name="Conflict 1 of 1")
        await expect(conflict).to_contain_text(mine.strip())
        await expect(conflict).to_contain_text(note.strip())
        use = page.get_by_role("button", name="Use these choices")
        await expect(use).to_be_disabled()
        await expect(page.get_by_role("button", name="Save", exact=True)).to_have_count(0)
        await page.screenshot(path=shot("memory-conflict-390-dark"), full_page=True)
        untouched = memory.read_text()
        await conflict.get_by_label("Keep both (the file's first)").check()
        await use.click()
        await expect(page.locator("pre.diff .add")).to_have_text(["+" + mine.strip()])
        await page.get_by_role("button", name="Save", exact=True).click()
        await expect(page.locator("#review")).to_have_text("Saved MEMORY.md.")
        await context.close()
    assert untouched == noted  # nothing was written while the conflict waited
    assert memory.read_text() == before + note + mine
    assert errors == []


async def test_a_model_changed_on_the_settings_page_answers_the_next_turn(
    tmp_path: Path, fake_llm: FakeLLM, browser: Browser
) -> None:
    """The owner types another model into /settings on a phone and saves: the running
    gateway (of a config.toml, as `switchboard run` is) asks the model server for it at the
    next turn, with no restart; the file says so too."""
    home = tmp_path / "home"
    write_home(home, fake_llm, web={"enabled": True, "port": 0})
    async with serving(load_settings(home=home)) as gateway:
        assert gateway.web is not None
        context, page = await owner_page(browser, gateway, width=390, scheme="dark")
        await page.goto(gateway.web.url + "settings")
        model = page.locator('input[name="llm.model"]')
        await expect(model).to_have_value("fake-model")
        await model.fill("fake-model-2")
        await page.get_by_role("button", name="Save", exact=True).click()
        saved = page.get_by_role("status").filter(has_text="applied")
        await expect(saved).to_contain_text("applied: llm.model", timeout=WAIT_MS)
        await expect(page.locator('input[name="llm.model"]')).to_have_value("fake-model-2")
        await page.screenshot(path=shot("settings-saved-390-dark"), full_page=True)
        await page.goto(gateway.web.url)
        await send(page, "hello after the change")
        await expect(page.locator(".msg.assistant:not(.streaming)")).to_have_count(1)
        await gateway.wait_idle()
        await context.close()
    assert [r.body["model"] for r in fake_llm.requests] == ["fake-model-2"]
    assert 'model = "fake-model-2"' in (home / "config.toml").read_text()


async def test_settings_on_a_phone_find_a_key_count_the_changes_and_lead_to_a_refused_one(
    tmp_path: Path, fake_llm: FakeLLM, browser: Browser
) -> None:
    """Save stays in sight (it was 56 screens below the model), the filter finds settings
    by words of their description (also in a platform not set up), the changes not saved
    are counted and marked, and a refused save leads to the field it is about."""
    home = tmp_path / "home"
    write_home(home, fake_llm, web={"enabled": True, "port": 0})
    async with serving(load_settings(home=home)) as gateway:
        assert gateway.web is not None
        context, page = await owner_page(browser, gateway, width=390)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.goto(gateway.web.url + "settings")
        save = page.get_by_role("button", name="Save", exact=True)
        await expect(save).to_be_in_viewport()
        wide = await page.evaluate("document.documentElement.scrollWidth")
        find = page.get_by_label("Find a setting")
        await find.fill("time zone")
        visible = ".setting:visible"
        shown = await page.locator(visible).evaluate_all("all => all.map(e => e.dataset.key)")
        await expect(page.locator("#settings-found")).to_have_text(f"{len(shown)} settings match.")
        await find.fill("imap host")  # in email, a channel not set up
        await expect(page.locator('[name="email.imap_host"]')).to_be_visible()
        await find.fill("")
        await page.locator('[name="llm.model"]').fill("fake-model-2")
        unsaved = page.locator("#settings-unsaved")
        await expect(unsaved).to_have_text("1 unsaved change.")
        await expect(page.locator("[id='field-llm.model'] [data-mark='changed']")).to_be_visible()
        await page.locator('[name="agent.max_iterations"]').fill("0")
        await expect(unsaved).to_have_text("2 unsaved changes.")
        await save.click()
        problems = page.locator("#settings-problems")
        await expect(problems).to_be_focused(timeout=WAIT_MS)
        await expect(unsaved).to_have_text("2 unsaved changes.")  # kept as typed
        await problems.get_by_role("link", name="agent.max_iterations").click()
        iterations = page.locator('[name="agent.max_iterations"]')
        await expect(iterations).to_be_focused()
        await expect(iterations).to_be_in_viewport()
        await page.screenshot(path=shot("settings-refused-390"))
        await context.close()
    assert wide <= 390
    assert "user.timezone" in shown and "llm.model" not in shown
    assert errors == []


@pytest.mark.slow
async def test_restart_now_restarts_once_and_the_page_comes_back_by_itself(
    tmp_path: Path, fake_llm: FakeLLM, browser: Browser, telegram_api: FakeTelegram
) -> None:
    """On a running `switchboard run`: a key that waits for a restart is saved, Restart
    now is pressed, and the page goes back to the settings by itself once the gateway is
    up again. Neither the saved page nor the restarting page posts anything when reloaded:
    one save, one restart. In a browser without scripts the page holds no setting (the
    data goes only with the page key, which scripts send) and says it needs them."""
    home = tmp_path / "home"
    # the same port after the restart, as a configured one is
    env = served_env(home, fake_llm, telegram_api) | {"SWITCHBOARD_WEB__PORT": str(free_port())}
    assert (await switchboard("onboard", env=env))[0] == 0
    async with switchboard_run(env) as process:
        code, out, _ = await switchboard("web", "--json", env=env)
        assert code == 0
        context = await browser.new_context()
        context.set_default_timeout(WAIT_MS)
        page = await context.new_page()
        await page.goto(json.loads(out)["link"])
        await page.goto(json.loads(out)["url"] + "settings")
        await page.get_by_role("link", name="storage", exact=True).click()  # a closed section
        await page.locator('[name="storage.retention_days"]').fill("15")
        await page.get_by_role("button", name="Save", exact=True).click()
        restart_offered = page.get_by_role("status").filter(has_text="needs a restart")
        await expect(restart_offered).to_be_visible(timeout=WAIT_MS)  # a save takes a while
        await page.reload()  # a GET: nothing is posted again
        await page.screenshot(path=shot("settings-restart-offered"))
        await page.get_by_role("button", name="Restart now").click()
        await said(process, "restarting\n")
        restarting = page.url
        await page.screenshot(path=shot("settings-restarting"))
        await said(process, "ready\n")
        await page.wait_for_url("**/settings", timeout=30_000)
        await page.goto(restarting)  # the restarting page again, as a reload would
        await page.wait_for_url("**/settings", timeout=30_000)
        await context.close()
        with sqlite3.connect(home / "data" / "switchboard.db") as db:
            kinds = [k for (k,) in db.execute("SELECT kind FROM audit ORDER BY id")]
        code, out, _ = await switchboard("web", "--json", env=env)
        context = await browser.new_context(java_script_enabled=False)
        context.set_default_timeout(WAIT_MS)
        page = await context.new_page()
        await page.goto(json.loads(out)["link"])
        await page.goto(json.loads(out)["url"] + "settings")
        await expect(page.locator("#title")).to_have_text("Settings")
        plain = await page.content()
        await context.close()
        running = process.returncode is None
    assert "/settings/restarting?" in restarting
    assert kinds.count("settings_changed") == 1 and kinds.count("restart_requested") == 1
    assert "retention_days = 15" in (home / "config.toml").read_text()
    assert "These pages need JavaScript" in plain  # a <noscript>, which Chromium shows
    assert "retention_days" not in plain and 'name="llm.model"' not in plain
    assert running


async def test_a_job_is_paused_resumed_and_deleted_from_the_jobs_page(
    make_settings: SettingsFactory, browser: Browser
) -> None:
    async with serving(make_settings(web={"port": 0})) as gateway:
        await gateway.store.jobs.add(job("ab12cd34"))
        context, page = await owner_page(browser, gateway, width=390)
        page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
        await open_section(page, gateway, "jobs")
        row = page.locator("tr", has_text="water the plants")
        await expect(row).to_contain_text("active")
        await row.get_by_role("button", name="Pause job ab12cd34").click()
        await expect(row).to_contain_text("paused")
        stored = await gateway.store.jobs.get("ab12cd34")
        assert stored is not None and stored.state == "paused"
        await expect(row.get_by_role("button", name="Resume job ab12cd34")).to_be_focused()
        await row.get_by_role("button", name="Resume job ab12cd34").click()
        await expect(row).to_contain_text("active")
        await row.get_by_role("button", name="Delete job ab12cd34").click()
        await expect(page.locator("#content")).to_contain_text("No scheduled jobs")
        gone = await gateway.store.jobs.get("ab12cd34")
        await context.close()
    assert gone is not None and gone.state == "removed"


async def test_a_running_turn_is_stopped_and_words_found_from_the_conversations_page(
    make_settings: SettingsFactory, fake_llm: FakeLLM, browser: Browser
) -> None:
    settings = make_settings(web={"port": 0}, telegram={"token": "1:a", "allow_from": ["42"]})
    telegram = MemoryChannel("telegram")
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "never shown"))
    async with serving(settings, telegram) as gateway:
        await telegram.push(
            "write me an essay on otters", sender_id="42", chat_id="42", sender_name="Ann"
        )
        await fake_llm.wait_for_requests(1)
        context, page = await owner_page(browser, gateway, width=390, scheme="dark")
        await open_section(page, gateway, "conversations")
        row = page.locator("tr", has_text="Ann (telegram)")
        await expect(row).to_contain_text("answering")
        await row.get_by_role("link", name="Ann (telegram)").click()
        await page.get_by_role("button", name="Stop").click()
        await expect(page.locator("#notice")).to_contain_text("Stopping")
        [stopped] = await telegram.wait_for(1)
        await gateway.wait_idle()
        await expect(page.locator(".entry").last).to_contain_text(  # a redraw
            "the person stopped this answer here"
        )
        await page.get_by_role("link", name="← Every conversation").click()
        await page.get_by_role("searchbox", name="Search every conversation").fill("otters")
        await page.get_by_role("button", name="Search").click()
        await expect(page.locator("#content tr", has_text="otters")).to_contain_text(
            "Ann (telegram)"
        )
        gate.set()
        await context.close()
    assert stopped.text.startswith("Stopped.")


async def test_a_transcript_says_who_said_each_message_by_name(
    make_settings: SettingsFactory, fake_llm: FakeLLM, browser: Browser
) -> None:
    """The owner's own words are "You" (they were "Them"), a member's are theirs by name, the
    answers the assistant's by its name; a search names them the same way."""
    settings = make_settings(
        web={"port": 0},
        agent={"name": "Pip"},
        telegram={"token": "1:a", "owners": [OWNER], "allow_from": [OWNER, MEMBER]},
    )
    telegram = MemoryChannel("telegram")
    fake_llm.queue(text("Hello Olga."), text("Hello Ann."))
    async with serving(settings, telegram) as gateway:
        await telegram.push("hi, it is me", sender_id=OWNER, chat_id=OWNER, sender_name="Olga")
        await telegram.wait_for(1, chat_id=OWNER)
        await telegram.push("hi from Ann", sender_id=MEMBER, chat_id=MEMBER, sender_name="Ann Lee")
        await telegram.wait_for(1, chat_id=MEMBER)
        await gateway.wait_idle()
        context, page = await owner_page(browser, gateway)
        who = page.locator(".entry header strong")
        await open_section(page, gateway, f"conversations?session=telegram:{OWNER}")
        await expect(who).to_have_text(["You", "Pip"])
        await open_section(page, gateway, f"conversations?session=telegram:{MEMBER}")
        await expect(who).to_have_text(["Ann Lee", "Pip"])
        await open_section(page, gateway, "conversations?q=hi")
        await expect(page.locator("#content td[data-label='Who']")).to_have_count(2)
        found = await page.locator("#content td[data-label='Who']").all_text_contents()
        await context.close()
    assert sorted(found) == ["Ann Lee", "You"]


async def test_the_words_found_are_marked_and_everything_else_shows_as_written(
    make_settings: SettingsFactory, fake_llm: FakeLLM, browser: Browser
) -> None:
    """A search result marks the words found (they showed as "[otters]"); brackets and
    markup someone wrote are shown as the text they are, never taken for either."""
    settings = make_settings(web={"port": 0}, telegram={"token": "1:a", "allow_from": ["42"]})
    telegram = MemoryChannel("telegram")
    said = 'Footnote [1]: <img src=x onerror="document.title=1"> <b>sea</b> otters hold hands'
    fake_llm.queue(text("They do."))
    async with serving(settings, telegram) as gateway:
        await telegram.push(said, sender_id="42", chat_id="42", sender_name="Ann")
        await telegram.wait_for(1)
        await gateway.wait_idle()
        context, page = await owner_page(browser, gateway, width=390)
        await open_section(page, gateway, "conversations?q=otters")
        snippet = page.locator("#content .snippet")
        await expect(snippet.locator("mark")).to_have_text(["otters"])
        await expect(snippet).to_contain_text(said)
        markup = await snippet.locator("img, b").count()
        title = await page.title()
        await page.screenshot(path=shot("search-390-light"))
        await context.close()
    assert markup == 0 and title != "1"


async def test_a_waiting_command_is_approved_on_the_approvals_page_and_runs_once(
    make_settings: SettingsFactory, fake_llm: FakeLLM, browser: Browser
) -> None:
    settings = approval_ready(make_settings)
    telegram = MemoryChannel("telegram")
    fake_llm.queue(calls(("exec", {"command": COMMAND})), text("Done, it ran."))
    async with serving(settings, telegram) as gateway:
        await telegram.push("please run it", sender_id=MEMBER, chat_id=MEMBER, sender_name="Ann")
        await telegram.wait_for(1, chat_id=OWNER)
        context, page = await owner_page(browser, gateway, width=390)
        await open_section(page, gateway, "approvals")
        request = page.locator("article.card", has_text="exec for Ann")
        await expect(request.locator("dd pre")).to_have_text(COMMAND)  # every argument, whole
        await request.get_by_role("button", name="Approve", exact=True).click()
        await expect(page.locator("#notice")).to_contain_text("Approved")
        answer = (await telegram.wait_for(2, chat_id=MEMBER))[1]
        await expect(page.locator("#content")).to_contain_text("Nothing is waiting")
        await gateway.wait_idle()
        await context.close()
    assert answer.text == "Done, it ran."
    assert runs(settings) == 1


async def test_a_hidden_page_keeps_no_stream_open(
    make_settings: SettingsFactory, browser: Browser
) -> None:
    async with serving(make_settings(web={"port": 0})) as gateway:
        assert gateway.web is not None
        control = gateway.web.control
        context, page = await owner_page(browser, gateway)
        await open_section(page, gateway, "health")
        await expect(page.locator("#live")).to_have_text("live")
        assert control.streams == 1
        await page.evaluate(
            "Object.defineProperty(document, 'hidden', {value: true, configurable: true});"
            "document.dispatchEvent(new Event('visibilitychange'))"
        )
        await asyncio.wait_for(control.unwatched.wait(), 10)
        await expect(page.locator("#live")).to_have_text("paused")
        await page.evaluate(
            "Object.defineProperty(document, 'hidden', {value: false, configurable: true});"
            "document.dispatchEvent(new Event('visibilitychange'))"
        )
        await expect(page.locator("#live")).to_have_text("live")
        assert control.streams == 1
        await context.close()


async def test_the_web_chats_stop_button_keeps_what_was_written_and_the_order(
    make_settings: SettingsFactory, fake_llm: FakeLLM, browser: Browser
) -> None:
    answer = " ".join(f"word{n}" for n in range(400))
    fake_llm.queue(streamed(answer, chunks=400, over=40.0))
    async with serving(make_settings(web={"port": 0})) as gateway:
        context, page = await owner_page(browser, gateway, width=390)
        await expect(page.locator("#connection")).to_have_text("connected")
        stop = page.get_by_role("button", name="Stop")
        await expect(stop).to_be_hidden()
        await send(page, "tell me a long story")
        await expect(page.locator(".msg.streaming")).to_contain_text("word3")
        await expect(stop).to_be_visible()
        await stop.click()
        kept = page.locator(".msg.assistant.stopped")
        await expect(kept).to_contain_text("word0 word1 word2 word3")
        await expect(kept).to_contain_text("Stopped before it finished.")
        await expect(page.locator(".msg").last).to_contain_text("Stopped.")
        await expect(stop).to_be_hidden()

        async def order() -> list[str]:
            texts: list[str] = await page.locator(".msg .body").all_text_contents()
            return [t[:12] for t in texts]

        shown = await order()
        assert shown[0] == "tell me a lo"
        assert shown[1].startswith("word0")  # where it was written, before the /stop
        assert shown[2:] == ["/stop", "Stopped. Not"]
        await page.screenshot(path=shot("chat-stopped-390-light"))
        await gateway.wait_idle()
        await page.reload()
        await expect(page.locator(".msg.assistant.stopped")).to_contain_text("word3")
        assert await order() == shown  # a reload shows the same, in the same order
        fake_llm.queue(text("Going on."))
        await send(page, "go on")
        await expect(page.locator(".msg").last).to_contain_text("Going on.")
        await context.close()
    # the model reads what it had written and where it was stopped, not the notice (which
    # a small model took for an answer to give again)
    [cut] = [
        m["content"] for m in fake_llm.requests[-1].body["messages"] if m["role"] == "assistant"
    ]
    assert cut.startswith("word0 word1 word2 word3")
    assert cut.endswith("[the person stopped this answer here]") and "Stopped." not in cut
