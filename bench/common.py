"""Shared pieces of the benchmarks: the out-of-process fake LLM, settings, statistics."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from gateway.config.settings import Settings
from gateway.runtime.home import onboard

LLM_LATENCY = 0.2


def quiet_proxies() -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(name, None)
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"


@contextlib.asynccontextmanager
async def llm_process(latency: float = LLM_LATENCY) -> AsyncIterator[str]:
    """Start the fake LLM in a child process; yield its OpenAI base URL."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.llm_server",
        "--latency",
        str(latency),
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    line = (await process.stdout.readline()).decode()
    port = int(line.split()[1])
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.kill()
        await process.wait()


def settings_for(home: Path, base_url: str, **overrides: Any) -> Settings:
    settings = Settings(
        home=home,
        llm={
            "provider": "openai",
            "model": "fake-model",
            "base_url": base_url,
            "api_key": "sk-bench-123456",
            "max_retries": 0,
            **overrides.pop("llm", {}),
        },
        agent={"reflection": False},
        **overrides,
    )
    onboard(settings.home, settings.workspace_dir)
    return settings


def anthropic_settings_for(
    home: Path, base_url: str, *, window: int, reflection: bool = False, **overrides: Any
) -> Settings:
    """A home whose model is the fake Messages API with a context window of ``window``."""
    settings = Settings(
        home=home,
        llm={
            "provider": "anthropic",
            "model": "fake",
            "base_url": base_url,
            "api_key": "sk-ant-bench-123456",
            "max_retries": 0,
            "context_window": window,
            "max_tokens": 1024,
        },
        agent={"reflection": reflection},
        **overrides,
    )
    onboard(settings.home, settings.workspace_dir)
    return settings


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def rss_mib() -> float:
    with Path("/proc/self/status").open() as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mib() -> float:
    with Path("/proc/self/status").open() as status:
        for line in status:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
    return 0.0
