"""Fallback models (``llm.fallbacks``): a passing failure of one model is answered by the
next, the failed model sits out a cooldown, a refused key is reported rather than hidden,
and a turn moves between Anthropic and OpenAI-compatible models with its tool calls. Real
openai and anthropic SDKs against two fake LLM servers; time moves on a fake clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from agent.guards.trace import latest_trace, read_trace
from agent.llm.diagnose import Endpoint, not_configured, not_found, refused_key
from channels.memory import MemoryChannel
from gateway.cli.doctor.command import run_doctor
from gateway.config.settings import Settings, load_settings
from gateway.core.errors import ConfigError
from gateway.runtime.agents.assembly import agent_settings
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.clock import FakeClock
from tests.fakes.llm import SIGN_IN_PAGE, FakeLLM, Recorded, calls, error, text

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def url(fake: FakeLLM, provider: str) -> str:
    return fake.anthropic_url if provider == "anthropic" else fake.openai_url


def with_fallback(
    make_settings: SettingsFactory,
    backup: FakeLLM,
    *,
    primary: str = "openai",
    provider: str = "openai",
    **llm: Any,
) -> Settings:
    fallback = {
        "provider": provider,
        "model": "backup-model",
        "base_url": url(backup, provider),
        "api_key": "sk-backup-key-654321",
    }
    return make_settings(llm={"provider": primary, "fallbacks": [fallback], **llm})


def trace_events(settings: Settings) -> list[dict[str, Any]]:
    path = latest_trace(settings.data_dir / "traces")
    assert path is not None
    return read_trace(path)


async def usage_models(gateway: Gateway) -> list[str]:
    rows = await gateway.store.db.run(
        lambda conn: conn.execute("SELECT model FROM usage ORDER BY id").fetchall()
    )
    return [model for (model,) in rows]


async def test_a_503_from_the_first_model_is_answered_once_by_the_second(
    make_settings: SettingsFactory, fake_llm: FakeLLM, backup_llm: FakeLLM
) -> None:
    fake_llm.queue(error(503, "upstream unavailable"))
    backup_llm.queue(text("Paris is the capital of France."))
    settings = with_fallback(make_settings, backup_llm)
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("capital of France?")
        await channel.wait_for(1)
        await gateway.wait_idle()
        models = await usage_models(gateway)
    assert channel.texts() == ["Paris is the capital of France."]
    assert len(fake_llm.requests) == 1 and len(backup_llm.requests) == 1
    assert backup_llm.requests[0].last_user_text == "capital of France?"
    events = trace_events(settings)
    [failover] = [e for e in events if e["event"] == "fallback"]
    assert failover["model"] == f"openai fake-model at {fake_llm.openai_url}"
    assert failover["status"] == 503 and failover["error"] == "LLMUnavailable"
    assert not failover["cooling"]
    [answered] = [e for e in events if e["event"] == "llm"]
    assert answered["model"] == "backup-model"
    assert models == ["backup-model"]  # charged to the model that answered


async def test_a_failed_model_sits_out_its_cooldown_then_is_tried_again(
    make_settings: SettingsFactory, fake_llm: FakeLLM, backup_llm: FakeLLM
) -> None:
    fake_llm.queue(error(503))  # then the primary echoes
    backup_llm.responder = lambda r: text(f"backup: {r.last_user_text}")
    settings = with_fallback(make_settings, backup_llm, fallback_cooldown_seconds=120)
    clock = FakeClock(START)
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel], clock=clock) as gateway:
        await channel.push("one")
        await channel.wait_for(1)
        await clock.advance(seconds=119)
        await channel.push("two")
        await channel.wait_for(2)
        await gateway.wait_idle()
        second = trace_events(settings)
        primary_calls_during_cooldown = len(fake_llm.requests)
        await clock.advance(seconds=2)
        await channel.push("three")
        await channel.wait_for(3)
        await gateway.wait_idle()
        models = await usage_models(gateway)
    assert channel.texts() == ["backup: one", "backup: two", "echo: three"]
    assert primary_calls_during_cooldown == 1  # the second turn went straight to the backup
    assert len(fake_llm.requests) == 2 and len(backup_llm.requests) == 2
    [skipped] = [e for e in second if e["event"] == "fallback"]
    assert skipped["cooling"] and skipped["model"].startswith("openai fake-model")
    assert sorted(models) == ["backup-model", "backup-model", "fake-model"]


async def test_a_refused_key_on_the_primary_is_reported_not_failed_over(
    make_settings: SettingsFactory, fake_llm: FakeLLM, backup_llm: FakeLLM
) -> None:
    fake_llm.queue(error(401, "invalid api key"))
    settings = with_fallback(make_settings, backup_llm)
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("hello")
        await channel.wait_for(1)
        await gateway.wait_idle()
    assert backup_llm.requests == []
    [notice] = channel.texts()
    assert f"{fake_llm.openai_url} refused the API key (HTTP 401)." in notice
    assert "SWITCHBOARD_LLM__API_KEY" in notice
    assert not [e for e in trace_events(settings) if e["event"] == "fallback"]


async def test_when_every_model_fails_the_notice_names_each(
    make_settings: SettingsFactory, fake_llm: FakeLLM, backup_llm: FakeLLM
) -> None:
    fake_llm.queue(error(503))
    backup_llm.queue(error(529, "overloaded"))
    settings = with_fallback(make_settings, backup_llm, provider="anthropic")
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("hello")
        await channel.wait_for(1)
        await gateway.wait_idle()
    [notice] = channel.texts()
    assert "None of the 2 configured models answered" in notice
    assert f"openai fake-model at {fake_llm.openai_url}: {fake_llm.openai_url} failed" in notice
    assert f"{backup_llm.anthropic_url} is overloaded (HTTP 529)" in notice
    assert "try again in a moment" in notice
    events = trace_events(settings)
    assert [e["status"] for e in events if e["event"] == "fallback"] == [503, 529]


async def test_a_model_whose_url_answers_with_a_web_page_is_failed_over(
    make_settings: SettingsFactory, fake_llm: FakeLLM, backup_llm: FakeLLM
) -> None:
    """A base URL that reaches a sign-in page (200, HTML) is an outage like any other: the
    fallback answers, and the trace says what the primary sent instead of an answer."""
    fake_llm.web_page = SIGN_IN_PAGE
    backup_llm.queue(text("Paris is the capital of France."))
    settings = with_fallback(make_settings, backup_llm)
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("capital of France?")
        await channel.wait_for(1)
        await gateway.wait_idle()
    assert channel.texts() == ["Paris is the capital of France."]
    [failover] = [e for e in trace_events(settings) if e["event"] == "fallback"]
    assert failover["error"] == "LLMUnavailable"
    assert failover["reason"] == (
        f'{fake_llm.openai_url} answered /chat/completions with an HTML page ("Sign in"), '
        "not an OpenAI-compatible API."
    )


async def test_doctor_names_a_web_page_at_a_models_url_beside_its_other_checks(
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    backup_llm: FakeLLM,
    capsys: pytest.CaptureFixture[str],
) -> None:
    backup_llm.web_page = SIGN_IN_PAGE
    root = f"http://127.0.0.1:{backup_llm.port}"  # the site, not its /v1
    settings = make_settings(llm={"fallbacks": [{"model": "backup-model", "base_url": root}]})
    assert await run_doctor(settings) == 1
    out = capsys.readouterr().out
    checks = {
        line[7:].split("  ", 1)[0].strip(): (line[1:5], line[7:].split("  ", 1)[1].strip())
        for line in out.splitlines()
        if line[:1] == "["
    }
    assert checks["llm fallback 1"] == (
        "FAIL",
        f'{root} answered /chat/completions with an HTML page ("Sign in"), not an '
        "OpenAI-compatible API. Does it need /v1? Set llm.fallbacks[0].base_url (that entry "
        "of SWITCHBOARD_LLM__FALLBACKS, or of the [[llm.fallbacks]] tables in config.toml) "
        f"to the model server's /v1 root (such as {root}/v1).",
    )
    assert checks["llm"][0] == "ok  "
    assert {"config", "workspace", "llm key", "security"} <= checks.keys()  # the rest, too
    assert "1 problem found" in out


@pytest.mark.parametrize(("primary", "backup"), [("anthropic", "openai"), ("openai", "anthropic")])
async def test_a_turn_with_a_tool_call_continues_on_the_other_provider(
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    backup_llm: FakeLLM,
    primary: str,
    backup: str,
) -> None:
    fake_llm.queue(calls(("memory_read", {})), error(529 if primary == "anthropic" else 503))
    backup_llm.queue(text("Your memory is empty so far."))
    settings = with_fallback(
        make_settings, backup_llm, primary=primary, provider=backup, base_url=url(fake_llm, primary)
    )
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("what do you remember?")
        await channel.wait_for(1)
        await gateway.wait_idle()
    assert channel.texts() == ["Your memory is empty so far."]
    assert len(fake_llm.requests) == 2
    [continued] = backup_llm.requests
    call_id, result_id = tool_ids(continued, backup)
    assert call_id == result_id and call_id.startswith(
        "toolu_" if primary == "anthropic" else "call_"
    )
    assert continued.last_user_text == "what do you remember?"
    assert len(continued.tool_results) == 1
    events = trace_events(settings)
    assert [e["step"] for e in events if e["event"] == "fallback"] == [2]
    assert [e["model"] for e in events if e["event"] == "llm"] == ["fake-model", "backup-model"]


def tool_ids(request: Recorded, wire: str) -> tuple[str, str]:
    """The id of the tool call in the request's history and the id its result answers."""
    messages = request.body["messages"]
    if wire == "openai":
        [call] = [c for m in messages for c in m.get("tool_calls") or ()]
        [result] = [m for m in messages if m["role"] == "tool"]
        return call["id"], result["tool_call_id"]
    blocks = [b for m in messages if isinstance(m["content"], list) for b in m["content"]]
    [use] = [b for b in blocks if b["type"] == "tool_use"]
    [result] = [b for b in blocks if b["type"] == "tool_result"]
    return use["id"], result["tool_use_id"]


