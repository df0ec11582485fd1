"""The ``browser`` tool through a whole gateway: the model (a scripted fake that reads each
snapshot for its refs) signs in to a local shop, fills a two-step form, and the submit waits
for the owner's ``/approve``; the shop then has exactly one submission. The shop is on
127.0.0.1, reachable only because this test sets ``tools.web.allow_private_hosts`` (a
gateway never has that by default); an internal service on ::1 is never reached, by an
image or a redirect. The owner's profile (``switchboard browser create``) keeps the sign-in
across a restart of the gateway.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from channels.memory import MemoryChannel
from gateway.cli.main import main
from gateway.config.settings import Settings
from gateway.core.messages import OutboundMessage
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, Recorded, Step, calls, text
from tests.fakes.shop import TOKEN, Shop, open_shop
from tests.fakes.web import FakeSite

pytestmark = pytest.mark.skipif(not shutil.which("chromium"), reason="Chromium is not installed")

OWNER = "1"
SECRET = "SECRET-91d2"
Move = Callable[[list[str]], Step]


class ScriptedModel:
    """Plays the model: each move sees the tool results so far (the newest last) and answers,
    so refs are read from the snapshots the tool returned, as a model would."""

    def __init__(self, *moves: Move) -> None:
        self.moves = list(moves)

    def __call__(self, request: Recorded) -> Step:
        assert self.moves, f"the model was asked once more than scripted: {request.user_texts}"
        return self.moves.pop(0)(request.tool_results)


def browse(**args: Any) -> Move:
    return lambda results: calls(("browser", args))


def on(element: str, **args: Any) -> Move:
    """A browser call on ``element`` (``button "Next"``), by its ref in the latest snapshot
    that shows it."""

    def move(results: list[str]) -> Step:
        for result in reversed(results):
            found = re.search(re.escape(element) + r"[^\n]*\[ref=(\w+)\]", result)
            if found is not None:
                return calls(("browser", {**args, "ref": found.group(1)}))
        raise AssertionError(f"no snapshot shows {element}: {results}")

    return move


def answer(words: str) -> Move:
    return lambda results: text(words)


@pytest.fixture
async def secret() -> AsyncIterator[FakeSite]:
    """An internal service on the IPv6 loopback, answering everything with the secret."""
    site = await FakeSite("::1").start()

    async def leak(request: web.Request) -> web.StreamResponse:
        return web.Response(text=SECRET)

    for path in ("/", "/pixel"):
        site.handle(path, leak)
    yield site
    await site.stop()


@pytest.fixture
async def shop(secret: FakeSite) -> AsyncIterator[Shop]:
    """The shop; its form page also shows an image from the internal service."""
    site = await FakeSite().start()
    yield open_shop(site, extra=f'<img src="http://[::1]:{secret.port}/pixel" alt="">')
    await site.stop()


def browser_settings(make_settings: SettingsFactory) -> Settings:
    return make_settings(
        telegram={"owners": [OWNER], "allow_from": [OWNER]},
        # the test's shop is on loopback: allowed here, and only here
        tools={"approvals": "ask", "web": {"allow_private_hosts": ["127.0.0.1"]}},
    )


def is_png(path: str | None) -> bool:
    return Path(path or "").read_bytes()[:4] == b"\x89PNG"


def request_id(message: OutboundMessage) -> str:
    found = re.search(r"/approve ([A-Z0-9]{8})", message.text)
    assert found is not None, message.text
    return found.group(1)


async def test_the_model_signs_in_fills_the_form_and_the_submit_waits_for_approve(
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    shop: Shop,
    secret: FakeSite,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = browser_settings(make_settings)
    assert main(["browser", "create"]) == 0  # the owner keeps the sign-ins in a profile
    assert "created agent main's browser profile" in capsys.readouterr().out
    shop.site.redirect("/jump", f"http://[::1]:{secret.port}/")
    fake_llm.responder = ScriptedModel(
        browse(action="open", url=shop.url("/")),
        on('textbox "User"', action="type", text="alice"),
        on('textbox "Password"', action="type", text="hunter2"),
        on('button "Sign in"', action="click"),
        on('textbox "Name"', action="type", text="Alice Smith"),
        on('button "Next"', action="click"),
        on('textbox "City"', action="type", text="Lyon"),
        on('button "Submit"', action="click"),
        answer("Done: the shop thanked Alice Smith from Lyon."),
    )
    channel = MemoryChannel("telegram")
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push(
            f"Sign in to {shop.url('/')} as alice with password hunter2, then fill in the "
            "delivery form with name Alice Smith and city Lyon, and submit it.",
            sender_id=OWNER,
            chat_id=OWNER,
        )
        picture, prompt = await channel.wait_for(2, chat_id=OWNER, max_wait=30)
        submitted_before = list(shop.submissions)
        code = request_id(prompt)
        await channel.push(f"/approve {code}", sender_id=OWNER, chat_id=OWNER)
        sent = await channel.wait_for(4, chat_id=OWNER, max_wait=30)
        await gateway.wait_idle()

    # the owner saw what the click would send, and where, with a picture of it
    assert "Why it needs approval: browser click: it sends a form to the site" in prompt.text
    block = prompt.verbatim
    assert f"sends: POST {shop.url('/submit')}" in block
    assert "  name: Alice Smith\n  city: Lyon" in block
    assert 'element: button "Submit"' in block
    [shot] = picture.attachments
    assert shot.kind == "image" and is_png(shot.path)
    assert code in picture.text
    # nothing was sent before the yes, then exactly once
    assert submitted_before == []
    assert shop.submissions == [{"name": "Alice Smith", "city": "Lyon"}]
    assert sent[2].text.startswith(f"Approved {code}")
    assert sent[3].text == "Done: the shop thanked Alice Smith from Lyon."
    assert "Thank you, Alice Smith from Lyon" in fake_llm.requests[-1].tool_results[-1]
    # page content is outside content; the image to ::1 on the form was refused
    assert all(r.startswith("[untrusted page") for r in fake_llm.requests[-1].tool_results)
    assert secret.requests == []

    # a restart: the same session's cookie is still there; a redirect inward is refused
    fake_llm.responder = ScriptedModel(
        browse(action="open", url=shop.url("/account")),
        browse(action="open", url=shop.url("/jump")),
        answer("You are still signed in. The jump link was refused: it leads inside."),
    )
    channel = MemoryChannel("telegram")
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push(  # a new channel object counts its message ids afresh
            # (the jump link named here: after a page, the browser opens only addresses the
            # turn has seen)
            f"Am I still signed in at the shop? And where does {shop.url('/jump')} lead?",
            sender_id=OWNER,
            chat_id=OWNER,
            message_id="after-restart",
        )
        [reply] = await channel.wait_for(1, chat_id=OWNER, max_wait=30)
        await gateway.wait_idle()
    account, jump = fake_llm.requests[-1].tool_results[-2:]
    assert "Signed in as alice" in account and shop.account_cookies == [TOKEN]
    assert "::1 is a loopback address" in jump and "Only public web addresses" in jump
    assert secret.requests == []
    assert reply.text == "You are still signed in. The jump link was refused: it leads inside."


async def test_after_a_page_the_browser_opens_no_address_the_model_built_without_the_owner(
    make_settings: SettingsFactory, fake_llm: FakeLLM, shop: Shop
) -> None:
    """A page can ask the model to open an address that carries what the turn read
    (``?d=...``): it waits for the owner's yes, and the shop never sees it before."""
    built = shop.url(f"/account?d={SECRET}")
    fake_llm.responder = ScriptedModel(
        browse(action="open", url=shop.url("/")),  # the person named it: opens at once
        browse(action="open", url=built),
    )
    channel = MemoryChannel("telegram")
    async with Gateway(browser_settings(make_settings), channels=[channel]) as gateway:
        await channel.push(f"what is on {shop.url('/')}?", sender_id=OWNER, chat_id=OWNER)
        _picture, prompt = await channel.wait_for(2, chat_id=OWNER, max_wait=30)
        await gateway.wait_idle()
    assert "Approval needed" in prompt.text and "a web page in the browser" in prompt.text
    assert built in (prompt.verbatim or "") and f"d={SECRET}" not in " ".join(shop.site.requests)
