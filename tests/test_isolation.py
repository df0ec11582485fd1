"""The suite never reads the developer's home or environment (tests/isolation.py): `make test`
after `make onboard` passes like on a fresh machine.

Part of the suite runs again in a child pytest whose HOME holds a configured
``~/.switchboard`` (a model, a hook, API tokens, a key in .env) and whose environment sets
``SWITCHBOARD_*`` variables, API keys, a dead proxy and XDG directories; it must stay green.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.isolation import scrubbed

ROOT = Path(__file__).resolve().parents[1]

# What `make onboard` writes, and what people add in the first hour.
CONFIGURED = """\
[llm]
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "the-developers-model"
context_window = 4096

[hooks.ci]
secret = "hook-secret-0123456789abcdef"

[api]
enabled = true

[[api.tokens]]
name = "script"
token = "api-token-0123456789abcdef"
role = "member"
"""

# A few of each kind: settings read in-process (the configuration reference among them), a
# key fallback, a running gateway, and the run's own environment as a child process sees it.
REPRESENTATIVE = (
    "tests/test_isolation.py::test_the_run_has_a_home_and_environment_of_its_own",
    "tests/test_settings.py",
    "tests/test_config_sources.py::test_dotenv_holds_the_api_key_fallback",
    "tests/test_pipeline.py::test_commands_are_answered_without_the_model",
)


def test_the_run_has_a_home_and_environment_of_its_own(tmp_path: Path) -> None:
    """Here and in a process a test starts: HOME is the run's own, empty of a
    ``.switchboard``, and nothing of the developer's environment is left."""
    child = subprocess.run(
        [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
        capture_output=True,
        check=True,
        text=True,
        timeout=30,
    )
    for environ in (dict(os.environ), json.loads(child.stdout)):
        home = Path(environ["HOME"])
        assert home.name.startswith("switchboard-tests-home-"), home
        assert not (home / ".switchboard").exists()
        assert environ["SWITCHBOARD_HOME"] == str(tmp_path / "home")  # the test's own
        left = [name for name in environ if scrubbed(name) and name != "SWITCHBOARD_HOME"]
        assert left == []


@pytest.mark.slow
async def test_part_of_the_suite_passes_with_a_configured_home_and_environment(
    tmp_path: Path,
) -> None:
    home = tmp_path / "developer"
    config = home / ".switchboard"
    (config / "secrets").mkdir(parents=True)
    (config / "config.toml").write_text(CONFIGURED)
    (config / ".env").write_text("OPENAI_API_KEY=sk-from-the-developers-dotenv\n")
    (config / "secrets" / "SWITCHBOARD_WEB__TOKEN").write_text("web-token-0123456789abcdef")
    # The child is a pytest run of its own, not an xdist worker of this one.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(
        HOME=str(home),
        SWITCHBOARD_HOME=str(config),
        SWITCHBOARD_LLM__MODEL="the-developers-env-model",
        SWITCHBOARD_LLM__MAX_RETRIES="7",
        SWITCHBOARD_LOG_LEVEL="debug",
        SWITCHBOARD_TELEGRAM__TOKEN="123456:developers-bot-token",
        SWITCHBOARD_HOOKS='{"deploy": {"secret": "env-hook-secret-0123456789"}}',
        OPENAI_API_KEY="sk-developers-key",
        ANTHROPIC_API_KEY="sk-ant-developers-key",
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_RUNTIME_DIR=str(home / "run"),
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        *REPRESENTATIVE,
        cwd=ROOT,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 50)
    text = out.decode()
    assert process.returncode == 0, text
    assert " passed" in text and "skipped" not in text, text
