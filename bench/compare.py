"""Switchboard beside the floor bot, on the same fakes, in the same run, with the ratios.

Run from the repository root: ``python -m bench.compare [--reps 2] [--turns 20] [--chats 50]
[--big 500] [--defaults]``. Each bot runs in its own process (``switchboard run`` with the Telegram channel,
and ``bench/floor.py``) against one fake Bot API in this process and the fake LLM (200 ms per
call) in another, so CPU and memory are the bot's own. Repetitions alternate the order of
the two bots; every figure is the median over repetitions.

* start: from creating the process until its first ``getUpdates`` reaches the fake.
* seq e2e: one chat; the next message is sent when the answer arrives; from the update being
  available to ``getUpdates`` until the ``sendMessage`` reached the fake (median).
* burst: N new chats write in the same instant; time until all N answers arrived, and the
  bot's CPU time over the burst divided by N (the CPU per turn).
* big burst: the same with 500 chats (one process, SQLite for Switchboard).

Switchboard runs with ``telegram.messages_per_second = 1000`` (Telegram's paid-broadcast
rate): the floor bot does not pace at all, and at the default 30/s 500 answers cannot leave
in under (500 - 100) / 30 = 13 s whatever the gateway does. Bursts up to 100 are not paced
either way, so the 50-chat figure is the same with the default.

By default Switchboard runs with streaming by edits and the web chat off (the floor sends
one message per answer and serves nothing else). ``--defaults`` also runs it as shipped
(streaming on in direct chats, the web chat on) and reports both against the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import LLM_LATENCY, llm_process, quiet_proxies
from bench.procs import BotProcess, CpuMark, PySpy, memory_mib
from tests.fakes.telegram import Call, FakeTelegram, random_token


@dataclass
class Figures:
    start: list[float] = field(default_factory=list)
    seq: list[float] = field(default_factory=list)
    seq_cpu: list[float] = field(default_factory=list)
    burst: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    big: list[float] = field(default_factory=list)
    big_cpu: list[float] = field(default_factory=list)
    rss_idle: list[float] = field(default_factory=list)
    rss_peak: list[float] = field(default_factory=list)


class Answers:
    """When each chat got each answer, read incrementally from the fake's call log (checking
    the whole log for 500 waiting chats on every request would cost the fake more than the
    bots)."""

    def __init__(self, tg: FakeTelegram) -> None:
        self._tg = tg
        self._cursor = 0
        self._open: list[Call] = []
        self.at: dict[int, list[float]] = {}

    def _scan(self) -> None:
        calls = self._tg.calls
        while self._cursor < len(calls):
            call = calls[self._cursor]
            self._cursor += 1
            if call.method == "sendMessage":
                self._open.append(call)
        still_open = []
        for call in self._open:
            if call.params.get("_ok"):
                self.at.setdefault(int(call.params["chat_id"]), []).append(call.at)
            elif call.result is None:
                still_open.append(call)
        self._open = still_open

    async def wait(self, done: Callable[[], bool], seconds: float = 120) -> None:
        def check() -> bool:
            self._scan()
            return done()

        await self._tg.wait_for(check, seconds)

    def count(self, chat: int) -> int:
        return len(self.at.get(chat, ()))


def switchboard(
    tg: FakeTelegram, llm_url: str, home: Path, log: Path, *, shipped: bool = False
) -> BotProcess:
    """``switchboard run``: streaming and the web chat off, or as shipped (``shipped``)."""
    from gateway.config.settings import Settings
    from gateway.runtime.home import onboard

    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    env.update(
        SWITCHBOARD_HOME=str(home),
        SWITCHBOARD_LLM__PROVIDER="openai",
        SWITCHBOARD_LLM__MODEL="fake-model",
        SWITCHBOARD_LLM__BASE_URL=llm_url,
        SWITCHBOARD_LLM__API_KEY="sk-bench-123456",
        SWITCHBOARD_TELEGRAM__TOKEN=tg.token,
        SWITCHBOARD_TELEGRAM__BASE_URL=tg.base_url,
        SWITCHBOARD_TELEGRAM__ALLOW_FROM='["*"]',
        SWITCHBOARD_TELEGRAM__POLL_TIMEOUT_SECONDS="30",
        SWITCHBOARD_TELEGRAM__MESSAGES_PER_SECOND="1000",
        SWITCHBOARD_HEARTBEAT__ENABLED="false",
    )
    if shipped:
        env.update(SWITCHBOARD_WEB__PORT="0")  # on, on a free port
    else:
        env.update(
            SWITCHBOARD_TELEGRAM__STREAMING="false",  # the floor sends one message per answer
            SWITCHBOARD_WEB__ENABLED="false",
        )
    settings = Settings(home=home)
    onboard(settings.home, settings.workspace_dir)  # a normal start, not the first-run setup
    return BotProcess("gateway", "run", env=env, log=log)


def floor(tg: FakeTelegram, llm_url: str, home: Path, log: Path) -> BotProcess:
    env = dict(os.environ)
    env.update(FLOOR_TOKEN=tg.token, FLOOR_BASE_URL=f"{tg.base_url}/bot", FLOOR_LLM_URL=llm_url)
    return BotProcess("bench.floor", env=env, log=log)


def as_shipped(tg: FakeTelegram, llm_url: str, home: Path, log: Path) -> BotProcess:
    return switchboard(tg, llm_url, home, log, shipped=True)


BOTS = {"switchboard": switchboard, "defaults": as_shipped, "floor": floor}


async def say_all(tg: FakeTelegram, chats: range, text: str) -> float:
    started = time.perf_counter()
    await asyncio.gather(*(tg.say(text, chat_id=c, user_id=c) for c in chats))
    return started


async def measure(
    name: str, llm_url: str, tmp: Path, args: argparse.Namespace, into: Figures
) -> None:
    await asyncio.to_thread(tmp.mkdir, parents=True, exist_ok=True)
    tg = await FakeTelegram(random_token()).start()
    bot = BOTS[name](tg, llm_url, tmp / f"{name}-home", tmp / f"{name}.log")
    answers = Answers(tg)
    try:
        await bot.start()
        [first_poll, *_] = await tg.wait_called("getUpdates", timeout=60)
        into.start.append(first_poll.at - bot.started_at)
        await tg.say("warm up", chat_id=1, user_id=1)  # connections, lazy imports, caches
        await answers.wait(lambda: answers.count(1) >= 1)
        await bot.settled_cpu()
        into.rss_idle.append(memory_mib(bot.pid))
        run = Run(name, bot, tg, answers, into)
        await sequential(run, args.turns)
        spy = f"{args.py_spy}-{name}-burst.txt" if args.py_spy else None
        await burst(run, range(10_000, 10_000 + args.chats), spy)
        if args.big > 0:
            await burst(run, range(100_000, 100_000 + args.big), None)
        into.rss_peak.append(memory_mib(bot.pid, "VmHWM"))
    finally:
        await bot.stop()
        await tg.stop()


@dataclass(frozen=True)
class Run:
    """One bot under test and what it is measured with."""

    name: str
    bot: BotProcess
    tg: FakeTelegram
    answers: Answers
    into: Figures


async def sequential(run: Run, turns: int) -> None:
    """One chat; the next message is sent when the answer to the previous one arrived."""
    name, bot, tg, answers, into = run.name, run.bot, run.tg, run.answers, run.into
    chat, e2e = 2, []
    cpu, mark = bot.cpu(), bot.mark()
    for i in range(turns):
        update = await tg.say(f"question {i}", chat_id=chat, user_id=chat)
        await answers.wait(lambda n=i + 1: answers.count(chat) >= n)
        e2e.append(answers.at[chat][-1] - tg.pushed_at[update["update_id"]])
    into.seq.append(statistics.median(e2e))
    into.seq_cpu.append((await bot.settled_cpu() - cpu) / turns)
    report_cpu(f"{name}, {turns} sequential turns", bot.mark(), mark, turns)


async def burst(run: Run, chats: range, spy_file: str | None) -> None:
    """Every chat writes in the same instant; the time until all are answered."""
    name, bot, tg, answers, into = run.name, run.bot, run.tg, run.answers, run.into
    spy = PySpy(bot.pid, Path(spy_file)) if spy_file else None
    if spy is not None:
        await spy.start()
    cpu, mark = bot.cpu(), bot.mark()
    started = await say_all(tg, chats, "all at once")
    await answers.wait(lambda: all(answers.count(x) for x in chats), 300)
    elapsed = max(answers.at[c][0] for c in chats) - started
    per_turn = (await bot.settled_cpu() - cpu) / len(chats)
    if spy is not None:
        await spy.stop()
    report_cpu(f"{name}, {len(chats)} chats at once", bot.mark(), mark, len(chats))
    big = len(chats) > 100
    (into.big if big else into.burst).append(elapsed)
    (into.big_cpu if big else into.cpu).append(per_turn)


def report_cpu(what: str, now: CpuMark, then: CpuMark, turns: int) -> None:
    """CPU per turn between two readings: all, the event loop's thread, user and system."""

    def ms(seconds: float) -> str:
        return f"{seconds * 1000 / turns:.1f} ms"

    print(
        f"  {what}: {ms(now.total - then.total)} CPU per turn (event loop thread"
        f" {ms(now.main_thread - then.main_thread)}; user {ms(now.user - then.user)},"
        f" system {ms(now.system - then.system)})",
        flush=True,
    )


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(
    sb: Figures,
    fl: Figures,
    args: argparse.Namespace,
    load: tuple[float, float],
    title: str,
    *,
    cpu_target: float,
) -> None:
    """One configuration beside the floor (``cpu_target``: the most CPU per turn in the
    burst may cost, as a ratio: 1.1 with streaming off, 1.5 with the defaults)."""

    def row(label: str, a: float, b: float, *, ms: bool = True, target: str = "") -> None:
        ratio = a / b if b else float("nan")
        unit, scale, digits = ("ms", 1000, 1) if ms else ("s", 1, 3)
        print(
            f"  {label:<34} {a * scale:>10.{digits}f} {unit:<3} {b * scale:>10.{digits}f} {unit:<3}"
            f" {ratio:>6.2f}x  {target}"
        )

    llm_ms = LLM_LATENCY * 1000
    print(
        f"\nSwitchboard ({title}) vs floor, {args.reps} rep(s), fake LLM {llm_ms:.0f} ms, load"
        f" average {load[0]:.1f} before / {load[1]:.1f} after (2 cores: noisy above ~1)"
    )
    print(f"  {'metric':<34} {'Switchboard':>14} {'floor':>14} {'ratio':>7}  target")
    row("seq e2e median (one chat)", median(sb.seq), median(fl.seq), target="<= 1.1x")
    after = median(sb.seq) - LLM_LATENCY, median(fl.seq) - LLM_LATENCY
    row(f"  after the LLM (e2e - {llm_ms:.0f} ms)", *after)
    row("CPU per turn, sequential", median(sb.seq_cpu), median(fl.seq_cpu))
    burst = f"{args.chats} chats at once: all answered"
    row(burst, median(sb.burst), median(fl.burst), ms=False, target="<= 1.25x")
    cpu = median(sb.cpu), median(fl.cpu)
    row("CPU per turn in that burst", *cpu, target=f"<= {cpu_target}x")
    if args.big > 0:
        big = f"{args.big} chats at once: all answered"
        row(big, median(sb.big), median(fl.big), ms=False, target="<= 1.5x")
        row("CPU per turn in that burst", median(sb.big_cpu), median(fl.big_cpu))
    start_sb, start_fl = median(sb.start), median(fl.start)
    print(
        f"  {'start -> first getUpdates':<34} {start_sb:>10.3f} s   {start_fl:>10.3f} s  "
        f" {start_sb - start_fl:>+6.3f} s  <= +0.15 s"
    )
    print(
        f"  {'RSS idle / peak (MiB)':<34} {median(sb.rss_idle):>7.0f} / {median(sb.rss_peak):<4.0f}"
        f" {median(fl.rss_idle):>7.0f} / {median(fl.rss_peak):<4.0f}"
    )
    for label, f in ((title, sb), ("floor", fl)):
        print(
            f"  raw {label}: start {fmt(f.start)} seq {fmt(f.seq)} burst {fmt(f.burst)}"
            f" cpu/turn {fmt(f.cpu, 1000)} big {fmt(f.big)} big cpu/turn {fmt(f.big_cpu, 1000)}"
        )