@pytest.mark.parametrize(
    ("environ", "field", "words"),
    [
        ('[{"provider": "anthropic"}]', "llm.fallbacks.0.model", "Field required"),
        (
            '[{"model": "m", "base_url": "localhost:11434"}]',
            "llm.fallbacks.0.base_url",
            "did you mean 'http://localhost:11434/v1'",
        ),
        (
            '[{"model": "m", "provder": "openai"}]',
            "llm.fallbacks.0.provder",
            "did you mean `provider`",
        ),
        ('[{"model": "gpt-4o-mini"}]', "llm.fallbacks", "[0] openai model 'gpt-4o-mini'"),
        ('{"model": "m"}', "llm.fallbacks", "tuple"),
    ],
)
def test_a_wrong_fallback_setting_names_the_field(
    monkeypatch: pytest.MonkeyPatch, environ: str, field: str, words: str
) -> None:
    monkeypatch.setenv("SWITCHBOARD_LLM__FALLBACKS", environ)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert f"  {field}: " in message and words in message
    assert "SWITCHBOARD_LLM__FALLBACKS" in message


def test_an_agent_profile_has_its_own_fallbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_LLM__FALLBACKS", '[{"model": "gpt-4o"}]')
    monkeypatch.setenv(
        "SWITCHBOARD_AGENTS",
        '{"coder": {"fallbacks": [{"provider": "anthropic", "model": "claude-x"}]},'
        ' "plain": {"fallbacks": []}, "same": {}}',
    )
    settings = load_settings()
    models = {
        name: [f.model for f in agent_settings(settings, name).llm.fallbacks]
        for name in ("main", "coder", "plain", "same")
    }
    assert models == {"main": ["gpt-4o"], "coder": ["claude-x"], "plain": [], "same": ["gpt-4o"]}
    monkeypatch.setenv("SWITCHBOARD_AGENTS", '{"coder": {"fallbacks": [{"model": ""}]}}')
    with pytest.raises(ConfigError, match=r"agents\.coder\.fallbacks\.0\.model"):
        load_settings()


