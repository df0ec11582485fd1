"""Benchmark: how fast ``/stop`` is confirmed, and how fast the model stops writing, in a
burst.

Run from the repository root: ``python -m bench.stop [--rounds 5] [--chats 50]``.

One gateway in this process with a chat channel that streams (as the web chat and the
terminal do), the fake LLM writing every answer as 100 pieces over 20 s. ``--chats`` people
write at once; once every turn is in its model call, one of them sends ``/stop``. Measured
from that moment:

* confirmation: until the chat receives ``Stopped. ...``;
* last model byte: until the fake model server wrote its last piece of that chat's answer
  (the request was cut: the client went away).

Targets (issue 31): both under 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import quiet_proxies, settings_for
from channels.memory import MemoryChannel
from gateway.core.messages import ChatRef
from gateway.runtime.app import Gateway
from tests.fakes.llm import FakeLLM, Recorded, Step, streamed

ANSWER = " ".join(f"token{i}" for i in range(400))


class StreamingChannel(MemoryChannel):
    """The in-memory channel, shown the answer as it is written (so the model streams)."""

    async def stream(self, chat: ChatRef, turn_id: str, delta: str) -> None:
        return None


async def one_round(chats: int) -> tuple[float, float]:
    llm = await FakeLLM().start()

    def respond(request: Recorded) -> Step:
        return streamed(ANSWER, chunks=100, over=20.0)

    llm.responder = respond
    try:
        with tempfile.TemporaryDirectory(prefix="switchboard-bench-") as tmp:
            settings = settings_for(Path(tmp) / "home", llm.openai_url)
            channel = StreamingChannel()
            async with Gateway(settings, channels=[channel]) as gateway:
                for i in range(chats):
                    await channel.push(f"write story {i}", chat_id=f"c{i}", sender_id=f"u{i}")
                await llm.wait_for_requests(chats, timeout=60)
                target = next(r for r in llm.requests if r.last_user_text == "write story 0")
                started = time.monotonic()
                await channel.push("/stop", chat_id="c0", sender_id="u0")
                await channel.wait_for(1, chat_id="c0", max_wait=30)
                confirmed = time.monotonic() - started
                await asyncio.sleep(0.5)  # a cut stream writes nothing more (measured below)
                last = target.last_chunk_at or started
                await gateway.stop(drain_timeout=0)
    finally:
        await llm.stop()
    return confirmed, max(0.0, last - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chats", type=int, default=50)
    args = parser.parse_args()
    quiet_proxies()
    results = [asyncio.run(one_round(args.chats)) for _ in range(args.rounds)]
    confirm = [c for c, _ in results]
    byte = [b for _, b in results]
    print(f"/stop in a {args.chats}-chat burst, {args.rounds} rounds (median, max):")
    print(f"  confirmation     {statistics.median(confirm):.3f} s  {max(confirm):.3f} s")
    print(f"  last model byte  {statistics.median(byte):.3f} s  {max(byte):.3f} s")


if __name__ == "__main__":
    main()
