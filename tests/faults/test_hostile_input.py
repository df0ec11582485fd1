"""Hostile input through the real Telegram path (threat model rows 19 and 20): a 1 GB file
announced is never fetched, a zip bomb is kept as sent (compressed, within the attachment size
cap) and never unpacked, and an answer full of broken markup, RTL overrides, zero-width
characters and a 4-byte emoji at the 4096 edge arrives whole, in parts within the limit."""

from __future__ import annotations

import io
import zipfile

import pytest

from channels._text import utf16_length
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, text
from tests.fakes.telegram import FakeTelegram, fast_channel, section

channel = fast_channel


async def test_a_one_gigabyte_file_announced_is_not_fetched_and_the_model_is_told(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    settings = make_settings(telegram=section(tg))
    document = {
        "file_id": "huge",
        "file_unique_id": "huge1",
        "file_name": "backup.zip",
        "mime_type": "application/zip",
        "file_size": 1_000_000_000,
    }
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        update = await tg.say(caption="unzip this", document=document)
        await tg.wait_sent(1)
        await tg.wait_confirmed(update["update_id"] + 1)  # acknowledged: no redelivery loop
        await tg.say("still there?")
        await tg.wait_sent(2)
        await gateway.wait_idle()
    assert tg.called("getFile") == []  # never downloaded, so never unpacked either
    assert not list((settings.workspace_dir / "attachments").rglob("*.zip"))
    told = fake_llm.requests[0].last_user_text
    assert "unzip this" in told and "over the 20000000-byte limit" in told
    assert tg.texts(42)[1] == "echo: still there?"


HOSTILE_ANSWER = (
    "x" * 4093
    + "😀"  # a surrogate pair across the 4096 edge
    + " **bold never closed _italic [link( \u202eevil.exe\u202c zero\u200bwidth\u200d "
    + "```python\nprint('fence opened at the edge')\n"  # never closed
    + "tail " * 900
)


async def test_broken_markup_at_the_edge_arrives_whole_in_parts_within_the_limit(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    fake_llm.queue(text(HOSTILE_ANSWER))
    tg.reject_entities = 1  # Telegram refuses the first formatted part: plain text fallback
    settings = make_settings(telegram=section(tg))
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("go")
        await tg.wait_for(lambda: "tail" in "".join(tg.texts(42)))
        await gateway.wait_idle()
    parts = tg.texts(42)
    assert len(parts) >= 2
    assert all(utf16_length(part) <= 4096 for part in parts)
    joined = "".join(parts)
    assert joined.count("x") >= 4093 and "😀" in joined
    assert "\u202eevil.exe" in joined and "zero\u200bwidth" in joined
    assert "print('fence opened at the edge')" in joined
    assert joined.count("tail") == 900


def zip_bomb(unpacked: int = 64 * 1024 * 1024) -> bytes:
    """A real zip bomb: 64 MiB of zeros that deflate to a few tens of kilobytes."""
    buffer = io.BytesIO()
    archive = zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9)
    with archive, archive.open("zeros.bin", "w", force_zip64=True) as member:
        chunk = bytes(1024 * 1024)
        for _ in range(unpacked // len(chunk)):
            member.write(chunk)
    return buffer.getvalue()


@pytest.mark.parametrize("limit", [20_000_000, 10_000])
async def test_a_zip_bomb_is_stored_as_sent_never_unpacked_and_within_the_size_cap(
    limit: int, make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    bomb = zip_bomb()
    assert len(bomb) < 200_000 < 64 * 1024 * 1024  # small on the wire, huge unpacked
    file_id = tg.add_file(bomb, "documents/file_9.zip")
    document = {  # no file_size announced: only the download shows the size
        "file_id": file_id,
        "file_unique_id": "bomb1",
        "file_name": "photos.zip",
        "mime_type": "application/zip",
    }
    settings = make_settings(telegram=section(tg, max_attachment_bytes=limit))
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say(caption="what is in here?", document=document)
        await tg.wait_sent(1)
        await gateway.wait_idle()
    stored = [p for p in (settings.workspace_dir / "attachments").rglob("*") if p.is_file()]
    told = fake_llm.requests[0].last_user_text
    if len(bomb) <= limit:  # stored byte for byte, still compressed; nothing beside it
        [kept] = stored
        assert kept.read_bytes() == bomb
    else:  # over the cap: not kept at all, and the model is told why
        assert stored == []
        assert f"over the {limit}-byte limit" in told
    assert sum(p.stat().st_size for p in stored) <= limit
    assert "what is in here?" in told
