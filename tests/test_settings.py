"""Configuration: env over config.toml, secrets that never print, errors that name the field."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.config.settings import Settings, load_settings
from gateway.core.errors import ConfigError


def test_env_wins_over_config_toml_and_sections_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[llm]\nprovider = "anthropic"\nmodel = "from-file"\n')
    monkeypatch.setenv("SWITCHBOARD_HOME", str(home))
    monkeypatch.setenv("SWITCHBOARD_LLM__MODEL", "from-env")
    settings = load_settings()
    assert (settings.llm.provider, settings.llm.model) == ("anthropic", "from-env")
    assert settings.workspace_dir == home / "workspace"


def test_workspace_can_be_moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_WORKSPACE", str(tmp_path / "elsewhere"))
    assert load_settings().workspace_dir == tmp_path / "elsewhere"


def test_api_key_falls_back_to_the_provider_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-openai-env")
    settings = load_settings()
    key = settings.llm.resolved_api_key()
    assert key is not None and key.get_secret_value() == "sk-from-openai-env"


def test_secrets_never_print(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_LLM__API_KEY", "sk-very-secret-value")
    monkeypatch.setenv("SWITCHBOARD_TELEGRAM__TOKEN", "123456:telegram-secret")
    settings = load_settings()
    shown = f"{settings!r} {settings} {settings.model_dump()}"
    assert "sk-very-secret-value" not in shown and "telegram-secret" not in shown


@pytest.mark.parametrize(
    ("variable", "value", "field"),
    [
        ("SWITCHBOARD_LLM__PROVIDER", "gemini", "llm.provider"),
        ("SWITCHBOARD_LLM__CONTEXT_WINDOW", "-5", "llm.context_window"),
        ("SWITCHBOARD_LIMITS__MAX_CONCURRENT_TURNS", "lots", "limits.max_concurrent_turns"),
        ("SWITCHBOARD_LLM__MODLE", "x", "llm.modle"),
        ("SWITCHBOARD_VOICE__REPLY", "auto", "voice"),  # spoken replies with no speech server
        (
            "SWITCHBOARD_VOICE__MAX_MINUTES_PER_PERSON_PER_DAY",
            "-1",
            "voice.max_minutes_per_person_per_day",
        ),
        ("SWITCHBOARD_TOOLS__DOCUMENTS__MEMORY_MB", "16", "tools.documents.memory_mb"),
        # a check-in to no chat there is would wait in the outbox forever
        ("SWITCHBOARD_HEARTBEAT__TARGET", "nonsense", "heartbeat.target"),
        ("SWITCHBOARD_HEARTBEAT__TARGET", "telegrm:42", "heartbeat.target"),
    ],
)
def test_invalid_values_name_the_field(
    variable: str, value: str, field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.field == field
    assert field in str(caught.value)


@pytest.mark.parametrize(
    ("target", "whose"),
    [
        ("telegram:77", "a member's direct chat (telegram.allow_from)"),
        ("telegram:5", "an admin's direct chat (telegram.admins)"),
        ("telegram:-100", "a group (telegram.group_allow_from)"),
        ("telegram:88", 'the chat of people."telegram:88"'),
        ("telegram:99", "the chat of people.dana"),
    ],
)
def test_check_ins_are_refused_a_chat_config_says_is_someone_elses(
    target: str, whose: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check-in acts with the owner's rights and has the owner's memory in its prompt."""
    monkeypatch.setenv("SWITCHBOARD_TELEGRAM__OWNERS", "1")
    monkeypatch.setenv("SWITCHBOARD_TELEGRAM__ADMINS", "5")
    monkeypatch.setenv("SWITCHBOARD_TELEGRAM__ALLOW_FROM", "1,5,77")
    monkeypatch.setenv("SWITCHBOARD_TELEGRAM__GROUP_ALLOW_FROM", "-100")
    people = {"telegram:88": {"timezone": "Asia/Tokyo"}, "dana": {"ids": ["telegram:99"]}}
    monkeypatch.setenv("SWITCHBOARD_PEOPLE", json.dumps(people))
    monkeypatch.setenv("SWITCHBOARD_HEARTBEAT__TARGET", target)
    with pytest.raises(ConfigError, match=f"heartbeat.target: {target} is {re.escape(whose)}"):
        load_settings()
    for owners in ("telegram:1", "telegram:12345"):  # the owner's; unknown: checked at a tick
        monkeypatch.setenv("SWITCHBOARD_HEARTBEAT__TARGET", owners)
        assert load_settings().heartbeat.target == owners


