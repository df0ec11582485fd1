"""The floor: a bare python-telegram-bot + openai echo bot on the same harness.

Run from the repository root: ``python -m bench.floor``. No journal, no tools, no context:
each update's text goes to the model and the answer straight back. It shows what this
machine costs before Switchboard does anything, so the other benchmarks can be read
against it.
"""

from __future__ import annotations

import asyncio
import statistics

import openai
from telegram import Update
from telegram.ext import Application, MessageHandler, filters

from bench.common import LLM_LATENCY, llm_process, percentile, quiet_proxies
from bench.telegram import burst, sequential
from tests.fakes.telegram import FakeTelegram, random_token


async def run(turns: int, chats: int) -> None:
    async with llm_process(LLM_LATENCY) as llm_url:
        tg = await FakeTelegram(random_token()).start()
        client = openai.AsyncOpenAI(base_url=llm_url, api_key="sk-floor", max_retries=0)

        async def answer(update: Update, _: object) -> None:
            assert update.message is not None and update.message.text is not None
            reply = await client.chat.completions.create(
                model="fake", messages=[{"role": "user", "content": update.message.text}]
            )
            await update.message.reply_text(reply.choices[0].message.content or "")

        app = (
            Application.builder()
            .token(tg.token)
            .base_url(f"{tg.base_url}/bot")
            .concurrent_updates(True)
            .build()
        )
        app.add_handler(MessageHandler(filters.TEXT, answer))
        await app.initialize()
        await app.updater.start_polling(poll_interval=0, timeout=30)  # type: ignore[union-attr]
        await app.start()
        try:
            await sequential(tg, 3)
            overheads, cpu_ms = await sequential(tg, turns)
            seconds = await burst(tg, chats, first_chat=50_000)
        finally:
            await app.updater.stop()  # type: ignore[union-attr]
            await app.stop()
            await app.shutdown()
            await client.close()
            await tg.stop()
    ms = [o * 1000 for o in overheads]
    print("Floor: bare python-telegram-bot + openai echo bot (same fakes, same machine)")
    print(
        f"  overhead per turn: p50 {statistics.median(ms):.1f} ms, p99 {percentile(ms, 0.99):.1f} ms"
    )
    print(f"  CPU per turn (bot + fake Bot API): {cpu_ms:.1f} ms")
    print(f"  {chats} chats at once: {seconds:.2f} s")


def main() -> None:
    quiet_proxies()
    asyncio.run(run(40, 50))


if __name__ == "__main__":
    main()
