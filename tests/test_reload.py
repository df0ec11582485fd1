"""A running gateway takes up configuration changes: live where it can, and says which keys
need a restart (gateway/runtime/reload.py); `switchboard config set` tells what happened."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from channels.memory import MemoryChannel
from gateway.config.settings import load_settings
from gateway.config.toml.config_file import write_key
from gateway.runtime.app import Gateway
from gateway.runtime.reload import ReloadReport, config_sha, read_report
from tests.fakes.llm import FakeLLM, Recorded, Step, text
from tests.test_cli import cli_env, switchboard
from tests.test_cli_commands import running_gateway


def home_with_config(home: Path, fake: FakeLLM) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.toml"
    config.write_text(
        "[llm]\n"
        f'base_url = "{fake.openai_url}"\n'
        'model = "fake-model"\n'
        'api_key = "sk-reload-test-1234"\n'
        "max_retries = 0\n"
        "\n[agent]\n"
        "reflection = false\n"
    )
    return config


async def reported(
    data_dir: Path, wanted: Callable[[ReloadReport], bool], timeout: float = 20.0
) -> ReloadReport:
    """The gateway's reload report once it is the one wanted (another process writes it:
    there is nothing to wait on but the file)."""
    async with asyncio.timeout(timeout):
        while (report := read_report(data_dir)) is None or not wanted(report):  # noqa: ASYNC110 - a file
            await asyncio.sleep(0.05)
    return report


@asynccontextmanager
async def gateway_at(
    home: Path, fake: FakeLLM
) -> AsyncIterator[tuple[Gateway, Path, MemoryChannel]]:
    """A gateway whose settings come from a config.toml, as `switchboard run` loads them."""
    config = home_with_config(home, fake)
    channel = MemoryChannel()
    async with Gateway(load_settings(home=home), channels=[channel]) as gateway:
        yield gateway, config, channel


def asked(request: Recorded) -> int:
    return int(request.body["max_tokens"])


def answer(request: Recorded) -> Step:
    return text("fine")


async def test_a_reload_applies_live_keys_and_names_the_others(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = answer
    async with gateway_at(tmp_path / "home", fake_llm) as (gateway, config, channel):
        settings = gateway.settings
        await channel.push("hello")
        await channel.wait_for(1)
        write_key(config, "llm.context_window", 8_000)
        write_key(config, "llm.max_tokens", 1_000)
        write_key(config, "agent.name", "Robin")
        report = await gateway.config_reload.reload()
        await channel.push("hello again")
        await channel.wait_for(2)
        model = gateway.agent.model
    assert report.applied == ("llm.context_window", "llm.max_tokens")
    assert report.restart == ("agent.name",)
    assert model.context_window == 8_000
    before, after = fake_llm.requests
    assert asked(before) == 4_096 and asked(after) == 1_000  # the new answer size, live
    saved = read_report(settings.data_dir)
    assert saved is not None and saved.applied == report.applied


async def test_each_reload_names_only_what_its_own_change_needs(
    tmp_path: Path, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    async with gateway_at(tmp_path / "home", fake_llm) as (gateway, config, _):
        write_key(config, "agent.name", "Robin")
        await gateway.config_reload.reload()
        write_key(config, "storage.retention_days", 10)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="gateway.runtime.reload"):
            report = await gateway.config_reload.reload()
    assert report.restart == ("agent.name", "storage.retention_days")  # both still wait
    said = [r.getMessage() for r in caplog.records if "needs a restart" in r.getMessage()]
    assert said == [
        "configuration reloaded (asked): storage.retention_days changed and needs a restart "
        "to apply"
    ]


@pytest.mark.parametrize(
    ("broken", "said"),
    [(b"\n[llm.oops\n", "is not valid TOML"), (b"\n# caf\xe9\n", "is not UTF-8 text: byte 0xe9")],
)
async def test_an_invalid_file_is_refused_and_the_running_settings_stay(
    tmp_path: Path, fake_llm: FakeLLM, broken: bytes, said: str
) -> None:
    async with gateway_at(tmp_path / "home", fake_llm) as (gateway, config, _):
        settings = gateway.settings
        config.write_bytes(config.read_bytes() + broken)
        report = await gateway.config_reload.reload()
        model = gateway.agent.model
    assert report.error is not None and said in report.error, report.error
    assert model.context_window == settings.llm.context_window


async def test_a_file_fixed_after_a_refused_reload_says_it_is_valid_again(
    tmp_path: Path, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """The fixed file changed no setting, so nothing was logged: the log's last word about
    the configuration stayed "configuration not reloaded", what `switchboard logs` shows."""
    async with gateway_at(tmp_path / "home", fake_llm) as (gateway, config, _):
        good = config.read_text()
        config.write_text(good.replace('model = "fake-model"', 'model = "fake-model"\nmodle = 1'))
        with caplog.at_level(logging.INFO, logger="gateway.runtime.reload"):
            await gateway.config_reload.reload()
            config.write_text(good)
            report = await gateway.config_reload.reload()
            await gateway.config_reload.reload()  # once only
    assert report.error is None
    said = [r.getMessage() for r in caplog.records if r.name == "gateway.runtime.reload"]
    assert said[0].startswith("configuration not reloaded (asked): Invalid configuration:")
    assert said[1:] == ["configuration valid again (asked): nothing to change"]


async def test_editing_the_file_is_noticed_without_a_signal(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with gateway_at(tmp_path / "home", fake_llm) as (gateway, config, _):
        settings = gateway.settings
        write_key(config, "limits.user_turns_per_hour", 5)
        report = await reported(settings.data_dir, lambda r: True)  # the watcher: every 2 s
        budget_limits = gateway.budget._limits
    assert report.applied == ("limits.user_turns_per_hour",)
    assert budget_limits.user_turns_per_hour == 5


@pytest.mark.slow
async def test_config_set_says_whether_the_running_gateway_applied_it(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    code, out, err = await switchboard("config", "set", "llm.context_window", "16000", env=env)
    assert code == 0 and "no gateway is running: it takes effect when one starts" in out, err
    async with running_gateway(env):
        code, out, err = await switchboard("config", "set", "llm.context_window", "9000", env=env)
        assert code == 0, err
        assert "applied by the running gateway (pid " in out
        code, out, err = await switchboard("config", "set", "agent.name", "Robin", env=env)
        assert code == 0, err
        assert "needs a restart to apply agent.name" in out
        assert "switchboard run" in out
        code, out, _ = await switchboard("status", "--json", env=env)
        pid = json.loads(out)["pid"]
        # SIGHUP: the same reload at once (an edit the watcher has not seen yet)
        (home / "config.toml").write_text(
            (home / "config.toml").read_text().replace("9000", "10000")
        )
        os.kill(pid, signal.SIGHUP)
        sha = config_sha(home)
        report = await reported(home / "data", lambda r: r.config_sha == sha)
        assert report.applied == ("llm.context_window",)
        code, out, _ = await switchboard("logs", env=env)
    assert "configuration reloaded" in out and "applied llm.context_window" in out
    assert "agent.name changed and needs a restart to apply" in out
