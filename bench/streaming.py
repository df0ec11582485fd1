"""Benchmark: time to first visible text on Telegram, answers streamed by editing vs. not.

Run from the repository root: ``python -m bench.streaming [--rounds 5]``.

The fake LLM streams each answer as 50 pieces spread over 2 s (what a model writing ~25
tokens a second looks like); the real python-telegram-bot talks to the fake Bot API. For each
round a user writes in a fresh direct chat, and we record, from the moment the update is
available to ``getUpdates``:

* first visible text: the first ``sendMessage`` that reaches the fake (the draft when
  streaming, the whole answer when not);
* complete answer: the call that leaves the full formatted answer on screen (the final
  ``editMessageText`` when streaming, the only ``sendMessage`` when not);
* Bot API calls per answer (messages sent plus edits).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from bench.common import quiet_proxies, settings_for
from channels.telegram import TelegramChannel
from gateway.runtime.app import Gateway
from tests.fakes.llm import FakeLLM, streamed
from tests.fakes.telegram import FakeTelegram, random_token

WORDS = " ".join(f"token{i}" for i in range(48))
ANSWER = f"**Streaming** {WORDS}."  # 50 pieces over 2 s
PIECES, OVER = 50, 2.0


async def rounds(streaming: bool, count: int) -> tuple[list[float], list[float], list[int]]:
    first, complete, calls = [], [], []
    with tempfile.TemporaryDirectory(prefix="switchboard-bench-") as tmp:
        llm = await FakeLLM().start()
        tg = await FakeTelegram(random_token()).start()
        try:
            settings = settings_for(
                Path(tmp) / "home",
                llm.openai_url,
                telegram={
                    "token": tg.token,
                    "base_url": tg.base_url,
                    "allow_from": ["*"],
                    "streaming": streaming,
                },
            )
            async with Gateway(settings, channels=[TelegramChannel(settings)]) as gateway:
                for i in range(count):
                    chat = 20_000 + i
                    llm.queue(streamed(ANSWER, chunks=PIECES, over=OVER))
                    update = await tg.say("write it out", chat_id=chat, user_id=chat)
                    await tg.wait_sent(1, chat_id=chat, timeout=30)
                    await gateway.wait_idle()
                    start = tg.pushed_at[update["update_id"]]
                    sent = tg.sent(chat)
                    edits = [
                        c
                        for c in tg.called("editMessageText")
                        if int(c.params["chat_id"]) == chat and c.params.get("_ok")
                    ]
                    first.append(sent[0].at - start)
                    complete.append((edits[-1] if edits else sent[-1]).at - start)
                    calls.append(len(sent) + len(edits))
        finally:
            await tg.stop()
            await llm.stop()
    return first, complete, calls


async def run(count: int) -> None:
    results = {label: await rounds(label == "on", count) for label in ("on", "off")}
    print(
        f"Time to first visible text on Telegram (fake LLM: {PIECES} pieces over {OVER:.0f} s; "
        f"{count} answers each, medians)"
    )
    for label, (first, complete, calls) in results.items():
        print(
            f"  streaming {label:<3}  first text {statistics.median(first):.2f} s,"
            f"  complete answer {statistics.median(complete):.2f} s,"
            f"  Bot API calls per answer {statistics.median(calls):.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    quiet_proxies()
    asyncio.run(run(args.rounds))


if __name__ == "__main__":
    main()
