"""Benchmark: cold start and idle memory of ``switchboard run``.

Run from the repository root: ``python -m bench.startup [--runs 5]``. Starts the real
command in a fresh home (no chat channel configured; the web chat on or off), measures the
wall time from process start until it prints "ready", and its RSS once ready.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import quiet_proxies
from tests.nodes import spawn


def rss_of(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


async def start_once(web: bool) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="switchboard-start-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
        env.update(
            SWITCHBOARD_HOME=str(Path(tmp) / "home"),
            SWITCHBOARD_LLM__BASE_URL="http://127.0.0.1:9/v1",
            SWITCHBOARD_LLM__API_KEY="sk-bench-123456",
            SWITCHBOARD_WEB__ENABLED="true" if web else "false",
            SWITCHBOARD_WEB__PORT="0",
            SWITCHBOARD_HEARTBEAT__ENABLED="false",
        )
        started = time.perf_counter()
        process = await spawn(env, asyncio.subprocess.DEVNULL)
        assert process.stdout is not None
        while b"ready" not in (line := await process.stdout.readline()):
            if not line:
                raise RuntimeError("switchboard run exited before it was ready")
        elapsed = time.perf_counter() - started
        await asyncio.sleep(0.5)  # settle
        rss = rss_of(process.pid)
        process.send_signal(signal.SIGTERM)
        await process.wait()
        return elapsed, rss


async def run(runs: int) -> None:
    print("Cold start of `switchboard run` (first run creates the home; median of the rest)")
    for web in (False, True):
        await start_once(web)  # warm the page cache and .pyc files
        results = [await start_once(web) for _ in range(runs)]
        times = [t for t, _ in results]
        rss = [r for _, r in results]
        label = "with web chat" if web else "no channels  "
        print(
            f"  {label}: start to ready {statistics.median(times):.2f} s (min {min(times):.2f}), RSS idle {statistics.median(rss):.0f} MiB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="cold start benchmark")
    parser.add_argument("--runs", type=int, default=5)
    quiet_proxies()
    asyncio.run(run(parser.parse_args().runs))


if __name__ == "__main__":
    main()
