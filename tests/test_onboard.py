"""``switchboard onboard`` chooses the model, checks it and saves it: with flags, and
interactively in a pseudo-terminal, as a new user runs it. Afterwards ``chat`` works with no
environment variables at all. A server of one's own proposes its own model and window, an
onboarding stopped half-way leaves no config.toml (so ``make chat`` asks again), and the
"Next:" line names a command the person's shell can run."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from agent.llm.server_facts import PROBE_TOKENS, detect
from tests.fakes.llm import SIGN_IN_PAGE, FakeLLM, ServerKind
from tests.fakes.telegram import FakeTelegram
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
    assert not (home / "config.toml").exists()  # `make chat` onboards again


async def test_a_web_page_at_the_base_url_is_named_and_saves_nothing(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.web_page = SIGN_IN_PAGE  # a sign-in page where the model's API should be
    home = tmp_path / "home"
    code, out, err = await onboard_at(fake_llm, home)
    assert code == 1
    assert (
        f'  FAIL: {fake_llm.openai_url} answered /chat/completions with an HTML page ("Sign in"), '
        "not an OpenAI-compatible API. Is that the model server?"
    ) in out
    assert "Traceback" not in err
    assert "Nothing saved (use --no-check to save anyway)." in err
    assert not (home / "config.toml").exists()


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
    env: dict[str, str], *command: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, Terminal]]:
    """`switchboard onboard` (or ``command``) in a pseudo-terminal; never left running,
    whatever fails."""
    master, slave = os.openpty()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", *(command or ("onboard",)),
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
        await terminal.expect("  the server offers: fake-model")
        await terminal.expect("Model [fake-model]: ")  # the server's, not gpt-4o-mini
        terminal.type("")
        await terminal.expect("API key")
        terminal.type("")  # a local server needs none
        await terminal.expect("  ok: openai model fake-model")
        await terminal.expect("Context window in tokens")  # the fake does not say it
        await terminal.expect("[8192]: ")  # not the hosted models' 128000
        terminal.type("")
        await terminal.expect("Reach it from your phone too?")
        terminal.type("")  # not now
        await terminal.expect("Next: `")
        assert await asyncio.wait_for(process.wait(), 30) == 0
    config = (home / "config.toml").read_text()
    assert f'base_url = "{fake_llm.openai_url}"' in config
    assert 'model = "fake-model"' in config and "\ncontext_window = 8192" in config
    assert not (home / ".env").exists()  # no key given, none written
    code, out, err = await switchboard("chat", "-m", "hi", env=env)
    assert (code, out) == (0, "echo: hi\n"), err


@pytest.mark.parametrize(
    ("kind", "window", "source"),
    [
        ("llama.cpp", 8_192, "llama.cpp's /props (n_ctx)"),
        ("llama-cpp-python", 2_048, "llama-cpp-python's refusal of a longer prompt"),
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
    # only llama-cpp-python is sent the long prompt (Ollama would cut it to fit and read it)
    assert bool(fake_llm.completion_prompts) is (kind == "llama-cpp-python")


async def test_a_llama_cpp_python_window_past_the_probe_is_not_guessed(fake_llm: FakeLLM) -> None:
    """A llama-cpp-python server with a window larger than the probe's prompt refuses it
    for its stop word, before reading it: no window is claimed (onboarding asks, or keeps
    the setting and names the flag)."""
    fake_llm.server_kind = "llama-cpp-python"
    fake_llm.reported_window = PROBE_TOKENS + 1
    facts = await detect("openai", fake_llm.openai_url, "fake-model")
    assert facts.window is None
    assert fake_llm.completion_prompts == [PROBE_TOKENS]


@pytest.mark.parametrize(
    ("kind", "source"),
    [
        ("llama.cpp", "llama.cpp's /props (modalities)"),
        ("ollama", "Ollama's /api/show (capabilities)"),
        ("lm-studio", "LM Studio's /api/v0/models (type llm)"),
    ],
)
async def test_onboard_saves_that_the_model_sees_no_pictures_where_the_server_says(
    tmp_path: Path, fake_llm: FakeLLM, kind: ServerKind, source: str
) -> None:
    fake_llm.server_kind = kind
    fake_llm.sees_images = False
    home = tmp_path / "home"
    code, out, err = await onboard_at(fake_llm, home)
    assert code == 0, err
    assert f"  pictures: the model sees none ({source}); photos and scans reach it as" in out
    assert "\nvision = false" in (home / "config.toml").read_text()
    fake_llm.sees_images = True  # another model, one that sees them
    code, out, err = await onboard_at(fake_llm, home)
    assert code == 0, err
    assert "  pictures: the model sees them" in out
    assert "\nvision = true" in (home / "config.toml").read_text()


async def test_a_server_that_does_not_say_whether_it_sees_pictures_leaves_vision_alone(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.server_kind = "vllm"
    home = tmp_path / "home"
    code, out, err = await onboard_at(fake_llm, home)
    assert code == 0, err
    assert "pictures:" not in out
    assert "vision =" not in (home / "config.toml").read_text()


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


def fake_venv(tmp_path: Path) -> Path:
    """A venv for make whose switchboard is this checkout's (newer than pyproject.toml, so
    make installs nothing)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    command = venv / "bin" / "switchboard"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gateway "$@"\n')
    command.chmod(0o755)
    return venv