async def test_doctor_asks_every_model(
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    backup_llm: FakeLLM,
    capsys: pytest.CaptureFixture[str],
) -> None:
    backup_llm.queue(error(401, "invalid x-api-key"))
    settings = make_settings(
        llm={
            "fallbacks": [
                {
                    "provider": "anthropic",
                    "model": "claude-x",
                    "base_url": backup_llm.anthropic_url,
                },
                {"provider": "anthropic", "model": "claude-y"},  # no key anywhere
            ]
        },
        agents={"coder": {"model": "coder-model", "fallbacks": []}},
    )
    assert await run_doctor(settings) == 1
    out = capsys.readouterr().out
    lines = {
        line[7:].split("  ", 1)[0].strip(): line for line in out.splitlines() if line[:1] == "["
    }
    assert lines["llm"].startswith("[ok  ]") and "fake-model" in lines["llm"]
    assert lines["llm fallback 1"].startswith("[FAIL]")
    assert (
        f"{backup_llm.anthropic_url} wants an API key and none is configured (HTTP 401)"
        in (lines["llm fallback 1"])
    )
    assert lines["llm fallback 2"].startswith("[FAIL]") and lines["llm fallback 2"].endswith(
        "no API key for anthropic model claude-y: set llm.fallbacks[1].api_key (or "
        "ANTHROPIC_API_KEY), or its base_url for a local server."
    )
    assert (
        lines["llm agent coder"].startswith("[ok  ]") and "coder-model" in lines["llm agent coder"]
    )
    assert sorted(r.body["model"] for r in fake_llm.requests) == ["coder-model", "fake-model"]
    assert [r.body["model"] for r in backup_llm.requests] == ["claude-x"]


