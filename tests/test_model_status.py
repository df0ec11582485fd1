"""Which model answers and which sits out a cooldown, as the operator sees it: ``/status`` in
a chat, the status data behind ``switchboard status --json`` and the page, and ``/metrics``.
Real openai SDK against two fake model servers; time on a fake clock."""

from __future__ import annotations

from datetime import UTC, datetime

from channels.memory import MemoryChannel
from gateway.cli.status import render
from gateway.runtime.app import Gateway
from gateway.web.metrics import GatewayMetrics
from gateway.web.status import snapshot
from tests.conftest import SettingsFactory
from tests.fakes.clock import FakeClock
from tests.fakes.llm import FakeLLM, error, text

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


async def test_status_says_which_model_answered_and_which_cools_down_until_when(
    make_settings: SettingsFactory, fake_llm: FakeLLM, backup_llm: FakeLLM
) -> None:
    fake_llm.queue(error(503, "upstream unavailable"))
    backup_llm.queue(text("From the backup."))
    fallback = {"model": "backup-model", "base_url": backup_llm.openai_url, "api_key": "sk-b"}
    settings = make_settings(llm={"fallbacks": [fallback], "fallback_cooldown_seconds": 120})
    primary = f"openai fake-model at {fake_llm.openai_url}"
    backup = f"openai backup-model at {backup_llm.openai_url}"
    clock = FakeClock(START)
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel], clock=clock) as gateway:
        before = {m["label"]: m for m in (await snapshot(gateway))["models"]}
        await channel.push("hello")
        await channel.wait_for(1)
        await gateway.wait_idle()
        await clock.advance(seconds=30)
        await channel.push("/status")
        await channel.wait_for(2)
        await gateway.wait_idle()
        models = (await snapshot(gateway))["models"]
        metrics = (await GatewayMetrics(gateway).render()).decode().splitlines()
    assert not any(m["answered_last"] or m["cooling_until"] for m in before.values())
    status = channel.texts()[1]
    assert (
        "Model fake-model (openai) [llm]: cooling down until 09:02:00 UTC (90 s more) after: "
        f"{fake_llm.openai_url} failed with an internal error (HTTP 503)." in status
    )
    assert "Model backup-model (openai) [llm.fallbacks[0]]: answered last, at 09:00:00 UTC" in (
        status
    )
    until = START.timestamp() + 120
    assert [
        (m["label"], m["settings"], m["answered_last"], m["cooling_until"]) for m in models
    ] == [
        (primary, ["llm"], False, until),
        (backup, ["llm.fallbacks[0]"], True, None),
    ]
    assert models[1]["last_answer_at"] == START.timestamp()
    gauges = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in metrics
        if line.startswith("switchboard_model_")
    }
    assert gauges == {
        f'switchboard_model_cooling_until_seconds{{model="{primary}"}}': until,
        f'switchboard_model_cooling_until_seconds{{model="{backup}"}}': 0.0,
        f'switchboard_model_answered_last{{model="{primary}"}}': 0.0,
        f'switchboard_model_answered_last{{model="{backup}"}}': 1.0,
    }
    # `switchboard status` prints the same data it gets from the running gateway
    report = {"running": True, "pid": 7, "url": None, "ready": True, "live_error": None,
              "channels": [], "models": models, "live": False, "store": "empty",
              "last_error": None}  # fmt: skip
    lines = render(report)
    assert "  model fake-model (openai): cooling down until " in "\n".join(lines)
    assert "  model backup-model (openai): answered last [llm.fallbacks[0]]" in lines


async def test_a_cooldown_that_passed_no_longer_shows(
    make_settings: SettingsFactory, fake_llm: FakeLLM, backup_llm: FakeLLM
) -> None:
    fake_llm.queue(error(503))
    backup_llm.responder = lambda r: text(f"backup: {r.last_user_text}")
    fallback = {"model": "backup-model", "base_url": backup_llm.openai_url, "api_key": "sk-b"}
    settings = make_settings(llm={"fallbacks": [fallback], "fallback_cooldown_seconds": 60})
    clock = FakeClock(START)
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel], clock=clock) as gateway:
        await channel.push("one")
        await channel.wait_for(1)
        await clock.advance(seconds=61)
        await channel.push("two")  # the primary is asked again, and answers
        await channel.wait_for(2)
        await gateway.wait_idle()
        models = (await snapshot(gateway))["models"]
    assert channel.texts() == ["backup: one", "echo: two"]
    assert [(m["name"], m["answered_last"], m["cooling_until"]) for m in models] == [
        ("fake-model (openai)", True, None),
        ("backup-model (openai)", False, None),
    ]
    assert models[0]["last_error"] is None