@pytest.mark.parametrize(
    ("value", "expected"),
    [("123,456", ("123", "456")), ("123", ("123",)), ('["1", "2"]', ("1", "2")), ("", ())],
)
def test_id_lists_from_the_environment_take_the_forms_people_write(
    value: str, expected: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SWITCHBOARD_TELEGRAM__ALLOW_FROM", value)
    assert load_settings().telegram.allow_from == expected


def test_an_unparseable_environment_table_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SWITCHBOARD_AGENTS", "{not json")
    with pytest.raises(ConfigError, match="SWITCHBOARD_AGENTS") as caught:
        load_settings()
    assert caught.value.field == "agents"


def test_broken_toml_is_reported_with_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[llm\nprovider=")
    monkeypatch.setenv("SWITCHBOARD_HOME", str(home))
    with pytest.raises(ConfigError, match=r"config\.toml is not valid TOML"):
        load_settings()


def test_the_configuration_reference_is_up_to_date() -> None:
    from pathlib import Path

    from gateway.config.reference.doc import render

    doc = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
    assert doc.read_text(encoding="utf-8") == render(), (
        "run: python -m gateway.config.reference.doc > docs/configuration.md"
    )


def test_every_setting_of_the_reference_says_what_it_is_and_marks_its_secrets() -> None:
    """A section without a description (or with another section's), a key without a
    meaning, a secret inside a per-name table or a list not marked *(secret)* (README: the
    secrets are the keys the reference marks so; `config set` keeps them in .env)."""
    from gateway.config.env_file import holds_secret
    from gateway.config.reference.doc import item_tables, key_docs

    for section in key_docs():
        assert section.doc, f"[{section.title}] has no description"
        if section.doc.startswith("``["):
            assert section.doc.startswith(f"``[{section.title}]``"), section.doc
        for key in section.keys:
            assert key.meaning, f"{key.key} has no meaning"
    for table in item_tables():
        for name, _, meaning in table.rows():
            secret = holds_secret(table.model.model_fields[name].annotation)
            assert meaning.removesuffix(" (secret)"), f"{table.title} {name} has no meaning"
            assert meaning.endswith(" (secret)") == secret, f"{table.title} {name}: {meaning}"


@pytest.mark.parametrize(
    ("form", "variable", "value", "read"),
    [
        (
            "SWITCHBOARD_AGENTS__<NAME>__<KEY>",
            "SWITCHBOARD_AGENTS__WORK__MODEL",
            "gpt-work",
            lambda s: s.agents["work"].model,
        ),
        (
            "SWITCHBOARD_HOOKS__<NAME>__<KEY>",
            "SWITCHBOARD_HOOKS__CI__PROMPT",
            "CI says: {payload}",
            lambda s: s.hooks["ci"].prompt,
        ),
        (
            "SWITCHBOARD_MCP__SERVERS__<NAME>__<KEY>",
            "SWITCHBOARD_MCP__SERVERS__NOTES__URL",
            "https://mcp.example.com/mcp",
            lambda s: s.mcp.servers["notes"].url,
        ),
        (
            "SWITCHBOARD_PEOPLE__<NAME>__<KEY>",
            "SWITCHBOARD_PEOPLE__ANN__QUIET_HOURS",
            "22:00-07:00",
            lambda s: s.people["ann"].quiet_hours,
        ),
    ],
)
def test_a_per_name_table_takes_the_variables_the_reference_names(  # noqa: PLR0917
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    form: str,
    variable: str,
    value: str,
    read: Callable[[Settings], object],
) -> None:
    from gateway.config.reference.doc import item_tables

    assert any(form in table.env for table in item_tables())
    monkeypatch.setenv("SWITCHBOARD_HOME", str(tmp_path))
    monkeypatch.setenv("SWITCHBOARD_HOOKS__CI__SECRET", "hook-secret-0123456789abcdef")
    monkeypatch.setenv("SWITCHBOARD_HOOKS__CI__DELIVER_TO", "telegram:1")
    monkeypatch.setenv("SWITCHBOARD_PEOPLE__ANN__IDS", '["telegram:1"]')
    monkeypatch.setenv(variable, value)
    assert read(load_settings()) == value


def test_the_configuration_reference_shows_the_defaults_whatever_is_configured_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regenerated on a machine that has a configured model, hooks and API tokens (in
    config.toml and in the environment), the reference is the same: the defaults only."""
    from gateway.config.reference.doc import render

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[llm]\nmodel = "my-model"\ncontext_window = 4096\n\n'
        '[hooks.ci]\nsecret = "hook-secret-0123456789abcdef"\n\n'
        '[api]\nenabled = true\n\n[[api.tokens]]\nname = "script"\n'
        'token = "api-token-0123456789abcdef"\n'
    )
    monkeypatch.setenv("SWITCHBOARD_HOME", str(home))
    monkeypatch.setenv("SWITCHBOARD_AGENT__MAX_ITERATIONS", "3")
    monkeypatch.setenv("HOME", str(tmp_path))
    doc = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
    assert render() == doc.read_text(encoding="utf-8")
