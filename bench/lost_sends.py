"""Benchmark: answers lost in a crash, settled after the restart (issue 52).

Run from the repository root: ``python -m bench.lost_sends [--chats 40 200] [--built 500]
[--runs 1]``.

* ``--chats N``: ``switchboard run`` is SIGKILLed while the answers of N private chats are
  all recorded as being sent: the first 16 reached the fake Bot API and were made, their
  answer never heard (as many as the channel has connections); the others waited for a
  connection and were never made. Streaming off, then on (a draft's first post lost).
  At most 200: a gateway sends to that many chats at once.
* ``--built N``: what a process that died with N answers under way leaves, built through
  the store and the fake (16 made, or ``--made``), for N past 200.

Each row: seconds from the restart's spawn (and from its "ready") until every chat showed
its answer exactly once and nothing was left to send; the ``editMessageReplyMarkup`` probes
made; the messages sent again (those never made). Targets: 40 lost in <= 5 s with <= 2
probes each, 500 in <= 30 s, none doubled (tests/faults/test_lost_sends.py checks 40).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from bench.common import quiet_proxies
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram, random_token
from tests.lost_sends import Settled, kill_while_sending, left_by_a_dead_process


def row(label: str, settled: Settled) -> str:
    per = settled.probes / settled.chats
    return (
        f"{label:<34} {settled.seconds:6.1f} s {settled.after_ready:6.1f} s"
        f" {settled.probes:6d} ({per:4.2f}/send) {settled.sends:6d}"
        f" {'DOUBLED ' + str(settled.doubled) if settled.doubled else 'once each'}"
    )


async def once(
    chats: int, *, streaming: bool = False, built: bool = False, made: int = 16
) -> Settled:
    llm = await FakeLLM().start()
    tg = await FakeTelegram(random_token()).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp) / "home"
            if built:
                return await left_by_a_dead_process(
                    home, llm, tg, chats=chats, made=made, settle_within=300
                )
            return await kill_while_sending(
                home, llm, tg, chats=chats, streaming=streaming, settle_within=300
            )
    finally:
        await tg.stop()
        await llm.stop()


async def main(args: argparse.Namespace) -> None:
    print(f"{'lost sends':<34} {'spawn':>8} {'ready':>8} {'probes':>17} {'sent':>6}")
    for _ in range(args.runs):
        for chats in args.chats:
            for streaming in (False, True):
                label = f"{chats} killed, {'streamed drafts' if streaming else 'whole answers'}"
                print(row(label, await once(chats, streaming=streaming)), flush=True)
        for chats in args.built:
            label = f"{chats} left by a dead process ({args.made} made)"
            print(row(label, await once(chats, built=True, made=args.made)), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--chats", type=int, nargs="*", default=[40, 200])
    parser.add_argument("--built", type=int, nargs="*", default=[500])
    parser.add_argument("--made", type=int, default=16)
    parser.add_argument("--runs", type=int, default=1)
    quiet_proxies()
    asyncio.run(main(parser.parse_args()))
