"""The demo MCP server (tests/fakes/mcp_server.py) for tests: as a stdio server table, or
running on streamable HTTP (one shared per test session, or one of a test's own)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

SERVER = Path(__file__).parent / "mcp_server.py"


def stdio(**overrides: Any) -> dict[str, Any]:
    """An [mcp.servers.demo] table that starts the demo server over stdio."""
    return {
        "command": sys.executable,
        "args": [str(SERVER)],
        "read_paths": [str(SERVER.parent)],
    } | overrides


async def start_http_server(*args: str) -> tuple[asyncio.subprocess.Process, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(SERVER), *args, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    async with asyncio.timeout(20):
        line = (await process.stdout.readline()).decode()
    return process, f"http://127.0.0.1:{int(line.split()[1])}"


@pytest.fixture
async def http_server() -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """A server of the test's own (it may be killed)."""
    process, url = await start_http_server("--http")
    yield process, f"{url}/mcp"
    if process.returncode is None:
        process.kill()
    await process.wait()


@pytest.fixture(scope="session")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One streamable HTTP server for the tests that do not stop it (starting the SDK's
    server takes a second); ``events`` is its events.txt."""
    directory = tmp_path_factory.mktemp("mcp-shared")
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http"], stdout=subprocess.PIPE, cwd=directory
    )
    assert process.stdout is not None
    port = int(process.stdout.readline().split()[1])
    yield {"url": f"http://127.0.0.1:{port}/mcp", "events": directory / "events.txt"}
    process.kill()
    process.wait()
