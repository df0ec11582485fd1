"""Settings that moved are never silently ignored (issue 52): a renamed key in config.toml
is moved at start with its comments and a line in the log, or the start is refused naming
the replacement; ``SWITCHBOARD_*`` variables that name no setting are reported."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gateway.cli.doctor.command import config_checks
from gateway.config.partial import load_what_is_valid
from gateway.config.settings import load_settings
from gateway.core.errors import ConfigError
from tests.fakes.llm import FakeLLM
from tests.test_cli import cli_env, switchboard

CONFIG = """\
# written by Dana
[heartbeat]
# every quarter of an hour
interval_seconds = 900
timezone = "Europe/Lisbon"  # where I live

[user]
# nothing here yet
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in (
        "SWITCHBOARD_HOME",
        "SWITCHBOARD_HEARTBEAT__TIMEZONE",
        "SWITCHBOARD_USER__TIMEZONE",
    ):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "config.toml").write_text(CONFIG, encoding="utf-8")
    return tmp_path


def test_a_renamed_key_is_moved_in_config_toml_keeping_its_comments(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        settings = load_settings(home=home)
    assert settings.user.timezone == "Europe/Lisbon"
    text = (home / "config.toml").read_text(encoding="utf-8")
    assert "[heartbeat]" in text and "timezone" not in text.split("[user]")[0]
    assert 'timezone = "Europe/Lisbon" # where I live' in text.split("[user]")[1]
    for comment in ("# written by Dana", "# every quarter of an hour", "# nothing here yet"):
        assert comment in text
    assert "heartbeat.timezone was renamed to user.timezone; moved" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        load_settings(home=home)  # moved once: nothing more to say
    assert "renamed" not in caplog.text


def test_the_comment_above_a_renamed_key_goes_with_it(home: Path) -> None:
    """A comment line right above the key describes it: left behind, it described nothing
    under an empty [heartbeat]."""
    (home / "config.toml").write_text(
        '[heartbeat]\ninterval_seconds = 900\n\n# my zone, for quiet hours\ntimezone = "Asia/Tokyo"\n',
        encoding="utf-8",
    )
    load_settings(home=home)
    assert (home / "config.toml").read_text(encoding="utf-8") == (
        "[heartbeat]\ninterval_seconds = 900\n\n"
        '[user]\n# my zone, for quiet hours\ntimezone = "Asia/Tokyo"\n'
    )


def test_a_renamed_key_set_to_another_value_under_its_new_name_is_refused(home: Path) -> None:
    (home / "config.toml").write_text(CONFIG + 'timezone = "UTC"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="both are set, to different values"):
        load_settings(home=home)
    assert (home / "config.toml").read_text(encoding="utf-8").endswith('timezone = "UTC"\n')


def test_a_renamed_key_in_the_environment_is_refused_naming_its_replacement(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "config.toml").write_text("", encoding="utf-8")
    monkeypatch.setenv("SWITCHBOARD_HEARTBEAT__TIMEZONE", "Europe/Lisbon")
    with pytest.raises(ConfigError) as refused:
        load_settings(home=home)
    assert "environment variable SWITCHBOARD_HEARTBEAT__TIMEZONE" in str(refused.value)
    assert "set SWITCHBOARD_USER__TIMEZONE instead" in str(refused.value)


def test_doctor_reports_a_renamed_key_without_changing_the_file(home: Path) -> None:
    settings, problem = load_what_is_valid(home=home)
    assert problem is not None and "renamed to user.timezone" in str(problem)
    assert (home / "config.toml").read_text(encoding="utf-8") == CONFIG
    assert settings.heartbeat.interval_seconds == 900  # the rest is used
    # a warning, not a failure: the next start moves it, and doctor's exit code stays 0
    [check] = config_checks(settings, problem)
    assert check.status == "warn" and "it is moved there at the next start" in check.message


def test_a_variable_that_names_no_setting_is_reported(
    home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (home / "config.toml").write_text("", encoding="utf-8")
    monkeypatch.setenv("SWITCHBOARD_FOO__BAR", "1")
    monkeypatch.setenv("SWITCHBOARD_TELEGRAMM__TOKEN", "123:abc")
    with caplog.at_level(logging.WARNING):
        load_settings(home=home)
    assert "SWITCHBOARD_FOO__BAR names no setting (there is no `foo`): ignored" in caplog.text
    assert "did you mean SWITCHBOARD_TELEGRAM?" in caplog.text


def test_an_unknown_section_in_config_toml_is_refused_naming_it(home: Path) -> None:
    (home / "config.toml").write_text("[telegramm]\ntoken = '1'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"telegramm: unknown key; did you mean `telegram`\?"):
        load_settings(home=home)


async def test_upgrade_check_lists_what_moved_and_changes_nothing(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    env = cli_env(home, fake_llm, SWITCHBOARD_FOO__BAR="1")
    await switchboard("onboard", env=env)
    (home / "config.toml").write_text(CONFIG, encoding="utf-8")
    code, out, err = await switchboard("upgrade", "--check", env=env)
    assert code == 0, err
    assert (
        "heartbeat.timezone was renamed to user.timezone; it is moved there at the next start"
        in out
    )
    assert "SWITCHBOARD_FOO__BAR names no setting" in out
    assert "nothing was changed" in out
    assert (home / "config.toml").read_text(encoding="utf-8") == CONFIG


@pytest.mark.parametrize(
    "command",
    [("config", "get", "user.timezone"), ("config", "show"), ("api", "token", "list")],
    ids=" ".join,
)
async def test_every_command_but_doctor_and_upgrade_moves_a_renamed_key(
    tmp_path: Path, fake_llm: FakeLLM, command: tuple[str, ...]
) -> None:
    """`config get user.timezone` printed an empty line and `config show` refused the file,
    while `status` moved the key: now every command that reads the configuration moves it,
    but those that only report (`doctor`, `upgrade`)."""
    home = tmp_path / "home"
    home.mkdir()
    env = cli_env(home, fake_llm)
    config = home / "config.toml"
    config.write_text(CONFIG, encoding="utf-8")
    if command[1] == "get":  # (`upgrade --check`: test_upgrade_check_lists_what_moved...)
        await switchboard("doctor", env=env)
        assert config.read_text(encoding="utf-8") == CONFIG
    code, out, err = await switchboard(*command, env=env)
    assert code == 0, err
    assert (
        f"switchboard: {config}: heartbeat.timezone was renamed to user.timezone; moved "
        "(the file's other lines are as they were)\n"
    ) in err
    assert 'timezone = "Europe/Lisbon" # where I live' in config.read_text(encoding="utf-8")
    if command[1] == "get":
        assert out == "Europe/Lisbon\n"


@pytest.mark.parametrize("verbose", [(), ("-v",)], ids=["chat", "chat -v"])
async def test_a_move_and_a_variable_that_names_no_setting_reach_the_log_file(
    tmp_path: Path, fake_llm: FakeLLM, verbose: tuple[str, ...]
) -> None:
    """Both were said before logging was set up: on the standard error only, never in the
    log file that `switchboard logs` shows (where a service's owner looks)."""
    home = tmp_path / "home"
    env = cli_env(home, fake_llm, SWITCHBOARD_FOO__BAR="1")
    await switchboard("onboard", env=env)
    (home / "config.toml").write_text(CONFIG, encoding="utf-8")
    code, out, err = await switchboard(*verbose, "chat", "-m", "hi", env=env)
    assert (code, out) == (0, "echo: hi\n"), err
    log = (home / "data" / "logs" / "switchboard.log").read_text(encoding="utf-8")
    for said in (
        "heartbeat.timezone was renamed to user.timezone; moved",
        "SWITCHBOARD_FOO__BAR names no setting (there is no `foo`): ignored",
    ):
        assert f"WARNING gateway.config.toml.moves: {said}" in log or (
            f"WARNING gateway.config.toml.moves: {home / 'config.toml'}: {said}" in log
        )
        assert said in err  # and on the console, as before
