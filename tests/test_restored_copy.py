"""A copy taken while an answer streamed, restored after the original finished that answer:
the answer the person read stays as it is, the model is not asked again, and the chat is
told once that the copy was restored and which message was open in it (the original may
have died before answering). The real Telegram channel against the fake Bot API."""

from __future__ import annotations

from pathlib import Path

from gateway.runtime.app import Gateway
from gateway.store.engine.integrity import backup
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, streamed
from tests.fakes.telegram import FakeTelegram, fast_channel
from tests.test_streaming import FORMATTED, streaming_on

ANSWER = FORMATTED.replace("the answer", "**the answer**", 1)


def restore(copy: Path, path: Path) -> None:
    """As docs/reliability.md says: the gateway stopped, the copy over the store, its
    -wal and -shm removed."""
    path.write_bytes(copy.read_bytes())
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


async def test_a_restored_copy_tells_of_the_answer_it_was_streaming_and_never_streams_it_again(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram, tmp_path: Path
) -> None:
    fake_llm.queue(streamed(ANSWER, chunks=30, over=2.0))
    settings = make_settings(telegram=streaming_on(tg))
    store = settings.data_dir / "switchboard.db"
    copy = tmp_path / "copy.db"
    async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
        await tg.say("tell me everything about the heron")
        await tg.wait_called("editMessageText")  # the draft is up and growing
        backup(store, copy)  # taken mid-answer, as `switchboard backup` takes it
        await gateway.wait_idle()  # the original finishes its answer
    assert tg.visible(42) == [FORMATTED]
    edits = len(tg.called("editMessageText"))

    restore(copy, store)
    for _ in range(2):  # told once: the second start finds nothing open
        async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
            await gateway.wait_idle()
    answer, told = tg.visible(42)
    assert answer == FORMATTED  # never edited back into a draft
    assert len(tg.called("editMessageText")) == edits
    assert len(fake_llm.requests) == 1  # nothing answered a second time
    assert told.startswith("I was restored from a copy taken ")
    assert "“tell me everything about the heron”" in told and "send it again" in told
