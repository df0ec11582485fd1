"""The settings as a form (gateway/config/reference/form.py): what a posted form changes, as the
settings page and ``POST /api/settings`` take it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.config.reference.form import MASK, form_edits, settings_form
from gateway.config.settings import Settings
from gateway.config.sources import describe
from gateway.config.toml.config_file import UNSET


def edits_of(settings: Settings, **values: str) -> tuple[dict[str, object], dict[str, str]]:
    posted = {key.replace("__", "."): value for key, value in values.items()}
    return form_edits(settings, describe(settings.home), posted)


def test_a_form_posted_whole_changes_only_what_was_changed(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path,
        llm={"api_key": "sk-form-test-1234", "fallbacks": [{"model": "m2", "api_key": "sk-fb-1"}]},
        telegram={"allow_from": ["1", "2"]},
    )
    shown = {f.key: f.value for s in settings_form(settings, describe(tmp_path)) for f in s.fields}
    edits, errors = form_edits(settings, describe(tmp_path), shown | {"llm.model": "other"})
    assert (edits, errors) == ({"llm.model": "other"}, {})
    assert shown["llm.api_key"] == "" and "sk-fb-1" not in shown["llm.fallbacks"]
    assert json.loads(shown["llm.fallbacks"])[0]["api_key"] == MASK


def test_lists_switches_numbers_and_emptied_fields(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, llm={"temperature": 0.5})
    edits, errors = edits_of(
        settings,
        telegram__allow_from="1, 2,3",
        discord__allow_from='["4", "5,6"]',
        telegram__streaming="false",  # unset until now: false is a change
        agent__reflection="on",  # true already
        llm__max_tokens="2048",
        llm__timeout_seconds="120",  # 120.0 already
        llm__temperature="",  # back to the provider's default
    )
    assert errors == {}
    assert edits == {
        "telegram.allow_from": ["1", "2", "3"],
        "discord.allow_from": ["4", "5,6"],
        "telegram.streaming": False,
        "llm.max_tokens": 2048,
        "llm.temperature": UNSET,
    }


@pytest.mark.parametrize(
    ("key", "text", "why"),
    [
        ("llm.provider", "mistral", "'openai' or 'anthropic'"),
        ("llm.max_tokens", "many", "valid integer"),
        ("agent.reflection", "maybe", "not true or false"),
        ("llm.fallbacks", "[{", "not valid JSON"),
        ("home", "/elsewhere", "SWITCHBOARD_HOME"),
        ("llm.modle", "x", "unknown key"),
    ],
)
def test_a_value_of_the_wrong_kind_is_refused_naming_its_key(
    tmp_path: Path, key: str, text: str, why: str
) -> None:
    edits, errors = form_edits(Settings(home=tmp_path), describe(tmp_path), {key: text})
    assert edits == {} and why in errors[key]


def test_secrets_are_kept_unless_typed_again(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path,
        llm={"api_key": "sk-form-test-1234", "fallbacks": [{"model": "m2", "api_key": "sk-fb-1"}]},
    )
    masked = json.dumps([{"model": "m3", "api_key": MASK}])
    edits, errors = edits_of(settings, llm__api_key=MASK, web__token="", llm__fallbacks=masked)
    assert edits == {} and "type the secret values again" in errors["llm.fallbacks"]
    edits, errors = edits_of(settings, llm__api_key="sk-new-key-5678")
    assert (edits, errors) == ({"llm.api_key": "sk-new-key-5678"}, {})


def test_a_key_the_environment_sets_is_not_shadowed_by_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SWITCHBOARD_LLM__MODEL", "from-env")
    settings = Settings(home=tmp_path)
    edits, errors = edits_of(settings, llm__model="other")
    assert edits == {}
    assert errors["llm.model"] == (
        "set by environment variable SWITCHBOARD_LLM__MODEL, which wins over config.toml: "
        "change it there"
    )
