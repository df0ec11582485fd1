"""The commands that read a home and its running gateway (``status``, ``logs``, ``web``,
``chat``, ``config get``), in this process: a gateway that died is not taken for a running
one, an invalid config.toml does not lock its owner out of the running gateway, and a home
that is not there is said to be none, not made."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from gateway.cli.main import main
from gateway.config.settings import load_settings
from gateway.runtime.app import Gateway
from gateway.web.access.signin import ensure_key
from gateway.web.endpoint import write_endpoint
from tests.fakes.llm import FakeLLM
from tests.test_cli import cli_env, switchboard
from tests.test_live_settings import write_home


def home() -> Path:
    return Path(os.environ["SWITCHBOARD_HOME"])  # the test's own (tests/conftest.py)


def break_the_config() -> None:
    """A typo in config.toml: a context window of "big"."""
    path = home() / "config.toml"
    text = path.read_text()
    path.write_text(
        text.replace('model = "fake-model"', 'model = "fake-model"\ncontext_window = "big"')
    )


def test_web_gives_no_link_to_a_gateway_that_died(
    fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    """A gateway killed with -9 (or by the OOM killer, or a power loss) leaves data/web.json
    behind; `web` printed a sign-in link to a server that was gone."""
    write_home(home(), fake_llm)
    data = home() / "data"
    ensure_key(data)
    write_endpoint(data, "http://127.0.0.1:18790/")  # the process that wrote it holds no lock
    assert main(["web"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("switchboard: the gateway is not running here (start it with")


async def test_an_invalid_config_does_not_lock_the_owner_out_of_the_running_gateway(
    fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in config.toml while the gateway runs (it keeps its last valid configuration):
    `status`, `logs` and `web` said only the error and exited 2, though the gateway ran to
    be looked at and signed in to (its settings page fixes the typo)."""
    write_home(home(), fake_llm, web={"enabled": True, "port": 0})
    async with Gateway(load_settings(home=home())) as gateway:
        assert gateway.web is not None
        url = gateway.web.url
        break_the_config()
        (home() / "data" / "logs").mkdir(parents=True, exist_ok=True)
        (home() / "data" / "logs" / "switchboard.log").write_text("the gateway's line\n")
        codes = {}
        said = {}
        for command in (["status"], ["logs"], ["web", "--json"]):
            codes[command[0]] = await asyncio.to_thread(main, command)
            said[command[0]] = capsys.readouterr()
        code = await asyncio.to_thread(main, ["config", "get", "llm.context_window"])
        got = capsys.readouterr()
    assert codes == {"status": 0, "logs": 0, "web": 0}, said
    for captured in said.values():
        assert_warned(captured.err)
    assert said["status"].out.startswith(f"gateway: running (pid {os.getpid()}), ready")
    assert said["logs"].out == "the gateway's line\n"
    assert json.loads(said["web"].out)["link"].startswith(f"{url}signin?code=")
    # the key's own value: invalid, and what the gateway uses instead; never a default
    assert code == 2 and got.out == ""
    assert got.err.startswith(
        "switchboard: llm.context_window is invalid: Input should be a valid integer"
    )
    assert f"(the running gateway (pid {os.getpid()}) uses 128000, its last valid value;" in got.err


def assert_warned(err: str) -> None:
    """The configuration error in one line on stderr, and nothing else there."""
    [warning] = err.splitlines()
    assert warning.startswith(
        "switchboard: warning: the configuration is invalid (llm.context_window: "
        "Input should be a valid integer"
    )
    assert "the running gateway keeps its last valid configuration" in warning


async def test_chat_attaches_to_the_running_gateway_despite_an_invalid_config(
    fake_llm: FakeLLM,
) -> None:
    write_home(home(), fake_llm)
    async with Gateway(load_settings(home=home())):
        break_the_config()
        # a chat's Ctrl-C handling needs a main thread of its own: a process of its own
        code, out, err = await switchboard("chat", "-m", "hello", env=cli_env(home(), fake_llm))
    assert (code, out) == (0, "echo: hello\n"), err
    assert_warned(err)


def test_chat_with_an_invalid_config_and_no_gateway_to_attach_to_refuses(
    fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    write_home(home(), fake_llm)
    break_the_config()
    assert main(["chat", "-m", "hello"]) == 2  # a gateway of its own would run on a guess
    assert "llm.context_window: Input should be a valid integer" in capsys.readouterr().err


def test_config_get_of_an_invalid_value_says_so_and_fails(
    fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    """It printed the default (128000: neither the file's value nor the gateway's) and
    exited 0."""
    write_home(home(), fake_llm)
    break_the_config()
    assert main(["config", "get", "llm.context_window"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "switchboard: llm.context_window is invalid: Input should be a valid integer, unable "
        f"to parse string as an integer (set by {home() / 'config.toml'} line 4)",
        "(no gateway is running, and none would start with it; fix it with `switchboard "
        "config set llm.context_window VALUE` or in the file)",
    ]
    assert main(["config", "get", "llm.model"]) == 0  # a valid key of the same file
    assert capsys.readouterr().out == "fake-model\n"


@pytest.mark.parametrize(
    "command",
    [
        ["pairing", "list"],
        ["cron", "list"],
        ["web", "--sign-out-all"],
        ["status"],
        ["logs"],
        ["trace"],
    ],
)
def test_a_command_reading_a_mistyped_home_says_there_is_none_and_makes_none(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
) -> None:
    """`pairing list` and `cron list` made the home, data/ and an empty store there, and
    said "No pairing requests"; after that `status` said "store: empty"."""
    typo = tmp_path / "typo"
    monkeypatch.setenv("SWITCHBOARD_HOME", str(typo))
    assert main(command) == 1
    assert not typo.exists()
    err = capsys.readouterr().err
    assert err.startswith(f"switchboard: there is no Switchboard home at {typo} (SWITCHBOARD_HOME)")
    assert err.rstrip().endswith("switchboard onboard`")
