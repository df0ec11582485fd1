"""Benchmark: time to first visible text on Telegram, with the shipped streaming and without.

Run from the repository root: ``python -m bench.streaming [--rounds 5]``.

The fake LLM streams each long answer as 50 pieces spread over 2 s (what a model writing ~25
tokens a second looks like) and a quick one whole after 0.2 s; the real python-telegram-bot
talks to the fake Bot API. For each round a user writes in a fresh direct chat, and we record:

* first words after the model's: from the model writing its first piece to the first text the
  person can see (a preview, a draft message, or the whole answer);
* first visible text and complete answer: from the moment the update is available to
  ``getUpdates`` to the first text on screen and to the call that leaves the full formatted
  answer there;
* Bot API calls per answer (messages, edits and previews).

Modes: ``previews`` is the default where the Bot API offers ``sendMessageDraft`` (private
chats); ``edits`` is the default where it refuses it (a draft message edited as the words come);
``off`` is ``telegram.streaming = false``. Streaming starts after ``stream_after_seconds``
(0.7 s, shipped), so the quick answer is one ``sendMessage`` in every mode.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bench.common import quiet_proxies, settings_for
from channels.telegram.adapter import TelegramChannel
from gateway.runtime.app import Gateway
from tests.fakes.llm import FakeLLM, Step, streamed, text
from tests.fakes.telegram import FakeTelegram, random_token

WORDS = " ".join(f"token{i}" for i in range(48))
ANSWER = f"**Streaming** {WORDS}."  # 50 pieces over 2 s
PIECES, OVER = 50, 2.0
QUICK = 0.2  # seconds: the quick answer arrives whole

Mode = Literal["previews", "edits", "off"]
SHOWN = ("sendMessage", "editMessageText", "sendMessageDraft")


@dataclass
class Rounds:
    after_model: list[float] = field(default_factory=list)
    first: list[float] = field(default_factory=list)
    complete: list[float] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)


async def rounds(mode: Mode, count: int, *, quick: bool) -> Rounds:
    out = Rounds()
    # The fake model's clock (time.monotonic) against the fake Bot API's (time.perf_counter).
    offset = time.perf_counter() - time.monotonic()
    with tempfile.TemporaryDirectory(prefix="switchboard-bench-") as tmp:
        llm = await FakeLLM().start()
        tg = await FakeTelegram(random_token()).start()
        tg.draft_previews = mode == "previews"
        try:
            settings = settings_for(
                Path(tmp) / "home",
                llm.openai_url,
                telegram={
                    "token": tg.token,
                    "base_url": tg.base_url,
                    "allow_from": ["*"],
                    "streaming": mode != "off",
                },
            )
            async with Gateway(
                settings, channels=[TelegramChannel(settings.telegram, settings.channel_context())]
            ) as gateway:
                for i in range(count):
                    chat = 20_000 + i
                    step: Step = (
                        text("A quick answer.", delay=QUICK)
                        if quick
                        else streamed(ANSWER, chunks=PIECES, over=OVER)
                    )
                    llm.queue(step)
                    asked = len(llm.requests)
                    update = await tg.say("write it out", chat_id=chat, user_id=chat)
                    await tg.wait_sent(1, chat_id=chat, timeout=30)
                    await gateway.wait_idle()
                    start = tg.pushed_at[update["update_id"]]
                    shown = [
                        c
                        for c in tg.calls
                        if c.method in SHOWN
                        and int(c.params["chat_id"]) == chat
                        and c.result is not None
                    ]
                    sent = tg.sent(chat)
                    edits = [c for c in shown if c.method == "editMessageText"]
                    out.first.append(shown[0].at - start)
                    out.complete.append((edits[-1] if edits else sent[-1]).at - start)
                    out.calls.append(len(shown))
                    model = llm.requests[asked]
                    if model.first_text_at is not None:
                        out.after_model.append(shown[0].at - (model.first_text_at + offset))
        finally:
            await tg.stop()
            await llm.stop()
    return out


def _line(label: str, result: Rounds) -> str:
    after = (
        f"{statistics.median(result.after_model):.2f} s" if result.after_model else "(not streamed)"
    )
    return (
        f"  {label:<18} first words after the model's {after:>14},"
        f"  first text {statistics.median(result.first):.2f} s,"
        f"  complete {statistics.median(result.complete):.2f} s,"
        f"  Bot API calls {statistics.median(result.calls):.0f}"
    )


async def run(count: int) -> None:
    print(
        f"Telegram, direct chats (long answer: {PIECES} pieces over {OVER:.0f} s; quick answer: "
        f"whole after {QUICK} s; {count} answers each, medians)"
    )
    await rounds("off", 1, quick=True)  # the first turn of a process imports the LLM SDK
    modes: tuple[Mode, ...] = ("previews", "edits", "off")
    for mode in modes:
        print(_line(f"{mode}, long", await rounds(mode, count, quick=False)))
    for mode in modes:
        print(_line(f"{mode}, quick", await rounds(mode, count, quick=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    quiet_proxies()
    asyncio.run(run(args.rounds))


if __name__ == "__main__":
    main()
