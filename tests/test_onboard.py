"""``switchboard onboard`` chooses the model, checks it and saves it: with flags, and
interactively in a pseudo-terminal, as a new user runs it. Afterwards ``chat`` works with no
environment variables at all."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import sys
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM
from tests.test_cli import cli_env, switchboard

pytestmark = pytest.mark.slow


def bare_env(home: Path, fake: FakeLLM) -> dict[str, str]:
    """A fresh user's environment: a home, no model settings."""
    env = cli_env(home, fake)
    for name in ("SWITCHBOARD_LLM__BASE_URL", "SWITCHBOARD_LLM__API_KEY", "OPENAI_API_KEY"):
        env.pop(name, None)
    return env


async def test_flags_check_and_save_the_model(tmp_path: Path, fake_llm: FakeLLM) -> None:
    home = tmp_path / "home"
    env = bare_env(home, fake_llm)
    key = "sk-onboard-test-abcdef"
    code, out, err = await switchboard(
        "onboard",
        "--base-url",
        fake_llm.openai_url,
        "--model",
        "fake-model",
        "--api-key",
        key,
        env=env,
    )
    assert code == 0, err
    assert f"Checking fake-model at {fake_llm.openai_url} ..." in out
    assert "  ok: openai model fake-model at" in out
    config = (home / "config.toml").read_text()
    assert config.startswith("# Switchboard configuration.")  # the template's comments stay
    assert f'base_url = "{fake_llm.openai_url}"' in config and 'model = "fake-model"' in config
    assert key not in config
    dotenv = home / ".env"
    assert dotenv.read_text() == f"SWITCHBOARD_LLM__API_KEY='{key}'\n"
    assert stat.S_IMODE(dotenv.stat().st_mode) == 0o600
    assert fake_llm.requests[-1].headers.get("Authorization") == f"Bearer {key}"
    code, out, err = await switchboard("chat", "-m", "hello", env=env)
    assert (code, out) == (0, "echo: hello\n"), err


async def test_a_url_without_scheme_is_refused_with_the_fix(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    env = bare_env(tmp_path / "home", fake_llm)
    code, _, err = await switchboard("onboard", "--base-url", "localhost:18080", env=env)
    assert code == 2
    assert "did you mean 'http://localhost:18080/v1'?" in err


async def test_a_failed_check_saves_nothing(tmp_path: Path, fake_llm: FakeLLM) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    home = tmp_path / "home"
    env = bare_env(home, fake_llm)
    url = f"http://127.0.0.1:{port}/v1"
    code, out, err = await switchboard("onboard", "--base-url", url, "--model", "m", env=env)
    assert code == 1
    assert f"  FAIL: Nothing is listening at {url} (connection refused)." in out
    assert "Nothing saved (use --no-check to save anyway)." in err
    assert "\nbase_url =" not in (home / "config.toml").read_text()


class Terminal:
    """A pseudo-terminal around a subprocess, read and written like a person would."""

    def __init__(self, master: int) -> None:
        self.master = master
        self.seen = ""

    async def expect(self, text: str) -> None:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(30):
            while text not in self.seen:
                chunk = await loop.run_in_executor(None, os.read, self.master, 4096)
                if not chunk:
                    raise AssertionError(f"{text!r} never came; the terminal showed {self.seen!r}")
                self.seen += chunk.decode(errors="replace")
        self.seen = self.seen.split(text, 1)[1]

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")


async def test_onboard_asks_in_a_terminal(tmp_path: Path, fake_llm: FakeLLM) -> None:
    home = tmp_path / "home"
    env = bare_env(home, fake_llm)
    master, slave = os.openpty()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "onboard",
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    terminal = Terminal(master)
    try:
        await terminal.expect("Which model should the assistant use?")
        await terminal.expect("Choice [1]: ")
        terminal.type("4")  # another OpenAI-compatible server
        await terminal.expect("Base URL [http://localhost:8000/v1]: ")
        terminal.type(fake_llm.openai_url)
        await terminal.expect("Model [")
        terminal.type("fake-model")
        await terminal.expect("API key")
        terminal.type("")  # a local server needs none
        await terminal.expect("  ok: openai model fake-model")
        await terminal.expect("Next: `switchboard chat`")
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(master)
    assert f'base_url = "{fake_llm.openai_url}"' in (home / "config.toml").read_text()
    assert not (home / ".env").exists()  # no key given, none written
    code, out, err = await switchboard("chat", "-m", "hi", env=env)
    assert (code, out) == (0, "echo: hi\n"), err
