"""Secret and memory files are the gateway user's alone (docs/security.md, "Secrets").

Driven through the command line as a user runs it: ``config set`` on a config.toml left
0644, ``doctor`` on ``.env``, ``secrets/`` and ``MEMORY.md`` readable by others, ``doctor
--fix``, and a fresh ``onboard``.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from agent.memory import append_note, person_scope
from gateway.cli.doctor.files import exposed, secrets_in_config
from gateway.config.settings import load_settings
from gateway.config.toml.config_file import config_text, write_config
from gateway.config.toml.edit import set_key
from gateway.runtime.home import onboard


def switchboard(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SWITCHBOARD_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_fresh_home_is_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    onboard(home, home / "workspace")
    assert mode(home / "config.toml") == 0o600
    assert mode(home / "workspace") == 0o700
    assert mode(home / "workspace" / "MEMORY.md") == 0o600


def test_config_set_makes_a_readable_config_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    onboard(home, home / "workspace")
    (home / "config.toml").chmod(0o644)
    done = switchboard(home, "config", "set", "agent.name", "Robin")
    assert done.returncode == 0, done.stderr
    assert mode(home / "config.toml") == 0o600


def test_doctor_warns_about_readable_secrets_and_fix_tightens_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    onboard(home, home / "workspace")
    exposed = [home / ".env", home / "secrets" / "telegram_token", home / "workspace" / "MEMORY.md"]
    (home / "secrets").mkdir()
    for path in exposed[:2]:
        path.write_text("SWITCHBOARD_X=1\n")
    for path in exposed:
        path.chmod(0o644)
    report = json.loads(switchboard(home, "doctor", "--json").stdout)
    warned = [c["message"] for c in report["checks"] if c["name"] == "permissions"]
    for path in exposed:
        assert any(m.startswith(f"{path} is mode 644") for m in warned), warned
    assert all("doctor --fix" in m for m in warned)
    fixed = json.loads(switchboard(home, "doctor", "--json", "--fix").stdout)
    assert [mode(p) for p in exposed] == [0o600, 0o600, 0o600]
    assert mode(home / "secrets") == 0o700 or not mode(home / "secrets") & 0o077
    lines = [c for c in fixed["checks"] if c["name"] == "permissions"]
    assert all(c["status"] == "ok" for c in lines)
    again = json.loads(switchboard(home, "doctor", "--json").stdout)
    assert [c["message"] for c in again["checks"] if c["name"] == "permissions"] == [
        "secret and memory files are yours only"
    ]


def test_notes_the_gateway_writes_for_a_person_are_theirs_alone(tmp_path: Path) -> None:
    """A member's first note makes memory/people/<them>/ (and its lock): both private, so
    ``doctor`` has nothing to say about what the gateway made itself."""
    home = tmp_path / "home"
    onboard(home, home / "workspace")
    settings = load_settings(home=home)
    scope = person_scope("telegram:5", owner=False)
    when = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
    for to in ("memory", "today"):
        append_note(settings.workspace_dir, scope, ["likes tea"], to=to, now=when)
    folder = settings.workspace_dir / scope.directory
    assert mode(folder) == mode(folder.parent) == 0o700
    assert {mode(p) for p in folder.iterdir()} == {0o600}  # the notes and their locks
    assert exposed(settings) == []


def test_doctor_names_a_secret_written_in_config_toml(tmp_path: Path) -> None:
    home = tmp_path / "home"
    onboard(home, home / "workspace")
    config = home / "config.toml"
    text = set_key(config_text(config), "llm.api_key", "sk-in-the-file-123456")
    text = set_key(text, "llm.model", "gpt-4o")  # no secret: nothing to say
    write_config(config, set_key(text, "storage.url", "postgresql://switchboard@db/switchboard"))
    [warning] = secrets_in_config(load_settings(home=home))  # the URL has no password
    assert warning.status == "warn"
    assert "config.toml holds the secret llm.api_key" in warning.message
    assert "as SWITCHBOARD_LLM__API_KEY=..." in warning.message
    assert "sk-in-the-file" not in warning.message


NESTED_SECRETS = """
[hooks.ci]
secret = "hook-secret-0123456789abcdef"
deliver_to = "telegram:12345"

[mcp.servers.remote]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer mcp-header-value" }

[agents.work]
api_key = "sk-agent-key-value"

[[llm.fallbacks]]
provider = "anthropic"
model = "claude-x"
api_key = "sk-ant-fallback-value"

[api]
tokens = [{ name = "laptop", token = "api-token-0123456789abcdef", role = "owner" }]
"""


def test_doctor_names_a_secret_wherever_it_is_in_config_toml(tmp_path: Path) -> None:
    """A hook's secret, an MCP server's headers, an agent's key, a fallback's key, an API
    token: each a secret by its type, each named (before: only the sections' own keys,
    such as llm.api_key)."""
    home = tmp_path / "home"
    onboard(home, home / "workspace")
    config = home / "config.toml"
    write_config(config, config_text(config) + NESTED_SECRETS)
    warnings = secrets_in_config(load_settings(home=home))
    dotenv = home / ".env"
    assert [w.message for w in warnings] == [
        "config.toml holds the secret llm.fallbacks[0].api_key: move the whole list "
        f"llm.fallbacks to {dotenv} as SWITCHBOARD_LLM__FALLBACKS='[...]' (JSON) and delete "
        "it from config.toml",
        "config.toml holds the secret mcp.servers.remote.headers: move it to "
        f"{dotenv} as SWITCHBOARD_MCP__SERVERS__REMOTE__HEADERS='{{...}}' (JSON) and delete "
        "it from config.toml",
        f"config.toml holds the secret hooks.ci.secret: move it to {dotenv} as "
        "SWITCHBOARD_HOOKS__CI__SECRET=... and delete it from config.toml",
        f"config.toml holds the secret agents.work.api_key: move it to {dotenv} as "
        "SWITCHBOARD_AGENTS__WORK__API_KEY=... and delete it from config.toml",
        "config.toml holds the secret api.tokens[0].token: move the whole list api.tokens "
        f"to {dotenv} as SWITCHBOARD_API__TOKENS='[...]' (JSON) and delete it from "
        "config.toml (`switchboard api token add` or `remove` moves the tokens there)",
    ]
    assert {w.status for w in warnings} == {"warn"}
    assert not any("value" in w.message or "abcdef" in w.message for w in warnings)


def test_doctor_names_a_model_proxys_password_written_in_config_toml(tmp_path: Path) -> None:
    home = tmp_path / "home"
    onboard(home, home / "workspace")
    config = home / "config.toml"
    url = "http://proxyuser:hunter2-s3cret@10.0.0.2:8080/v1"
    write_config(config, set_key(config_text(config), "llm.base_url", url))
    [warning] = secrets_in_config(load_settings(home=home))
    assert "config.toml holds the secret llm.base_url" in warning.message
    assert "as SWITCHBOARD_LLM__BASE_URL=..." in warning.message
    assert "hunter2" not in warning.message
