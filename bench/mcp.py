"""Benchmark: what MCP tools cost in the first prompt, and what find_tools saves.

Run from the repository root: ``python -m bench.mcp``. The demo MCP server of the tests
(``tests/fakes/mcp_server.py``, the official SDK over stdio) is configured with 60 tools;
the first request a fresh chat sends (system prompt, tool schemas, the user's message) is
counted with tiktoken, three ways: no MCP server, 60 MCP tools with the default prompt
budget (20 tools / 1,500 tokens, so ``find_tools`` stands in for them), and 60 MCP tools
with the budget lifted (every schema in every request).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent.tokens import TokenCounter
from bench.common import quiet_proxies, settings_for
from channels.memory import MemoryChannel
from gateway.runtime.app import Gateway

SERVER = Path(__file__).resolve().parents[1] / "tests" / "fakes" / "mcp_server.py"
DEMO_TOOLS = 11  # the demo server's own tools; --extra adds fillers up to 60


async def first_request(mcp: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """The body of the first model request of a fresh chat, and the turn's wall time."""
    from tests.fakes.llm import FakeLLM

    fake = await FakeLLM().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = settings_for(Path(tmp) / "home", fake.openai_url, mcp=mcp)
            channel = MemoryChannel()
            async with Gateway(settings, channels=[channel]):
                started = time.perf_counter()
                await channel.push("What's on my calendar tomorrow?")
                await channel.wait_for(1, max_wait=60)
                elapsed = time.perf_counter() - started
        return fake.requests[0].body, elapsed
    finally:
        await fake.stop()


def tokens(body: dict[str, Any], counter: TokenCounter) -> int:
    return counter.count(json.dumps(body["messages"], ensure_ascii=False)) + counter.count(
        json.dumps(body.get("tools", []), ensure_ascii=False)
    )


async def run() -> None:
    server = {
        "command": sys.executable,
        "args": [str(SERVER), "--extra", str(60 - DEMO_TOOLS)],
        "read_paths": [str(SERVER.parent)],
    }
    cases = {
        "no MCP server": {},
        "60 MCP tools, default budget (find_tools)": {"servers": {"demo": server}},
        "60 MCP tools, budget lifted (all schemas)": {
            "servers": {"demo": server},
            "max_offered_tools": 500,
            "max_offered_tokens": 1_000_000,
        },
    }
    counter = TokenCounter()
    counter.load()
    print("MCP tools in the first prompt (system + tool schemas + message, tiktoken cl100k)")
    for label, mcp in cases.items():
        body, elapsed = await first_request(mcp)
        names = [t["function"]["name"] for t in body.get("tools", [])]
        mcp_names = sum(1 for n in names if "__" in n)
        start = " (starts the server)" if mcp else ""
        print(
            f"  {label}: {tokens(body, counter)} tokens, {len(names)} tool schemas "
            f"({mcp_names} MCP); first turn {elapsed:.2f} s{start}"
        )


def main() -> None:
    quiet_proxies()
    asyncio.run(run())


if __name__ == "__main__":
    main()
