"""``generate_image`` against a fake OpenAI-compatible images endpoint (tests/fakes/llm.py):
the picture reaches the Telegram chat as a photo, is counted in usage and priced; an address
instead of base64 is fetched; a refusal reaches the model, not the chat; the tool is off
until ``[images]`` is configured, and members may not use it by default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.config.settings import Settings
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import PICTURE, FakeLLM, calls, text
from tests.fakes.telegram import FakeTelegram, fast_channel, section


def images(fake: FakeLLM, **overrides: Any) -> dict[str, Any]:
    return {"base_url": fake.openai_url, "api_key": "sk-images-123456", **overrides}


def picture_settings(
    make_settings: SettingsFactory, tg: FakeTelegram, fake: FakeLLM, **more: Any
) -> Settings:
    return make_settings(telegram=section(tg, owners=["42"]), images=images(fake, **more))


async def test_a_picture_reaches_the_telegram_chat_as_a_photo_and_is_counted(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    settings = picture_settings(
        make_settings, tg, fake_llm, model="gpt-image-1", price_per_image=0.04
    )
    fake_llm.queue(
        calls(("generate_image", {"prompt": "a red fox in fresh snow", "size": "1024x1536"})),
        text("Here is your fox."),
    )
    async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
        await tg.say("draw me a red fox in the snow")
        await tg.wait_sent(2)
        await gateway.wait_idle()
        spent = await gateway.store.usage.spent(0)
        await tg.say("/usage")
        await tg.wait_sent(3)
    [asked] = fake_llm.pictures
    assert asked.body == {
        "model": "gpt-image-1",
        "prompt": "a red fox in fresh snow",
        "n": 1,
        "size": "1024x1536",
    }
    assert asked.headers["Authorization"] == "Bearer sk-images-123456"
    answer, photo, usage = tg.sent()
    assert answer.method == "sendMessage" and answer.params["text"] == "Here is your fox."
    assert photo.method == "sendPhoto" and photo.files["photo"] == PICTURE
    stored = list((settings.workspace_dir / "attachments" / "images").rglob("*.png"))
    assert [p.read_bytes() for p in stored] == [PICTURE]
    assert stored[0].name.startswith("a-red-fox-in-fresh-snow-")
    assert spent.cost_usd == pytest.approx(0.04)  # the picture, at images.price_per_image
    assert "$0.04" in usage.params["text"]
    assert "The picture is made" in fake_llm.requests[-1].tool_results[-1]


async def test_a_picture_given_as_an_address_is_fetched(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    fake_llm.image_answer = "url"  # dall-e-3 answers with an address by default
    settings = picture_settings(make_settings, tg, fake_llm, model="dall-e-3")
    fake_llm.queue(calls(("generate_image", {"prompt": "a lighthouse"})), text("Done."))
    async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
        await tg.say("make a picture of a lighthouse")
        await tg.wait_sent(2)
        await gateway.wait_idle()
    assert fake_llm.pictures[0].body["size"] == "1024x1024"  # images.size
    assert tg.sent()[1].files["photo"] == PICTURE


async def test_a_refusal_reaches_the_model_and_no_photo_is_sent(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    fake_llm.image_answer = "refuse"
    settings = picture_settings(make_settings, tg, fake_llm)
    fake_llm.queue(
        calls(("generate_image", {"prompt": "something"})),
        text("The image service refused that one."),
    )
    async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
        await tg.say("draw something")
        await tg.wait_sent(1)
        await gateway.wait_idle()
        spent = await gateway.store.usage.spent(0)
    result = fake_llm.requests[-1].tool_results[-1]
    assert (
        "no picture was made: HTTP 400: Your request was rejected by the safety system." in result
    )
    assert [c.method for c in tg.sent()] == ["sendMessage"]
    assert not spent.cost_usd  # no picture, nothing spent


async def test_the_tool_is_offered_only_when_configured_and_not_to_members(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram, tmp_path: Path
) -> None:
    off = make_settings(telegram=section(tg))
    async with Gateway(off, channels=[fast_channel(off)]) as gateway:
        await tg.say("hi")
        await tg.wait_sent(1)
        await gateway.wait_idle()
    on = make_settings(
        home=tmp_path / "other",
        telegram=section(tg, allow_from=["42", "77"], owners=["42"]),
        images=images(fake_llm),
    )
    async with Gateway(on, channels=[fast_channel(on)]) as gateway:
        await tg.say("hi")
        await tg.wait_sent(2)
        await tg.say("hi", user_id=77, chat_id=77)
        await tg.wait_sent(1, chat_id=77)
        await gateway.wait_idle()
    assert "generate_image" not in fake_llm.requests[0].tool_names
    assert "generate_image" in fake_llm.requests[1].tool_names  # the owner
    assert "generate_image" not in fake_llm.requests[2].tool_names  # a member