async def test_a_failing_fallbacks_fix_names_its_own_entry(
    make_settings: SettingsFactory, fake_llm: FakeLLM, backup_llm: FakeLLM
) -> None:
    fake_llm.queue(error(503), error(503))
    backup_llm.queue(error(404, "The model `backup-model` does not exist", code="model_not_found"))
    closed = await FakeLLM().start()
    dead_url = closed.openai_url
    await closed.stop()  # nothing listens there any more
    fallbacks = [
        {"model": "backup-model", "base_url": backup_llm.openai_url, "api_key": "sk-b"},
        {"model": "gone-model", "base_url": dead_url, "api_key": "sk-c"},
    ]
    settings = make_settings(llm={"fallbacks": fallbacks, "fallback_cooldown_seconds": 0})
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("hello")
        await channel.wait_for(1)
        await gateway.wait_idle()
    [notice] = channel.texts()
    assert f"{backup_llm.openai_url} does not know the model 'backup-model'" in notice
    # the last model's fix, which names its entry of the list, not the primary's settings
    assert "correct llm.fallbacks[1].base_url (that entry of SWITCHBOARD_LLM__FALLBACKS" in notice
    assert "SWITCHBOARD_LLM__BASE_URL" not in notice
    assert "SWITCHBOARD_LLM__MODEL" not in notice


def test_a_fallback_errors_name_the_entry_to_fix() -> None:
    at = Endpoint(
        "openai", "http://127.0.0.1:9/v1", "m", 5, has_key=True, setting="llm.fallbacks[2]"
    )
    fixes = [
        refused_key(at, 401, "no").fix,
        refused_key(at, 403, "no").fix,
        not_found(at, "no such model", "model_not_found").fix,
        not_found(replace(at, base_url="http://127.0.0.1:9"), "").fix,
        not_configured("anthropic", "llm.fallbacks[2]").fix,
    ]
    assert "llm.fallbacks[2].api_key" in fixes[0] and "llm.fallbacks[2].model" in fixes[1]
    assert "Check llm.fallbacks[2].model" in fixes[2]
    assert "Set llm.fallbacks[2].base_url (" in fixes[3] and fixes[3].endswith(
        "to http://127.0.0.1:9/v1."
    )
    assert "llm.fallbacks[2].api_key" in fixes[4] and "llm.fallbacks[2].base_url" in fixes[4]
    assert not any(
        "SWITCHBOARD_LLM__" in f.replace("SWITCHBOARD_LLM__FALLBACKS", "") for f in fixes
    )
    agent = replace(at, setting="agents.coder.fallbacks[0]")
    assert refused_key(agent, 401, "no").fix.startswith(
        "Check agents.coder.fallbacks[0].api_key or OPENAI_API_KEY;"
    )


@pytest.mark.parametrize(
    ("profile", "words"),
    [
        (
            '{"coder": {"model": "claude-x", "provider": "anthropic",'
            ' "fallbacks": [{"provider": "anthropic", "model": "claude-x"}]}}',
            "[0] anthropic model 'claude-x' at https://api.anthropic.com is already the primary",
        ),
        (  # the agent inherits llm's model and server
            '{"coder": {"fallbacks": [{"model": "gpt-4o"}, {"model": "gpt-4o-mini"}]}}',
            "[1] openai model 'gpt-4o-mini' at https://api.openai.com/v1 is already the primary",
        ),
        (
            '{"coder": {"model": "m1", "fallbacks": [{"model": "m2"}, {"model": "m2"}]}}',
            "[1] openai model 'm2' at https://api.openai.com/v1 is already an earlier fallback",
        ),
    ],
)
def test_an_agents_own_fallbacks_must_not_repeat_its_model(
    monkeypatch: pytest.MonkeyPatch, profile: str, words: str
) -> None:
    monkeypatch.setenv("SWITCHBOARD_AGENTS", profile)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert "\n  agents.coder.fallbacks: " in message and words in message
    assert "set by" not in message  # no made-up variable for a check across sections


def test_an_agents_fallback_may_be_the_main_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "SWITCHBOARD_AGENTS",
        '{"coder": {"model": "coder-x", "fallbacks": [{"model": "gpt-4o-mini"}]}}',
    )
    settings = load_settings()
    assert [f.model for f in settings.agents["coder"].fallbacks or ()] == ["gpt-4o-mini"]
