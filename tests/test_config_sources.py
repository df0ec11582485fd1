"""Where settings come from (environment, ``$SWITCHBOARD_HOME/.env``, secret files,
config.toml), how a typo is explained, and ``switchboard config``: through the real CLI."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from gateway.cli.doctor.files import secrets_in_config
from gateway.config.settings import load_settings
from gateway.core.errors import ConfigError
from tests.fakes.llm import FakeLLM
from tests.test_cli import cli_env, switchboard

pytestmark = pytest.mark.slow


def home_with(tmp_path: Path, config: str) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(config)
    return home


async def test_a_typo_names_the_file_line_and_the_key_meant(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = home_with(tmp_path, '# mine\n[llm]\nmodel = "a"\nmodle = "x"\n')
    code, _, err = await switchboard("chat", "-m", "hi", env=cli_env(home, fake_llm))
    assert code == 2
    assert (
        f"llm.modle: unknown key; did you mean `model`? (set by {home / 'config.toml'} line 4)"
        in err
    )
    assert "Extra inputs" not in err


async def test_a_typo_in_the_environment_names_the_variable(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    env = cli_env(tmp_path / "home", fake_llm, SWITCHBOARD_AGENT__MAX_ITERATION="3")
    code, _, err = await switchboard("chat", "-m", "hi", env=env)
    assert code == 2
    assert (
        "agent.max_iteration: unknown key; did you mean `max_iterations`? "
        "(set by environment variable SWITCHBOARD_AGENT__MAX_ITERATION)"
    ) in err


async def test_a_key_in_the_wrong_table_says_where_it_belongs(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = home_with(tmp_path, '[llm]\nname = "Bot"\n')
    code, _, err = await switchboard("chat", "-m", "hi", env=cli_env(home, fake_llm))
    assert code == 2
    assert "llm.name: unknown key; `name` belongs in [agent]" in err


async def test_doctor_reports_a_typo_as_one_failed_check_and_checks_the_rest(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = home_with(tmp_path, '[llm]\nmodle = "x"\n')
    code, out, err = await switchboard("doctor", env=cli_env(home, fake_llm))
    assert code == 1, err
    lines = out.splitlines()
    assert lines[0].startswith("[FAIL] config ")
    assert "llm.modle: unknown key; did you mean `model`?" in lines[0]
    # it went on and asked the model, but not one anybody configured: no [ok] for it
    [llm] = [line for line in lines if line.startswith("[WARN] llm  ")]
    assert llm.endswith(
        "answered; but llm.modle is not valid, so this asked what the rest of [llm] names, "
        "with defaults in its place: maybe not the model you meant"
    )
    assert any(line.startswith("[FAIL] workspace ") for line in lines)  # never onboarded
    # config.toml written by hand (0644: readable by others), and running as root
    warnings = 3 if os.geteuid() == 0 else 2
    assert any("config.toml is mode 644" in line for line in lines)
    warnings += 1  # the model's
    assert out.rstrip().endswith(f"2 problems found, {warnings} warning{'s' * (warnings > 1)}.")


@pytest.mark.parametrize("name", ["config.toml", ".env"])
async def test_a_byte_that_is_not_utf8_is_named_with_its_file_and_line(
    tmp_path: Path, fake_llm: FakeLLM, name: str
) -> None:
    """A note saved by a Latin-1 editor: every command says which file, line and byte, and
    `doctor` checks the rest (before: a UnicodeDecodeError traceback from each)."""
    home = home_with(tmp_path, '[llm]\nmodel = "a"\n')
    with (home / name).open("ab") as file:
        file.write(b"# owner: Ren\xe9e\n")
    line = 3 if name == "config.toml" else 1
    said = f"{home / name} is not UTF-8 text: byte 0xe9 at line {line}, column 13"
    env = cli_env(home, fake_llm)
    for command in (("run",), ("config", "show"), ("backup", str(tmp_path / "b"))):
        code, _, err = await switchboard(*command, env=env)
        assert code == 2 and said in err and "Traceback" not in err, (command, err)
    code, _, err = await switchboard("status", env=env)  # says so, and shows what it can
    assert code == 0 and said in err.splitlines()[0] and "Traceback" not in err, err
    code, out, err = await switchboard("upgrade", "--check", env=env)
    assert code == 0 and f"configuration: {said}" in out and "Traceback" not in err, out + err
    code, out, err = await switchboard("doctor", env=env)
    assert code == 1 and "Traceback" not in err, err
    lines = out.splitlines()
    assert lines[0].startswith(f"[FAIL] config        {said}"), lines[0]
    assert any(line.startswith("[FAIL] workspace ") for line in lines)  # it went on


async def test_a_dotenv_line_that_does_not_parse_is_named_with_its_file_and_line(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """A quote left open in .env: every command names the file, the line and its variable
    (not its value), and `doctor` checks the rest with the lines that parse (before: the
    line was dropped, the setting silently not set, and python-dotenv warned three times
    without naming the file)."""
    home = home_with(tmp_path, '[llm]\nmodel = "a"\n')
    dotenv = home / ".env"
    dotenv.write_text('SWITCHBOARD_LLM__MAX_TOKENS=500\nSWITCHBOARD_LLM__MODEL="gpt-4o\n')
    said = (
        f"{dotenv} line 2: the value of SWITCHBOARD_LLM__MODEL cannot be read (a quote that "
        "is not closed, or text after the closing quote); correct that line or delete it"
    )
    env = cli_env(home, fake_llm)
    code, _, err = await switchboard("cron", "list", env=env)
    assert code == 2 and err == f"switchboard: {said}\n"
    code, out, err = await switchboard("doctor", "--json", env=env)
    assert code == 1 and "python-dotenv" not in err, err
    [config] = [c for c in json.loads(out)["checks"] if c["name"] == "config"]
    assert config == {
        "name": "config",
        "status": "fail",
        "message": f"{said} (other checks use the valid settings)",
    }


def test_a_dotenv_line_without_a_name_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text("SWITCHBOARD_LLM__MODEL=m\nsk-pasted-key-without-a-name here\n")
    monkeypatch.setenv("SWITCHBOARD_HOME", str(home))
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert str(refused.value) == (
        f"{home / '.env'} line 2 is not a NAME=value line; correct it, delete it, or make it "
        "a comment (#)"
    )


async def test_invalid_toml_is_fixed_in_an_editor_and_config_set_names_the_file(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """`config show` pointed at `config set`, which then failed on the same file without
    naming it ("Unexpected end of file at line 3 col 0")."""
    home = home_with(tmp_path, '[telegram]\nallow_from = ["42","43')
    config = home / "config.toml"
    env = cli_env(home, fake_llm)
    code, _, err = await switchboard("config", "show", env=env)
    assert code == 2 and f"{config} is not valid TOML" in err
    assert f"fix the above in an editor: $EDITOR {config}" in err and "config set" not in err
    before = config.read_bytes()
    code, _, err = await switchboard("config", "set", "agent.reflection", "false", env=env)
    assert code == 1 and f"not changed, {config} is not valid TOML" in err, err
    assert config.read_bytes() == before


def test_dotenv_and_secret_files_are_sources_behind_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / "secrets").mkdir(parents=True)
    (home / ".env").write_text(
        "SWITCHBOARD_LLM__MODEL=from-dotenv\nSWITCHBOARD_AGENT__NAME=Dot\nOTHER_TOOL=x\n"
    )
    (home / "secrets" / "SWITCHBOARD_TELEGRAM__TOKEN").write_text("123:from-secret-file\n")
    (home / "config.toml").write_text('[llm]\nmodel = "from-toml"\n[agent]\nname = "Toml"\n')
    monkeypatch.setenv("SWITCHBOARD_AGENT__NAME", "Env")
    settings = load_settings()
    assert settings.llm.model == "from-dotenv"  # .env wins over config.toml
    assert settings.agent.name == "Env"  # the environment wins over .env
    assert settings.telegram.token is not None
    assert settings.telegram.token.get_secret_value() == "123:from-secret-file"


def test_dotenv_holds_the_api_key_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text("OPENAI_API_KEY=sk-dotenv-fallback-1234\n")
    key = load_settings().llm.resolved_api_key()
    assert key is not None and key.get_secret_value() == "sk-dotenv-fallback-1234"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-environment-5678")
    key = load_settings().llm.resolved_api_key()
    assert key is not None and key.get_secret_value() == "sk-environment-5678"


def test_a_secrets_directory_can_be_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secrets = tmp_path / "run-secrets"
    secrets.mkdir()
    (secrets / "switchboard_llm__api_key").write_text("sk-docker-secret-0000")
    monkeypatch.setenv("SWITCHBOARD_SECRETS_DIR", str(secrets))
    key = load_settings().llm.api_key
    assert key is not None and key.get_secret_value() == "sk-docker-secret-0000"


def test_a_typo_in_dotenv_names_its_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text("# keys\nSWITCHBOARD_LLM__MODLE=x\n")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert f"(set by {home / '.env'} line 2)" in str(caught.value)


async def test_json_log_lines(tmp_path: Path, fake_llm: FakeLLM) -> None:
    env = cli_env(tmp_path / "home", fake_llm, SWITCHBOARD_LOGGING__FORMAT="json")
    code, _, err = await switchboard("chat", "-m", "hello", env=env)
    assert code == 0, err
    lines = (tmp_path / "home" / "data" / "logs" / "switchboard.log").read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    assert {"time", "level", "logger", "message"} <= set(entries[0])
    assert any("ready" in e["message"] and e["level"] == "info" for e in entries)


# -- switchboard config -------------------------------------------------------------------


async def test_config_set_keeps_comments_and_get_reads_it_back(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    await switchboard("onboard", env=env)
    before = (home / "config.toml").read_text()
    code, out, err = await switchboard("config", "set", "llm.max_tokens", "2000", env=env)
    assert (code, out) == (
        0,
        f"llm.max_tokens = 2000  ({home / 'config.toml'})\n"
        "no gateway is running: it takes effect when one starts\n",
    ), err
    after = (home / "config.toml").read_text()
    assert [line for line in before.splitlines() if line.startswith("#")] == [
        line for line in after.splitlines() if line.startswith("#")
    ]
    assert "max_tokens = 2000\n" in after
    assert (await switchboard("config", "get", "llm.max_tokens", env=env))[1] == "2000\n"
    code, out, _ = await switchboard("config", "path", env=env)
    assert out == f"{home / 'config.toml'}\n"


async def test_config_set_keeps_a_secret_in_dotenv_never_in_config_toml(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    config, dotenv = home / "config.toml", home / ".env"
    code, out, err = await switchboard(
        "config", "set", "voice.api_key", "sk-voice-0123456", env=env
    )
    assert (code, out.splitlines()[0]) == (
        0,
        f'voice.api_key = "**********"  ({dotenv} as SWITCHBOARD_VOICE__API_KEY: a secret, '
        "kept out of config.toml)",
    ), err
    assert "sk-voice" not in out + err + config.read_text()
    assert dotenv.read_text() == "SWITCHBOARD_VOICE__API_KEY='sk-voice-0123456'\n"
    assert stat.S_IMODE(dotenv.stat().st_mode) == 0o600
    # the owner's own lines stay; a secret an older `config set` left in config.toml moves
    with dotenv.open("a") as lines:
        lines.write("# mine\nOPENAI_API_KEY='sk-other-0000000'\n")
        lines.write("SWITCHBOARD_TELEGRAM__TOKEN='111:replaced-0000000000'\n")
    config.write_text(config.read_text() + '\n[telegram]\ntoken = "111:in-the-file-000000"\n')
    code, out, err = await switchboard(
        "config", "set", "telegram.token", "222:new-0000000", env=env
    )
    assert code == 0, err
    assert "moved: config.toml no longer holds telegram.token" in out
    assert "222:new" not in out + err and "111:in-the-file" not in config.read_text()
    assert dotenv.read_text() == (
        "SWITCHBOARD_VOICE__API_KEY='sk-voice-0123456'\n"
        "# mine\nOPENAI_API_KEY='sk-other-0000000'\n"
        "SWITCHBOARD_TELEGRAM__TOKEN='222:new-0000000'\n"
    )
    settings = load_settings(home=home)
    assert settings.telegram.token is not None
    assert settings.telegram.token.get_secret_value() == "222:new-0000000"
    assert secrets_in_config(settings) == []  # nothing for doctor to warn about
    # a setting that is no secret still goes to config.toml
    code, out, err = await switchboard("config", "set", "voice.model", "whisper-2", env=env)
    assert code == 0 and f"({config})" in out and 'model = "whisper-2"' in config.read_text()
    assert "whisper" not in dotenv.read_text()


async def test_config_set_refuses_what_would_not_start(tmp_path: Path, fake_llm: FakeLLM) -> None:
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    await switchboard("onboard", env=env)
    before = (home / "config.toml").read_text()
    code, _, err = await switchboard("config", "set", "llm.max_tokens", "5", env=env)
    assert code == 1
    assert "not changed" in err and "llm.max_tokens: Input should be greater than" in err
    # the line it would have written is in no file: the command itself is named
    assert "(set by this `switchboard config set`)" in err and "config.toml line" not in err
    code, _, err = await switchboard("config", "set", "llm.model", '""', env=env)
    assert code == 1 and "llm.model: String should have at least 1 character" in err
    code, _, err = await switchboard("config", "set", "llm.modle", "x", env=env)
    assert code == 1 and "unknown key 'llm.modle'; did you mean `model`?" in err
    assert (home / "config.toml").read_text() == before
    # a variable that wins over the file does not let a bad value into it: the first
    # start without that variable would refuse the file
    env["SWITCHBOARD_LLM__MAX_TOKENS"] = "4096"
    code, _, err = await switchboard("config", "set", "llm.max_tokens", "5", env=env)
    assert code == 1 and "llm.max_tokens: Input should be greater than" in err
    assert (home / "config.toml").read_text() == before


async def test_a_refused_config_set_names_lines_of_the_file_as_it_stays(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    home.mkdir(parents=True)
    config = home / "config.toml"
    config.write_text(
        "[llm]\n"
        "max_tokens = 2000\n"
        "\n"
        "[[llm.fallbacks]]\n"
        'model = "gpt-4o"\n'
        f'base_url = "{fake_llm.openai_url}"\n'
    )
    code, _, err = await switchboard("config", "set", "llm.model", "gpt-4o", env=env)
    assert code == 1, err
    header = config.read_text().splitlines().index("[[llm.fallbacks]]") + 1
    assert f"{config} line {header}" in err  # where that table is, not where it would be


async def test_config_show_masks_secrets(tmp_path: Path, fake_llm: FakeLLM) -> None:
    env = cli_env(tmp_path / "home", fake_llm)
    code, out, _ = await switchboard("config", "show", "--json", env=env)
    shown = json.loads(out)
    assert shown["llm"]["api_key"] == "**********"
    assert shown["llm"]["base_url"] == fake_llm.openai_url
    assert "sk-test-cli" not in out
    code, out, _ = await switchboard("config", "show", env=env)
    assert code == 0 and "[llm]" in out and 'api_key = "**********"' in out
