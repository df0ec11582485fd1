"""Soak: mixed traffic through the real Telegram path for a long stretch, with a fault every
minute, watching for leaks and for messages lost or answered twice.

Run from the repository root: ``python -m bench.soak [--minutes 30] [--chats 20]
[--fault-every 60] [--sample-every 10] [--cluster N]``. With ``--cluster N`` the traffic goes
through N node processes on a PostgreSQL server of the soak's own, with cluster faults (node
and leader kills, database restarts): bench/soak_cluster.py.

Users (one per chat) write, wait for the answer, pause 0.5-3 s and write again: short texts,
long ones (3,000 characters), markdown, ``/status``. Every ``--fault-every`` seconds one
fault is injected, in turn:

* ``bot-api-5xx``: the fake Bot API answers every call with 502 for 15 s;
* ``llm-503``: the next three model calls get 503 (the user gets a provider notice);
* ``llm-timeout``: the next model call never answers (``llm.timeout_seconds`` = 10 ends it);
* ``flood-429``: one chat's next send gets 429 with ``retry_after`` 20;
* ``restart``: the gateway stops (graceful, turns drain) and starts again on the same store.

Every ``--sample-every`` seconds it records the process's RSS, open file descriptors,
asyncio tasks and the store's size (database, and its WAL apart: SQLite reuses the WAL
file after each checkpoint, so it levels off at about 4 MB rather than shrinking). At the end it waits for the last
answers, then checks that every message got exactly one reply (an answer, or a notice for
the turns the model failed), prints the samples as a table and exits 1 if any message was
lost or answered twice. The fakes run in the same process (their memory is in the RSS; they
are pruned as the run goes so they do not grow).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import quiet_proxies, rss_mib
from bench.soak_chats import Conversations, latency, schedule
from bench.soak_web import WebUser
from channels.telegram.adapter import TelegramChannel
from channels.webchat import create as create_webchat
from gateway.config.settings import Settings
from gateway.core.channel import Channel
from gateway.runtime.app import Gateway
from gateway.runtime.home import onboard
from tests.fakes.llm import FakeLLM, error, held
from tests.fakes.telegram import FakeTelegram, random_token

FAULTS = ("bot-api-5xx", "llm-503", "llm-timeout", "flood-429", "restart")
CLUSTER_FAULTS = (
    "node-kill",
    "leader-kill",
    "db-restart",
    "bot-api-5xx",
    "flood-429",
    "redelivery",
)


@dataclass
class Sample:
    at: float
    sent: int
    replies: int
    rss: float
    cpu: float  # percent of one core since the previous sample (the fakes' share included)
    fds: int
    tasks: int
    db_kib: float
    wal_kib: float
    fault: str


class Soak:
    def __init__(self, args: argparse.Namespace, home: Path) -> None:
        self.args = args
        self.home = home
        self.samples: list[Sample] = []
        self.fault = "-"
        self.faults_done: list[tuple[float, str]] = []
        self.stop_traffic = asyncio.Event()
        self.started = time.monotonic()
        self.tg: FakeTelegram
        self.llm: FakeLLM
        self.users: Conversations
        self.settings: Settings
        self.gateway: Gateway | None = None
        self.restarting = asyncio.Lock()
        self.cpu_mark = (time.monotonic(), time.process_time())
        self.browser = WebUser(self.web_address, self.stop_traffic)

    def web_address(self) -> tuple[str, str] | None:
        """The web chat's URL and a fresh sign-in link, None while the gateway restarts."""
        web = None if self.gateway is None else self.gateway.web
        return None if web is None else (web.url, web.sign_in_link())

    # -- the gateway ----------------------------------------------------------------------

    async def start_gateway(self) -> None:
        channels: list[Channel] = [
            TelegramChannel(self.settings.telegram, self.settings.channel_context())
        ]
        if self.args.web:
            channels.append(create_webchat(self.settings))
        gateway = Gateway(self.settings, channels=channels)
        await gateway.start()
        self.gateway = gateway

    async def stop_gateway(self) -> None:
        if self.gateway is not None:
            await self.gateway.stop()
            self.gateway = None

    # -- faults ---------------------------------------------------------------------------

    async def faults(self) -> None:
        kinds = self.args.faults
        async for kind in schedule(kinds, self.args.fault_every, self.started, self.stop_traffic):
            self.fault = kind
            self.faults_done.append((time.monotonic() - self.started, kind))
            await self.inject(kind)
            self.fault = "-"

    async def inject(self, kind: str) -> None:
        if kind == "bot-api-5xx":
            await self.users.outage()
        elif kind == "llm-503":
            self.llm.queue(*(error(503, "overloaded") for _ in range(3)))
        elif kind == "llm-timeout":
            self.llm.queue(held(asyncio.Event()))  # released only when the fake stops
        elif kind == "flood-429":
            self.users.flood()
        elif kind == "restart":
            await self.stop_gateway()
            await self.start_gateway()

    # -- sampling -------------------------------------------------------------------------

    def sample(self) -> Sample:
        db = self.settings.data_dir / "switchboard.db"
        wal = db.with_name(db.name + "-wal")
        (then, used), now = self.cpu_mark, (time.monotonic(), time.process_time())
        self.cpu_mark = now
        return Sample(
            at=time.monotonic() - self.started,
            sent=self.users.total_sent(),
            replies=self.users.total_answered(),
            rss=rss_mib(),
            cpu=100 * (now[1] - used) / max(now[0] - then, 1e-6),
            fds=len(os.listdir("/proc/self/fd")),
            tasks=len(asyncio.all_tasks()),
            db_kib=db.stat().st_size / 1024 if db.exists() else 0.0,
            wal_kib=wal.stat().st_size / 1024 if wal.exists() else 0.0,
            fault=self.fault,
        )

    async def sampler(self) -> None:
        while True:
            self.samples.append(self.sample())
            await asyncio.sleep(self.args.sample_every)

    # -- the run --------------------------------------------------------------------------

    async def run(self) -> int:
        self.llm = await FakeLLM(latency=0.2).start()
        self.tg = await FakeTelegram(random_token()).start()
        self.settings = settings_for(self.home, self.llm.openai_url, self.tg, web=self.args.web)
        self.users = Conversations(self.tg, self.llm, self.stop_traffic)
        await self.start_gateway()
        sampling = asyncio.create_task(self.sampler())
        browsing = asyncio.create_task(self.browser.run()) if self.args.web else None
        await self.users.converse(self.args.chats, self.args.minutes, self.faults(), grace=5)
        if browsing is not None:
            await browsing
            await self.browser.last_look()
        sampling.cancel()
        self.samples.append(self.sample())
        await self.stop_gateway()
        await self.tg.stop()
        await self.llm.stop()
        return self.report()

    def report(self) -> int:
        verdicts = self.users.verdicts()
        lost = sum(v.lost for v in verdicts.values())
        doubled = sum(v.doubled for v in verdicts.values())
        unfinished = sum(v.unfinished for v in verdicts.values())
        notices = [n for v in verdicts.values() for n in v.notices]
        print(
            f"Soak: {self.args.minutes} min, {self.args.chats} chats, a fault every "
            f"{self.args.fault_every} s (fake Bot API and fake LLM in process)"
        )
        print("  faults: " + ", ".join(f"{at:.0f}s {kind}" for at, kind in self.faults_done))
        print()
        print(
            "| t (s) | messages | replies | RSS (MiB) | CPU (%) | open fds | asyncio tasks "
            "| store (KiB) | WAL (KiB) | fault |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for s in self.samples:
            print(
                f"| {s.at:.0f} | {s.sent} | {s.replies} | {s.rss:.1f} | {s.cpu:.0f} | {s.fds}"
                f" | {s.tasks} "
                f"| {s.db_kib:.0f} | {s.wal_kib:.0f} | {s.fault} |"
            )
        print()
        print(
            f"  messages {self.users.total_sent()}, answered"
            f" {sum(v.answered for v in verdicts.values())}, lost {lost} (of which only a"
            f" draft shows: {unfinished}), answered twice {doubled}; notices {len(notices)}"
            f" (provider errors, time-outs); answers streamed by edits:"
            f" {self.users.shown.edits} edits"
        )
        print(f"  wait for an answer (Telegram): {latency(self.users.waits)}")
        for chat, verdict in verdicts.items():
            if verdict.lost or verdict.doubled:
                print(f"    chat {chat}: {verdict}; shows {self.users.shown.visible(chat)}")
        ok = lost == 0 and doubled == 0
        if self.args.web:
            web = self.browser.verdict()
            print(
                f"  web chat: messages {len(self.browser.posted)}, answered {web.answered},"
                f" lost {web.lost}, answered twice {web.doubled}; other replies"
                f" {len(web.notices)}; wait for an answer: {latency(self.browser.waits)}"
            )
            ok = ok and web.lost == 0 and web.doubled == 0
        print("  every message answered exactly once" if ok else "  FAILED: see lost/doubled")
        return 0 if ok else 1


def settings_for(home: Path, llm_url: str, tg: FakeTelegram, *, web: bool = False) -> Settings:
    settings = Settings(
        home=home,
        # --web: the owner's page open on the web chat (any free port); else no web server
        web={"port": 0} if web else {"enabled": False},
        agent={"reflection": False},
        # members' allowances off: each soak user writes far more than 60 turns an hour,
        # and a refused turn past the first notice is silent by design
        limits={"user_turns_per_hour": 0, "user_daily_tokens": 0},
        llm={
            "provider": "openai",
            "model": "fake-model",
            "base_url": llm_url,
            "api_key": "sk-bench-key-123456",
            "max_retries": 0,
            "timeout_seconds": 10,
        },
        telegram={
            "token": tg.token,
            "base_url": tg.base_url,
            "allow_from": ["*"],
            "poll_timeout_seconds": 10,
        },
    )
    onboard(settings.home, settings.workspace_dir)
    return settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--fault-every", type=float, default=60.0)
    parser.add_argument("--sample-every", type=float, default=10.0)
    parser.add_argument(
        "--faults",
        type=lambda v: v.split(","),
        default=None,
        help=f"{','.join(FAULTS)}; with --cluster: {','.join(CLUSTER_FAULTS)}",
    )
    parser.add_argument(
        "--web", action="store_true", help="the owner's browser open on the web chat, writing too"
    )
    parser.add_argument("--home", type=Path, default=None, help="keep the run's home here")
    parser.add_argument(
        "--cluster",
        type=int,
        default=0,
        metavar="N",
        help="N node processes on a PostgreSQL server of the soak's own (bench/soak_cluster.py)",
    )
    args = parser.parse_args()
    quiet_proxies()
    if args.home is not None:  # kept afterwards, to look into the store
        sys.exit(asyncio.run(soak(args, args.home)))
    with tempfile.TemporaryDirectory(prefix="switchboard-soak-") as tmp:
        code = asyncio.run(soak(args, Path(tmp) / "home"))
    sys.exit(code)


async def soak(args: argparse.Namespace, home: Path) -> int:
    if args.cluster:
        from bench.soak_cluster import run_cluster  # it imports this module

        return await run_cluster(args, home)
    args.faults = args.faults or list(FAULTS)
    return await Soak(args, home).run()


if __name__ == "__main__":
    main()
