"""``switchboard onboard`` chooses the model, checks it and saves it: with flags, and
interactively in a pseudo-terminal, as a new user runs it. Afterwards ``chat`` works with no
environment variables at all."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM, ServerKind
from tests.test_cli import cli_env, switchboard

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def bare_env(home: Path, fake: FakeLLM) -> dict[str, str]:
    """A fresh user's environment: a home, no model settings."""
    env = cli_env(home, fake)
    for name in ("SWITCHBOARD_LLM__BASE_URL", "SWITCHBOARD_LLM__API_KEY", "OPENAI_API_KEY"):
        env.pop(name, None)
    return env


async def onboard_at(fake: FakeLLM, home: Path, *flags: str) -> tuple[int, str, str]:
    """`switchboard onboard --base-url <the fake> --model fake-model` for a fresh user."""
    return await switchboard(
        "onboard", "--base-url", fake.openai_url, "--model", "fake-model", *flags,
        env=bare_env(home, fake),
    )  # fmt: skip


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

    async def expect(self, text: str) -> str:
        """Wait for ``text``; returns what the terminal showed before it."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(30):
            while text not in self.seen:
                chunk = await loop.run_in_executor(None, os.read, self.master, 4096)
                if not chunk:
                    raise AssertionError(f"{text!r} never came; the terminal showed {self.seen!r}")
                self.seen += chunk.decode(errors="replace")
        before, self.seen = self.seen.split(text, 1)
        return before

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")


@asynccontextmanager
async def onboarding(
    env: dict[str, str],
) -> AsyncIterator[tuple[asyncio.subprocess.Process, Terminal]]:
    """`switchboard onboard` in a pseudo-terminal; never left running, whatever fails."""
    master, slave = os.openpty()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "onboard",
        stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    try:
        yield process, Terminal(master)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(master)


async def test_onboard_asks_in_a_terminal(tmp_path: Path, fake_llm: FakeLLM) -> None:
    home = tmp_path / "home"
    env = bare_env(home, fake_llm)
    async with onboarding(env) as (process, terminal):
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
        await terminal.expect("Context window in tokens")  # the fake does not say it
        terminal.type("")  # keeps the one configured
        await terminal.expect("Next: `switchboard chat`")
        assert await asyncio.wait_for(process.wait(), 30) == 0
    assert f'base_url = "{fake_llm.openai_url}"' in (home / "config.toml").read_text()
    assert not (home / ".env").exists()  # no key given, none written
    code, out, err = await switchboard("chat", "-m", "hi", env=env)
    assert (code, out) == (0, "echo: hi\n"), err


@pytest.mark.parametrize(
    ("kind", "window", "source"),
    [
        ("llama.cpp", 8_192, "llama.cpp's /props (n_ctx)"),
        ("ollama", 16_384, "Ollama's /api/show (num_ctx)"),
        ("ollama-default", 4_096, "Ollama's default window"),
        ("vllm", 32_768, "the server's model list (vLLM max_model_len)"),
        ("lm-studio", 12_000, "LM Studio's /api/v0/models (loaded_context_length)"),
    ],
)
async def test_onboard_saves_the_context_window_the_server_reports(
    tmp_path: Path, fake_llm: FakeLLM, kind: ServerKind, window: int, source: str
) -> None:
    fake_llm.server_kind = kind
    fake_llm.reported_window = 16_384 if kind == "ollama-default" else window
    home = tmp_path / "home"
    env = bare_env(home, fake_llm)
    code, out, err = await onboard_at(fake_llm, home)
    assert code == 0, err
    assert f"  context window: {window} tokens ({source}" in out
    if kind == "ollama-default":  # the model could do more, but Ollama cuts at its default
        assert "supports up to 131072: raise both" in out
    assert f"context_window = {window}" in (home / "config.toml").read_text()
    code, out, _ = await switchboard("config", "get", "llm.context_window", env=env)
    assert out.strip() == str(window)


async def test_a_server_that_does_not_say_its_window_gets_the_flag_named(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    env = bare_env(home, fake_llm)
    url = fake_llm.openai_url
    code, out, err = await onboard_at(fake_llm, home)
    assert code == 0, err
    assert "the server does not say; keeping llm.context_window = 128000" in out
    assert "--context-window TOKENS" in out
    assert "context_window =" not in (home / "config.toml").read_text().replace("# context", "")
    code, out, err = await switchboard(
        "onboard", "--model", "fake-model", "--context-window", "8192", env=env
    )
    assert code == 0, err
    # --model alone keeps the server configured before, and says so
    assert f"note: keeping base URL {url} (configured now); give --base-url" in out
    assert "\ncontext_window = 8192" in (home / "config.toml").read_text()


async def test_without_a_terminal_or_flags_onboard_names_the_flags_and_fails(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    env = bare_env(tmp_path / "home", fake_llm)
    code, out, err = await switchboard("onboard", env=env)
    assert code == 1  # `make chat` stops here instead of starting without a model
    assert "No model is configured yet, and there is no terminal to ask in." in err
    assert "switchboard onboard --base-url http://localhost:11434/v1 --model llama3.1" in err
    assert 'make onboard ARGS="--base-url ... --model ..."' in err
    assert "created  " in out  # the home is made all the same


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
@pytest.mark.parametrize("style", ["variables", "ARGS"])
async def test_make_onboard_passes_the_answers(
    tmp_path: Path, fake_llm: FakeLLM, style: str
) -> None:
    """`make onboard` without a terminal, as README says; the venv is stood in for by one
    whose switchboard is this checkout's (newer than pyproject.toml, so make installs
    nothing)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    command = venv / "bin" / "switchboard"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gateway "$@"\n')
    command.chmod(0o755)
    home = tmp_path / "home"
    env = bare_env(home, fake_llm)
    env["MODEL"] = "from-the-environment"  # never taken for the variable of the same name
    url = fake_llm.openai_url
    answers = (
        [f"BASE_URL={url}", "MODEL=fake-model", "API_KEY=sk-make-secret-1"]
        if style == "variables"
        else [f"ARGS=--base-url {url} --model fake-model --api-key sk-make-secret-1"]
    )
    process = await asyncio.create_subprocess_exec(
        "make", "-C", str(ROOT), "onboard", f"VENV={venv}", *answers,
        env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, out.decode()
    config = (home / "config.toml").read_text()
    assert f'base_url = "{url}"' in config and 'model = "fake-model"' in config
    assert "sk-make-secret-1" in (home / ".env").read_text()
    if style == "variables":
        assert "sk-make-secret-1" not in out.decode()  # the echoed command hides the key


async def test_onboard_asks_again_with_the_last_answers_and_names_them(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    wrong = f"http://127.0.0.1:{port}/v1"
    home = tmp_path / "home"
    env = bare_env(home, fake_llm)
    async with onboarding(env) as (process, terminal):
        await terminal.expect("Choice [1]: ")
        terminal.type("4")
        await terminal.expect("Base URL [http://localhost:8000/v1]: ")
        terminal.type(wrong)
        await terminal.expect("Model [")
        terminal.type("fake-model")
        await terminal.expect("API key")
        terminal.type("sk-typed-once-123")
        await terminal.expect("FAIL: ")
        failure = await terminal.expect("Try other answers?")
        assert "the base URL you gave (--base-url, or the Base URL answer)" in failure
        assert "SWITCHBOARD_LLM__BASE_URL" not in failure
        terminal.type("y")
        await terminal.expect("Choice [4]: ")  # the last answers are the defaults
        terminal.type("")
        await terminal.expect(f"Base URL [{wrong}]: ")
        terminal.type(fake_llm.openai_url)
        await terminal.expect("Model [fake-model]: ")
        terminal.type("")
        await terminal.expect("Enter keeps the one you gave")
        terminal.type("")
        await terminal.expect("  ok: openai model fake-model")
        await terminal.expect("Context window in tokens")  # the fake does not say it
        terminal.type("8192")
        await terminal.expect("Next: `switchboard chat`")
        assert await asyncio.wait_for(process.wait(), 30) == 0
    config = (home / "config.toml").read_text()
    assert f'base_url = "{fake_llm.openai_url}"' in config and "context_window = 8192" in config
    assert "sk-typed-once-123" in (home / ".env").read_text()