def fmt(values: list[float], scale: float = 1.0) -> str:
    return "[" + " ".join(f"{v * scale:.3f}" for v in values) + "]"


async def run(args: argparse.Namespace) -> None:
    load_before = os.getloadavg()[0]
    bots = [name for name in BOTS if args.defaults or name != "defaults"]
    figures = {name: Figures() for name in bots}
    async with llm_process(LLM_LATENCY) as llm_url:
        with tempfile.TemporaryDirectory(prefix="switchboard-compare-") as tmp:
            for name in bots:  # warm the page cache and .pyc files; not recorded
                await measure(name, llm_url, Path(tmp), warmup_args(args), Figures())
            for rep in range(args.reps):
                order = bots if rep % 2 == 0 else list(reversed(bots))
                for name in order:
                    print(f"rep {rep + 1}: {name} ...", flush=True)
                    await measure(name, llm_url, Path(tmp) / f"rep{rep}", args, figures[name])
    load = (load_before, os.getloadavg()[0])
    off = "streaming and web chat off"
    report(figures["switchboard"], figures["floor"], args, load, off, cpu_target=1.1)
    if args.defaults:
        report(figures["defaults"], figures["floor"], args, load, "the defaults", cpu_target=1.5)


def warmup_args(args: argparse.Namespace) -> argparse.Namespace:
    return argparse.Namespace(turns=2, chats=5, big=0, reps=1, py_spy=None, defaults=False)


def main() -> None:
    parser = argparse.ArgumentParser(description="Switchboard beside the floor bot")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--turns", type=int, default=20, help="sequential turns in one chat")
    parser.add_argument("--chats", type=int, default=50, help="the burst")
    parser.add_argument("--big", type=int, default=500, help="the big burst (0: skip)")
    parser.add_argument(
        "--defaults",
        action="store_true",
        help="also run Switchboard as shipped (streaming in direct chats, the web chat on)",
    )
    parser.add_argument(
        "--py-spy",
        help="sample each bot with py-spy during the burst: PY_SPY-<bot>-burst.txt"
        " (summarise with python -m bench.stacks)",
    )
    args = parser.parse_args()
    quiet_proxies()
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
