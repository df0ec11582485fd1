"""Turning the API on as docs/connect.md says: ``switchboard api token add`` makes a token,
prints it once and keeps it in ``.env``; ``config set`` takes lists as JSON and never
repeats a secret. Through the real CLI, and a real gateway that accepts the token."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import aiohttp
import pytest

from gateway.config.settings import load_settings
from tests.fakes.llm import FakeLLM
from tests.test_cli import cli_env, switchboard
from tests.test_cli_commands import running_gateway

pytestmark = pytest.mark.slow


async def test_the_first_hour_path_turns_the_api_on(tmp_path: Path, fake_llm: FakeLLM) -> None:
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    code, _, err = await switchboard("config", "set", "api.enabled", "true", env=env)
    assert code == 1
    assert "`switchboard api token add NAME --role owner` creates one" in err
    code, token_line, err = await switchboard(
        "api", "token", "add", "laptop", "--role", "owner", env=env
    )
    assert code == 0, err
    token = token_line.strip()
    assert token_line == f"{token}\n" and len(token) >= 40  # alone on stdout: $(...) takes it
    assert "It is shown this once" in err and token not in err
    assert "config set api.enabled true` turns the API on" in err
    dotenv = home / ".env"
    assert stat.S_IMODE(dotenv.stat().st_mode) == 0o600 and token in dotenv.read_text()
    code, out, err = await switchboard("config", "set", "api.enabled", "true", env=env)
    assert code == 0, err
    assert token not in (home / "config.toml").read_text()
    code, out, _ = await switchboard("api", "token", "list", env=env)
    assert out == "laptop  owner\n"
    _, shown, _ = await switchboard("config", "show", env=env)
    assert "laptop" in shown and token not in shown
    async with running_gateway(env) as url, aiohttp.ClientSession() as http:
        async with http.get(f"{url}v1/models", headers={"Authorization": f"Bearer {token}"}) as r:
            assert r.status == 200
            assert [m["id"] for m in (await r.json())["data"]] == ["main"]
        async with http.get(f"{url}v1/models", headers={"Authorization": "Bearer guess"}) as r:
            assert r.status == 401
    code, _, err = await switchboard("api", "token", "remove", "laptop", env=env)
    assert code == 1  # the API is on: the gateway would refuse to start without a token
    assert "`switchboard config set api.enabled false` first" in err
    assert token in dotenv.read_text()


async def test_add_list_and_remove(tmp_path: Path, fake_llm: FakeLLM) -> None:
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    _, first, _ = await switchboard("api", "token", "add", "laptop", "--role", "owner", env=env)
    _, second, _ = await switchboard("api", "token", "add", "open-webui", env=env)
    assert first != second
    code, _, err = await switchboard("api", "token", "add", "laptop", env=env)
    assert code == 1 and "there is a token named 'laptop' already" in err
    code, _, err = await switchboard("api", "token", "add", "My Laptop", env=env)
    assert code == 1 and "up to 32 lower-case letters, digits, - and _" in err
    code, out, _ = await switchboard("api", "token", "list", "--json", env=env)
    assert json.loads(out) == [
        {"name": "laptop", "role": "owner"},
        {"name": "open-webui", "role": "member"},  # the least a client gets by default
    ]
    code, out, err = await switchboard("api", "token", "remove", "laptop", env=env)
    assert code == 0, err
    assert "removed  API token 'laptop'" in out
    tokens = load_settings(home=home).api.tokens
    assert [(t.name, t.token.get_secret_value()) for t in tokens] == [
        ("open-webui", second.strip())
    ]
    code, _, err = await switchboard("api", "token", "remove", "laptop", env=env)
    assert code == 1 and "no token is named 'laptop' (the tokens: open-webui)" in err


async def test_tokens_written_in_config_toml_move_to_dotenv(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    written = "a-token-written-by-hand-0123"
    (home / "config.toml").write_text(
        "# my settings\n[api]\nenabled = true\n"
        f'tokens = [{{ name = "scripts", token = "{written}", role = "member" }}]\n'
    )
    env = cli_env(home, fake_llm)
    code, out, err = await switchboard("api", "token", "add", "laptop", "--role", "owner", env=env)
    assert code == 0, err
    assert "moved    the tokens of config.toml's [api] there too" in err
    config = (home / "config.toml").read_text()
    assert config.startswith("# my settings\n[api]\nenabled = true\n") and written not in config
    tokens = {t.name: t.token.get_secret_value() for t in load_settings(home=home).api.tokens}
    assert tokens == {"scripts": written, "laptop": out.strip()}
    assert "no gateway is running" in err


async def test_tokens_set_by_the_environment_are_left_to_it(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    tokens = json.dumps([{"name": "ci", "token": "a-token-from-the-unit-0123"}])
    env = cli_env(home, fake_llm, SWITCHBOARD_API__TOKENS=tokens)
    code, out, err = await switchboard("api", "token", "add", "laptop", env=env)
    assert (code, out) == (1, "")
    assert "set by environment variable SWITCHBOARD_API__TOKENS" in err
    assert not (home / ".env").exists()
    code, out, _ = await switchboard("api", "token", "list", env=env)
    assert out.startswith("ci  member\n")


async def test_config_set_takes_json_and_never_repeats_a_secret(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    token = "a-token-given-as-json-0123"
    value = json.dumps([{"name": "laptop", "token": token, "role": "owner"}])
    code, out, err = await switchboard("config", "set", "api.tokens", value, env=env)
    assert code == 0, err
    assert out.startswith('api.tokens = [{name = "laptop", token = "**********", role = "owner"}]')
    assert token not in out + err
    config = (home / "config.toml").read_text()
    assert f'tokens = [{{name = "laptop", token = "{token}", role = "owner"}}]' in config
    assert [t.name for t in load_settings(home=home).api.tokens] == ["laptop"]
    code, out, err = await switchboard("config", "set", "llm.api_key", "sk-given-0123456", env=env)
    assert code == 0, err
    assert out.startswith('llm.api_key = "**********"') and "sk-given" not in out + err
    # the environment's key wins over the one just written, and the note says which source
    assert "note: environment variable SWITCHBOARD_LLM__API_KEY sets it too" in out
    code, _, err = await switchboard("config", "set", "api.tokens", '[{"name": null}]', env=env)
    assert code == 1 and "TOML has no null" in err
