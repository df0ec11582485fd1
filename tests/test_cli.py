"""The switchboard command as a user runs it, in real subprocesses."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM, held

pytestmark = pytest.mark.slow


def cli_env(home: Path, fake: FakeLLM, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    env.update(
        SWITCHBOARD_HOME=str(home),
        SWITCHBOARD_LLM__BASE_URL=fake.openai_url,
        SWITCHBOARD_LLM__API_KEY="sk-test-cli-123456",
        SWITCHBOARD_LLM__MAX_RETRIES="0",
        NO_PROXY="127.0.0.1",
    )
    env.update(extra)
    return env


async def switchboard(
    *args: str, env: dict[str, str], timeout: float = 60, cwd: Path | None = None
) -> tuple[int, str, str]:
    """``switchboard ARGS`` as a process (``cwd``: the code of another checkout, run with this
    environment's packages)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        *args,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,  # never the developer's terminal: onboard would ask
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_onboard_creates_home_and_never_overwrites(tmp_path: Path, fake_llm: FakeLLM) -> None:
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    code, out, _ = await switchboard("onboard", env=env)
    assert code == 0
    assert (home / "config.toml").exists()
    for name in (
        "AGENTS.md",
        "SOUL.md",
        "USER.md",
        "IDENTITY.md",
        "TOOLS.md",
        "HEARTBEAT.md",
        "MEMORY.md",
    ):
        assert (home / "workspace" / name).is_file()
    (home / "workspace" / "SOUL.md").write_text("my own soul")
    code, out, _ = await switchboard("onboard", env=env)
    assert code == 0
    assert (home / "workspace" / "SOUL.md").read_text() == "my own soul"
    assert "kept" in out


async def test_chat_one_message(tmp_path: Path, fake_llm: FakeLLM) -> None:
    env = cli_env(tmp_path / "home", fake_llm)
    await switchboard("onboard", env=env)
    code, out, err = await switchboard("chat", "-m", "hello world", env=env)
    assert (code, out) == (0, "echo: hello world\n"), err


async def test_invalid_config_refuses_to_start_and_names_the_field(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    env = cli_env(tmp_path / "home", fake_llm, SWITCHBOARD_LLM__PROVIDER="gemini")
    code, _, err = await switchboard("chat", "-m", "hi", env=env)
    assert code == 2
    assert "llm.provider" in err and "SWITCHBOARD_LLM__PROVIDER" in err


async def test_typo_in_config_toml_is_an_error(tmp_path: Path, fake_llm: FakeLLM) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[llm]\nmodle = 'gpt'\n")
    code, _, err = await switchboard("chat", "-m", "hi", env=cli_env(home, fake_llm))
    assert code == 2
    assert "llm.modle" in err


async def test_secrets_never_reach_the_log(tmp_path: Path, fake_llm: FakeLLM) -> None:
    env = cli_env(
        tmp_path / "home",
        fake_llm,
        SWITCHBOARD_LLM__API_KEY="sk-canary-abcdef0123456789",
        SWITCHBOARD_LOG_LEVEL="debug",  # the log file at debug (-v is for the console only)
    )
    await switchboard("onboard", env=env)
    _, _, console = await switchboard(
        "-v", "chat", "-m", "please print sk-canary-abcdef0123456789", env=env
    )
    log = (tmp_path / "home" / "data" / "logs" / "switchboard.log").read_text()
    assert "please print [REDACTED]" in log  # the message was logged, with the key masked
    assert "sk-canary-abcdef0123456789" not in log
    assert "please print [REDACTED]" in console and "sk-canary-abcdef0123456789" not in console


async def test_killed_mid_turn_then_restarted_answers_exactly_once(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    env = cli_env(tmp_path / "home", fake_llm)
    await switchboard("onboard", env=env)
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "this answer is never delivered"))
    first = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "chat",
        "-m",
        "hello",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    await fake_llm.wait_for_requests(1, timeout=30)  # the model call is in flight
    first.send_signal(signal.SIGKILL)
    out, _ = await first.communicate()
    assert out == b""

    code, out, err = await switchboard("chat", "-m", "second", env=env)
    assert code == 0, err
    assert out.splitlines() == ["echo: second"]  # its own answer only; the resumed one, marked:
    assert "(earlier, undelivered) echo: hello" in err
    assert [r.user_texts for r in fake_llm.requests[1:]] == [["hello"], ["hello", "second"]]

    code, out, _ = await switchboard("chat", "-m", "third", env=env)
    assert out.splitlines() == ["echo: third"]  # nothing answered twice
