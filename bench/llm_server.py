"""The fake LLM in its own process, so benchmarks measure only the gateway's CPU.

``python -m bench.llm_server --latency 0.2`` prints ``PORT <n>`` and serves until killed.
"""

from __future__ import annotations

import argparse
import asyncio

from tests.fakes.llm import FakeLLM


async def serve(latency: float) -> None:
    fake = await FakeLLM(latency=latency).start()
    print(f"PORT {fake.port}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.2)
    asyncio.run(serve(parser.parse_args().latency))


if __name__ == "__main__":
    main()
