"""Shared fixtures: an isolated SWITCHBOARD_HOME, the fake LLM, and a running gateway."""

from __future__ import annotations

from tests.isolation import isolate

# First, before anything below is imported: the run's own empty HOME, without the
# developer's SWITCHBOARD_* / API key / proxy / XDG variables (tests/isolation.py).
isolate()

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from channels.memory import MemoryChannel
from gateway.config.settings import Settings
from gateway.runtime.app import Gateway
from gateway.runtime.home import onboard
from tests.fakes.llm import FakeLLM
from tests.system import pytest_terminal_summary  # noqa: F401 - names missing packages

pytest_plugins = [
    "tests.fakes.mcp_fixtures",  # the demo MCP server: `shared`, `http_server`
    # `tg`, `fake_slack`, `fake_discord`, `site`, `sink`, `graph`, `signal_daemon`, `ircd`
    "tests.fakes.platform_fixtures",
    "tests.backends",  # the store on both engines: `make_store`
]

# Property tests: CI runs a fixed, derandomized set of examples, so it never fails on an
# example found for the first time that nobody can reproduce; `make fuzz` searches widely.
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "fuzz",
    max_examples=5_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Each test its own SWITCHBOARD_HOME, inside its tmp_path."""
    monkeypatch.setenv("SWITCHBOARD_HOME", str(tmp_path / "home"))
    yield


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLM]:
    fake = await FakeLLM().start()
    yield fake
    await fake.stop()


@pytest.fixture
async def backup_llm() -> AsyncIterator[FakeLLM]:
    """A second model server, for a fallback model (``llm.fallbacks``)."""
    fake = await FakeLLM().start()
    yield fake
    await fake.stop()


SettingsFactory = Callable[..., Settings]


@pytest.fixture
def make_settings(tmp_path: Path, fake_llm: FakeLLM) -> SettingsFactory:
    def build(**overrides: Any) -> Settings:
        home = overrides.pop("home", tmp_path / "home")
        llm = {
            "provider": "openai",
            "model": "fake-model",
            "base_url": fake_llm.openai_url,
            "api_key": "sk-test-key-123456",
            "max_retries": 0,
        }
        llm.update(overrides.pop("llm", {}))
        if llm["provider"] == "anthropic" and "base_url" not in overrides.get("llm", {}):
            llm["base_url"] = fake_llm.anthropic_url
        # Background reflection adds model calls after a turn; tests that want it turn it on.
        overrides["agent"] = {"reflection": False, **overrides.get("agent", {})}
        settings = Settings(home=home, llm=llm, **overrides)
        onboard(settings.home, settings.workspace_dir)
        return settings

    return build


@pytest.fixture
def run_gateway(make_settings: SettingsFactory) -> Callable[..., Any]:
    """``async with run_gateway() as (gateway, channel):`` a started gateway on a MemoryChannel."""

    @asynccontextmanager
    async def start(
        settings: Settings | None = None,
        *,
        channel: MemoryChannel | None = None,
        clock: Any = None,
        **overrides: Any,
    ) -> AsyncIterator[tuple[Gateway, MemoryChannel]]:
        memory = channel or MemoryChannel()
        gateway = Gateway(settings or make_settings(**overrides), channels=[memory], clock=clock)
        async with gateway:
            yield gateway, memory

    return start


async def edit_applied(gateway: Gateway, channel: str, platform_id: str) -> None:
    """An edit took the place of the waiting message ``platform_id`` (whose journal row is
    closed), so a turn that starts now answers the edited text."""

    async def closed() -> bool:
        row = await gateway.store.journal.find(channel, platform_id)
        return row is not None and row[1] == "done"

    async with asyncio.timeout(10):
        await gateway.bus.wait_until(closed)