async def make(*args: str, env: dict[str, str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "make", "-C", str(ROOT), *args,
        env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode()


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
@pytest.mark.parametrize("style", ["variables", "ARGS"])
async def test_make_onboard_passes_the_answers(
    tmp_path: Path, fake_llm: FakeLLM, style: str
) -> None:
    """`make onboard` without a terminal, as README says."""
    venv = fake_venv(tmp_path)
    home = tmp_path / "home"
    env = bare_env(home, fake_llm)
    env["MODEL"] = "from-the-environment"  # never taken for the variable of the same name
    url = fake_llm.openai_url
    answers = (
        [f"BASE_URL={url}", "MODEL=fake-model", "API_KEY=sk-make-secret-1"]
        if style == "variables"
        else [f"ARGS=--base-url {url} --model fake-model --api-key sk-make-secret-1"]
    )
    code, out = await make("onboard", f"VENV={venv}", *answers, env=env)
    assert code == 0, out
    config = (home / "config.toml").read_text()
    assert f'base_url = "{url}"' in config and 'model = "fake-model"' in config
    assert "sk-make-secret-1" in (home / ".env").read_text()
    if style == "variables":
        assert "sk-make-secret-1" not in out  # the echoed command hides the key


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
        await terminal.expect(f"nothing answers at {wrong}")  # said at once, not at the end
        await terminal.expect("Model: ")  # nothing listed there, and no model to guess
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
        terminal.type("fake-modle")  # a typo
        await terminal.expect("the server does not list fake-modle")
        await terminal.expect("Enter keeps the one you gave")
        terminal.type("")
        await terminal.expect("  ok: openai model fake-modle")  # the fake answers any name
        await terminal.expect("Context window in tokens")  # the fake does not say it
        terminal.type("8192")
        await terminal.expect("Reach it from your phone too?")
        terminal.type("")  # not now
        await terminal.expect("Next: `")
        assert await asyncio.wait_for(process.wait(), 30) == 0
    config = (home / "config.toml").read_text()
    assert f'base_url = "{fake_llm.openai_url}"' in config and "context_window = 8192" in config
    assert "sk-typed-once-123" in (home / ".env").read_text()


async def test_onboarding_a_configured_home_again_proposes_the_model_it_has(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Enter at every question keeps the model configured (it proposed OpenAI, so pressing
    Enter switched a local model's home to gpt-4o-mini)."""
    home = tmp_path / "home"
    key = "sk-configured-key-123456"
    code, _, err = await onboard_at(fake_llm, home, "--api-key", key, "--context-window", "8192")
    assert code == 0, err
    before = (home / "config.toml").read_text()
    async with onboarding(bare_env(home, fake_llm)) as (process, terminal):
        await terminal.expect("Choice [4]: ")  # another OpenAI-compatible server: this one
        terminal.type("")
        await terminal.expect(f"Base URL [{fake_llm.openai_url}]: ")
        terminal.type("")
        await terminal.expect("Model [fake-model]: ")
        terminal.type("")
        await terminal.expect("Enter keeps the one configured")
        terminal.type("")
        await terminal.expect("  ok: openai model fake-model")
        await terminal.expect("Context window in tokens")  # the fake does not say it
        await terminal.expect("[8192]: ")  # the one configured
        terminal.type("")
        await terminal.expect("Reach it from your phone too?")
        terminal.type("")
        await terminal.expect("Next: `")
        assert await asyncio.wait_for(process.wait(), 30) == 0
    after = (home / "config.toml").read_text()
    assert after == before
    assert key in (home / ".env").read_text()
    assert fake_llm.requests[-1].headers.get("Authorization") == f"Bearer {key}"


async def test_a_local_server_proposes_its_own_model_and_window(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.served_model = "qwen2.5-7b-instruct"
    fake_llm.server_kind = "llama.cpp"
    fake_llm.reported_window = 16_384
    home = tmp_path / "home"
    env = bare_env(home, fake_llm)
    async with onboarding(env) as (process, terminal):
        await terminal.expect("Choice [1]: ")
        terminal.type("4")
        await terminal.expect("Base URL [http://localhost:8000/v1]: ")
        terminal.type(fake_llm.openai_url)
        await terminal.expect("  the server offers: qwen2.5-7b-instruct")
        await terminal.expect("Model [qwen2.5-7b-instruct]: ")
        terminal.type("")
        await terminal.expect("API key")
        terminal.type("")
        await terminal.expect("  context window: 16384 tokens (llama.cpp's /props (n_ctx))")
        await terminal.expect("Reach it from your phone too?")
        terminal.type("")  # not now
        await terminal.expect("Next: `")
        assert await asyncio.wait_for(process.wait(), 30) == 0
    config = (home / "config.toml").read_text()
    assert 'model = "qwen2.5-7b-instruct"' in config and "\ncontext_window = 16384" in config
    assert fake_llm.requests[-1].body["model"] == "qwen2.5-7b-instruct"  # the check asked it


async def test_onboarding_in_a_terminal_offers_a_chat_app_and_sets_it_up(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    home = tmp_path / "home"
    env = {**bare_env(home, fake_llm), "SWITCHBOARD_TELEGRAM__BASE_URL": tg.base_url}
    async with onboarding(env) as (process, terminal):
        await terminal.expect("Choice [1]: ")
        terminal.type("4")
        await terminal.expect("Base URL [http://localhost:8000/v1]: ")
        terminal.type(fake_llm.openai_url)
        await terminal.expect("Model [fake-model]: ")
        terminal.type("")
        await terminal.expect("API key")
        terminal.type("")
        await terminal.expect("[8192]: ")
        terminal.type("")
        await terminal.expect("Reach it from your phone too? Set up telegram, discord, slack")
        terminal.type("telegrm")
        await terminal.expect("  one of telegram, ")
        terminal.type("telegram")
        await terminal.expect("The bot's token from @BotFather (hidden): ")
        terminal.type(tg.token)
        await terminal.expect("  ok: @switchboard_bot")
        await terminal.expect("pairing approve CODE --owner")
        assert await asyncio.wait_for(process.wait(), 30) == 0
    assert tg.token in (home / ".env").read_text()
    assert 'model = "fake-model"' in (home / "config.toml").read_text()


async def test_a_base_url_without_a_model_takes_the_one_the_server_lists(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.served_model = "llama-3.2-3b"
    home = tmp_path / "home"
    env = bare_env(home, fake_llm)
    code, out, err = await switchboard("onboard", "--base-url", fake_llm.openai_url, env=env)
    assert code == 0, err
    assert "model: llama-3.2-3b (the first the server lists)" in out
    assert 'model = "llama-3.2-3b"' in (home / "config.toml").read_text()


async def test_a_base_url_that_lists_no_models_asks_for_the_flag(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    home = tmp_path / "home"
    url = f"http://127.0.0.1:{port}/v1"
    code, _, err = await switchboard("onboard", "--base-url", url, env=bare_env(home, fake_llm))
    assert code == 2
    assert f"give --model: no list of models came from {url}" in err
    assert not (home / "config.toml").exists()


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
async def test_chat_at_a_terminal_with_no_model_chooses_one_first(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """`switchboard chat` on a new home asks for the model before the first message (it
    opened with "model gpt-4o-mini", and every message failed: no AI model configured)."""
    home = tmp_path / "home"
    async with onboarding(bare_env(home, fake_llm), "chat") as (process, terminal):
        await terminal.expect("No model is configured yet: choose one first")
        await terminal.expect("Choice [1]: ")
        terminal.type("4")
        await terminal.expect("Base URL [")
        terminal.type(fake_llm.openai_url)
        await terminal.expect("Model [fake-model]: ")  # the one the server lists
        terminal.type("")
        await terminal.expect("API key")
        terminal.type("")
        await terminal.expect("Context window in tokens")
        terminal.type("8192")
        await terminal.expect("Reach it from your phone too?")
        terminal.type("")
        await terminal.expect("Switchboard chat · ")
        await terminal.expect("model fake-model")
        await terminal.expect("you›")  # the prompt
        os.write(terminal.master, b"\x04")  # Ctrl-D: leave
        assert await asyncio.wait_for(process.wait(), 30) == 0
    assert 'model = "fake-model"' in (home / "config.toml").read_text()


async def test_an_interrupted_onboarding_leaves_no_config_and_make_chat_asks_again(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    env = bare_env(home, fake_llm)
    async with onboarding(env) as (process, terminal):
        await terminal.expect("Choice [1]: ")
        terminal.type("4")
        await terminal.expect("Base URL [")
        process.send_signal(signal.SIGINT)  # Ctrl-C at the second question
        # A signal that lands between the prompt's write and the read that waits for the
        # answer is seen only when that read returns: Enter after it, as a person whose
        # Ctrl-C seemed to do nothing would press (either way the question is never answered).
        terminal.type("")
        await terminal.expect("Nothing saved.")
        assert await asyncio.wait_for(process.wait(), 30) == 1
    assert (home / "workspace").is_dir()  # the home is made...
    assert not (home / "config.toml").exists()  # ...but no config.toml that would skip onboarding
    code, out = await make("chat", f"VENV={fake_venv(tmp_path)}", env=env)
    assert code != 0, out  # onboarding ran again and, without a terminal, stopped make there
    assert "No model is configured yet, and there is no terminal to ask in." in out


async def test_next_names_the_full_path_when_switchboard_is_not_on_the_path(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    installed = Path(sys.executable).parent / "switchboard"
    home = tmp_path / "home"
    env = bare_env(home, fake_llm)
    env["PATH"] = "/usr/bin:/bin"  # no .venv/bin, as in a new shell after `make onboard`
    code, out, err = await switchboard(
        "onboard", "--base-url", fake_llm.openai_url, "--model", "fake-model", env=env
    )
    assert code == 0, err
    assert f"Next: `{installed} chat` to talk here, `{installed} run` for the channels." in out
    assert f"To reach it from your phone: `{installed} onboard --channel telegram` (or" in out
    assert f"in {ROOT}, `make chat` and `make run` do the same, and `make link` puts it" in out
    elsewhere = tmp_path / "elsewhere"
    code, out, err = await switchboard(
        "onboard",
        "--home",
        str(elsewhere),
        "--base-url",
        fake_llm.openai_url,
        "--model",
        "fake-model",
        env=env,
    )
    assert code == 0, err
    assert (
        f"`SWITCHBOARD_HOME={elsewhere} make chat` and `SWITCHBOARD_HOME={elsewhere} make run`"
        in out
    )
    linked = tmp_path / "bin"  # after `make link`: a link to the same install on the PATH
    linked.mkdir()
    (linked / "switchboard").symlink_to(installed)
    env["PATH"] = f"{linked}:/usr/bin:/bin"
    code, out, err = await switchboard("onboard", "--model", "fake-model", env=env)
    assert code == 0, err
    assert "Next: `switchboard chat` to talk here, `switchboard run` for the channels." in out
    assert "make link" not in out


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
@pytest.mark.parametrize(
    ("shell", "advice"),
    [
        ("/bin/bash", "echo 'export PATH=\"{bindir}:$PATH\"' >> ~/.bashrc"),
        ("/usr/bin/zsh", "echo 'export PATH=\"{bindir}:$PATH\"' >> ~/.zshrc"),
        ("/usr/bin/fish", "fish_add_path {bindir}"),
    ],
)
async def test_make_link_says_how_to_add_the_folder_for_the_shell_in_use(
    tmp_path: Path, fake_llm: FakeLLM, shell: str, advice: str
) -> None:
    venv = fake_venv(tmp_path)
    bindir = tmp_path / "bin"
    env = {**bare_env(tmp_path / "home", fake_llm), "SHELL": shell, "PATH": "/usr/bin:/bin"}
    code, out = await make("link", f"VENV={venv}", f"BINDIR={bindir}", env=env)
    assert code == 0, out
    assert (bindir / "switchboard").resolve() == (venv / "bin" / "switchboard").resolve()
    assert f"{bindir} is not on your PATH yet" in out
    assert advice.format(bindir=bindir) in out
    env["PATH"] = f"{bindir}:/usr/bin:/bin"
    code, out = await make("link", f"VENV={venv}", f"BINDIR={bindir}", env=env)
    assert code == 0 and "switchboard is on your PATH now" in out, out
