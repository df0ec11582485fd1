"""A channel is a plug-in: a package outside Switchboard adds one by an entry point, without a
line of gateway/ changed, and its section works like a built-in channel's.

The package is tests/fakes/fakechannel, "installed" the way pip leaves a package: its folder
and a ``*.dist-info`` with ``entry_points.txt`` in a directory on ``PYTHONPATH``.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
from pathlib import Path

import aiohttp
import pytest

from gateway.config.plugins import token_patterns
from gateway.core.system.logs import Redactor
from tests.fakes.llm import FakeLLM
from tests.fakes.mailservers import free_port
from tests.nodes import start_node
from tests.test_cli import cli_env, switchboard

pytestmark = pytest.mark.slow

PACKAGE = Path(__file__).parent / "fakes" / "fakechannel"
TOKEN = "fake-token-123"


def install(site: Path) -> Path:
    """The fake channel's package in ``site``, as an installer leaves it."""
    shutil.copytree(PACKAGE, site / "fakechannel", ignore=shutil.ignore_patterns("__pycache__"))
    info = site / "fakechannel-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakechannel\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[switchboard.channels]\nfakechannel = fakechannel:PLUGIN\n"
    )
    return site


async def test_a_package_adds_a_channel_that_is_configured_checked_and_answers(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home, port = tmp_path / "home", free_port()
    site = install(tmp_path / "site")
    env = cli_env(
        home,
        fake_llm,
        PYTHONPATH=str(site),
        SWITCHBOARD_WEB__ENABLED="false",
        SWITCHBOARD_AGENT__REFLECTION="false",
        SWITCHBOARD_HEARTBEAT__ENABLED="false",
        SWITCHBOARD_FAKECHANNEL__TOKEN=TOKEN,  # from the environment...
    )
    assert (await switchboard("onboard", env=env))[0] == 0
    with (home / "config.toml").open("a") as config:  # ...and from config.toml
        config.write(f'\n[fakechannel]\nport = {port}\nowners = ["ada"]\n')

    code, out, err = await switchboard("config", "get", "fakechannel.port", env=env)
    assert (code, out.strip()) == (0, str(port)), err
    code, out, err = await switchboard("doctor", env=env)
    assert f"[ok  ] channel fakechannel  listening on 127.0.0.1:{port}" in out, out + err

    typo = {**env, "SWITCHBOARD_FAKECHANNEL__PROT": "1"}
    code, _, err = await switchboard("chat", "-m", "hello", env=typo)
    assert code == 2
    assert "fakechannel.prot: unknown key; did you mean `port`?" in err
    assert "SWITCHBOARD_FAKECHANNEL__PROT" in err  # who set it
    not_installed = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    code, _, err = await switchboard("chat", "-m", "hello", env=not_installed)
    assert code == 2 and "fakechannel: unknown key" in err

    node = await start_node("fake", env)
    try:
        await asyncio.wait_for(node.ready.wait(), 30)
        async with aiohttp.ClientSession() as http:
            said = {"token": TOKEN, "from": "ada", "text": "hello", "id": "m1"}
            async with http.post(f"http://127.0.0.1:{port}/say", json=said) as response:
                assert response.status == 200
                assert await response.json() == {"accepted": "new", "answer": "echo: hello"}
            wrong = {**said, "token": "guessed-token", "id": "m2"}
            async with http.post(f"http://127.0.0.1:{port}/say", json=wrong) as response:
                assert response.status == 403
    finally:
        node.process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(node.process.wait(), 30)
    assert [r.user_texts for r in fake_llm.requests][1:] == [["hello"]]  # after doctor's ping


async def test_a_plugin_that_does_not_load_is_a_configuration_error_naming_its_package(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    site = install(tmp_path / "site")
    broken = site / "broken-2.0.dist-info"
    broken.mkdir()
    (broken / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 2.0\n")
    (broken / "entry_points.txt").write_text("[switchboard.channels]\nsms = sms_channel:PLUGIN\n")
    env = cli_env(tmp_path / "home", fake_llm, PYTHONPATH=str(site))
    problem = (
        "the channel plug-in entry point sms = sms_channel:PLUGIN of broken failed to load: "
        "ModuleNotFoundError: No module named 'sms_channel'"
    )
    code, out, err = await switchboard("chat", "-m", "hello", env=env)
    assert (code, out, err.strip()) == (2, "", f"switchboard: {problem}")
    code, out, _ = await switchboard("doctor", env=env)  # reports it, and checks the rest
    assert code == 1 and f"[FAIL] config        {problem}" in out


def test_the_shapes_of_the_channels_credentials_are_redacted_whoever_they_belong_to() -> None:
    """Each channel names its platform's token shapes; logs, traces and tool results hide
    them even when they are not this gateway's (a token pasted into a chat, a stranger's)."""
    redact = Redactor(patterns=token_patterns())
    telegram = "123456789:AAH-abcdefghijklmnopqrstuvwxyz012345"
    line = (
        f"GET /bot{telegram}/getMe, then {telegram} and xoxb-1234567890-abcdef, xapp-1-A0B1C2D3E4"
    )
    assert redact(line) == "GET /bot[REDACTED]/getMe, then [REDACTED] and [REDACTED], [REDACTED]"
