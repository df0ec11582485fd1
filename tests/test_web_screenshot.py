"""A rendered page's screenshot through the whole gateway, and the browser's configuration.

The screenshot is shown to a vision model with the tool result (OpenAI: a user message
after the step's results; Anthropic: inside the tool_result) and reaches the user as an
attachment of the answer, also when the turn is resumed after a crash.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from agent.llm.types import ChatMessage, ImagePart, ToolCall
from agent.turn.scope import resumed_state
from gateway.cli.doctor.tools import browser_check
from gateway.core.errors import ConfigError
from gateway.core.messages import ChatRef
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, calls, text
from tests.fakes.web import FakeSite
from tests.test_web_render import JS_PAGE, png_header

needs_chromium = pytest.mark.skipif(not shutil.which("chromium"), reason="no Chromium")
PNG = b"\x89PNG\r\n\x1a\n"


@needs_chromium
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_screenshot_reaches_the_model_and_the_user(
    provider: str,
    run_gateway: Any,
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    site: FakeSite,
) -> None:
    site.page("/harvest", JS_PAGE)
    url = site.url("/harvest")
    fake_llm.queue(
        calls(("web_fetch", {"url": url, "screenshot": True})), text("The harvest starts in July.")
    )
    settings = make_settings(
        llm={"provider": provider}, tools={"web": {"allow_private_hosts": ["127.0.0.1"]}}
    )
    async with run_gateway(settings) as (gateway, channel):
        await channel.push("when does the harvest start? " + url)
        [reply] = await channel.wait_for(1, max_wait=30)
        await gateway.wait_idle()
    assert reply.text == "The harvest starts in July."
    [shot] = reply.attachments
    assert shot.kind == "image" and shot.mime_type == "image/png"
    assert png_header(Path(shot.path or "")) == PNG
    assert Path(shot.path or "").is_relative_to(settings.workspace_dir / "attachments" / "web")

    request = fake_llm.requests[1]
    [tool_result] = request.tool_results
    assert "The tomato harvest starts in July" in tool_result
    assert "a screenshot of the page is attached" in tool_result
    messages = request.body["messages"]
    if provider == "openai":  # tool messages carry text only: the image follows them
        [(index, _)] = request.images
        assert messages[index - 1]["role"] == "tool" and messages[index]["role"] == "user"
        assert "untrusted page content" in messages[index]["content"][0]["text"]
    else:
        [(_, where)] = request.images
        assert where == "tool_result"
    assert fake_llm.requests[0].images == []


@needs_chromium
async def test_without_vision_the_model_gets_text_and_the_user_still_gets_the_picture(
    run_gateway: Any, make_settings: SettingsFactory, fake_llm: FakeLLM, site: FakeSite
) -> None:
    site.page("/harvest", JS_PAGE)
    fake_llm.queue(
        calls(("web_fetch", {"url": site.url("/harvest"), "screenshot": True})),
        calls(("message", {"content": "Here it is."})),
        text(""),
    )
    settings = make_settings(
        llm={"vision": False}, tools={"web": {"allow_private_hosts": ["127.0.0.1"]}}
    )
    async with run_gateway(settings) as (gateway, channel):
        await channel.push("screenshot please")
        sent = await channel.wait_for(2, max_wait=30)
        await gateway.wait_idle()
    assert [m.text for m in sent] == ["Here it is.", f"Screenshot of {site.url('/harvest')}"]
    assert len(sent[1].attachments) == 1
    assert all(r.images == [] for r in fake_llm.requests)


def test_a_resumed_turn_still_sends_the_screenshots_it_took(tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    drafts = [
        ChatMessage("user", "show me"),
        ChatMessage("assistant", tool_calls=(ToolCall("c1", "web_fetch", "{}"),)),
        ChatMessage(
            "tool",
            "[untrusted content ...]",
            tool_call_id="c1",
            name="web_fetch",
            images=(ImagePart(str(shot), "image/png"),),
            untrusted=True,
        ),
    ]
    state = resumed_state(drafts, chat=ChatRef("test", "1"))
    [file] = state.files
    assert (file.kind, file.path, file.mime_type) == ("image", str(shot), "image/png")
    assert state.read_untrusted


def test_always_without_a_browser_refuses_to_start(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    settings = make_settings(
        tools={"web": {"browser": "always", "browser_path": str(tmp_path / "none")}}
    )
    with pytest.raises(ConfigError, match=r"tools\.web\.browser is 'always' but no browser"):
        Gateway(settings)


@pytest.mark.parametrize(
    ("web", "status", "words"),
    [
        ({}, "ok", "chromium"),
        ({"browser": "off"}, "ok", "'off': pages are read as served"),
        ({"browser_path": "/nonexistent/chromium"}, "warn", "without running their scripts"),
        (
            {"browser": "always", "browser_path": "/nonexistent/chromium"},
            "fail",
            "refuses to start",
        ),
    ],
)
async def test_doctor_says_whether_pages_can_be_rendered(
    make_settings: SettingsFactory, web: dict[str, str], status: str, words: str
) -> None:
    if status == "ok" and not web and not shutil.which("chromium"):
        pytest.skip("no Chromium")
    [check] = await browser_check(make_settings(tools={"web": web}))
    assert (check.name, check.status) == ("browser", status)
    assert words in check.message
