"""The everyday commands as a user runs them (real subprocesses): status (also against a
running gateway), --json outputs, help pages, global flags after the command, completion,
logs, pairing, cron and trace."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import sys
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, time
from pathlib import Path

import pytest

from gateway.cli.exit_codes import PORT_IN_USE
from gateway.cli.main import build_parser
from gateway.config.plugins import channel_plugins
from gateway.core.messages import InboundMessage
from gateway.store import Store
from tests.fakes.llm import FakeLLM, calls, text
from tests.fakes.telegram import FakeTelegram
from tests.test_cli import cli_env, switchboard

pytestmark = pytest.mark.slow


@asynccontextmanager
async def running_gateway(env: dict[str, str]) -> AsyncIterator[str]:
    """``switchboard run`` in a subprocess; yields the web chat's URL once it is ready."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "run",
        env={**env, "SWITCHBOARD_WEB__PORT": "0"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(30):
            line = (await process.stdout.readline()).decode()
            assert line.startswith("web chat: "), line
            assert (await process.stdout.readline()).decode().endswith("ready\n")
        yield line.split()[2]
    finally:
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0


def subcommands(parser: argparse.ArgumentParser, path: str = "") -> list[tuple[str, str]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((f"{path} {name}".strip(), sub.description or ""))
                found += subcommands(sub, f"{path} {name}")
    return found


def test_every_command_has_a_description_on_its_help_page() -> None:
    pages = subcommands(build_parser())
    assert len(pages) >= 20
    assert [name for name, description in pages if len(description) < 15] == []


def test_the_help_and_the_package_name_every_channel_and_program_interface() -> None:
    """`switchboard --help` and the package's description, kept up with the channels."""
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    texts = [build_parser().description or "", pyproject["project"]["description"]]
    for said in (" ".join(t.lower().split()) for t in texts):
        for name in (
            *channel_plugins(),
            "web chat",
            "terminal",
            "webhooks",
            "openai-compatible api",
        ):
            assert name in said, (name, said)


async def test_status_says_the_work_a_stop_left_is_resumed_at_the_next_start(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """After a crash, `status` shows a message waiting with no gateway running: it says the
    next start takes it up (it showed the count alone)."""
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    async with Store(home / "data" / "switchboard.db") as store:
        message = InboundMessage("telegram", "42", "42", "are you there?", "m1")
        await store.journal.accept(message)
    code, out, err = await switchboard("status", env=env)
    assert code == 0, err
    assert "messages waiting: 1" in out
    assert "the next start resumes the turns and answers the messages" in out


async def test_status_json_when_nothing_runs(tmp_path: Path, fake_llm: FakeLLM) -> None:
    env = cli_env(tmp_path / "home", fake_llm)
    (tmp_path / "home").mkdir()  # a home, nothing run in it yet
    code, out, err = await switchboard("status", "--json", env=env)
    assert code == 0, err
    report = json.loads(out)
    assert report["running"] is False and report["live"] is False
    assert report["store"] == "empty" and report["waiting"] == 0 and report["unsent"] == 0
    code, out, _ = await switchboard("status", env=env)
    assert re.fullmatch(
        r"gateway: not running \(start it with `\S*switchboard run`\)", out.splitlines()[0]
    )
    assert "{" not in out  # no raw Python data
    # given --home, what it suggests is given it too (else it would run another home)
    other = tmp_path / "other home"
    code, _, err = await switchboard("--home", str(other), "status", env=env)
    assert code == 1 and f"there is no Switchboard home at {other} (--home)" in err
    assert f"switchboard --home '{other}' onboard`" in err


async def test_status_asks_the_running_gateway(tmp_path: Path, fake_llm: FakeLLM) -> None:
    home = tmp_path / "home"
    token = "a-long-enough-token-1234"
    env = cli_env(home, fake_llm, SWITCHBOARD_WEB__TOKEN=token)
    assert (await switchboard("chat", "-m", "hello", env=env))[0] == 0  # something in the store
    async with running_gateway(env) as url:
        # --home after the command wins; the local socket is the proof, not the web token.
        elsewhere = cli_env(tmp_path / "other", fake_llm, SWITCHBOARD_WEB__TOKEN=token)
        code, out, err = await switchboard("status", "--json", "--home", str(home), env=elsewhere)
        assert code == 0, err
        report = json.loads(out)
        assert report["running"] is True and report["live"] is True, report
        assert report["url"] == url and report["ready"] is True
        channels = {c["name"]: c["connected"] for c in report["channels"]}
        assert channels == {"webchat": True, "terminal": True}  # `chat` attaches to the latter
        assert (report["turns_running"], report["queue_depth"]) == (0, 0)
        [model] = report["models"]
        assert model["name"].endswith("(openai)") and model["settings"] == ["llm"]
        assert model["cooling_until"] is None
        assert (report["waiting"], report["unsent"], report["failed"]) == (0, 0, 0)
        assert report["heartbeat_target"] == "terminal:local"  # the owner chatted there last
        code, out, _ = await switchboard("status", env=env)
        assert out.splitlines()[0].startswith(f"gateway: running (pid {report['pid']}), ready")
        assert "  channel webchat: connected (0 open page(s))" in out
        assert "turns running: 0, messages queued behind them: 0" in out
        wrong = {**env, "SWITCHBOARD_WEB__TOKEN": "another-token-0000000000"}
        report = json.loads((await switchboard("status", "--json", env=wrong))[1])
        assert report["running"] is True and report["live"] is True


async def test_listings_print_json(tmp_path: Path, fake_llm: FakeLLM) -> None:
    env = cli_env(tmp_path / "home", fake_llm)
    (tmp_path / "home").mkdir()
    assert json.loads((await switchboard("cron", "list", "--json", env=env))[1]) == []
    assert json.loads((await switchboard("pairing", "list", "--json", env=env))[1]) == []
    code, _, err = await switchboard("trace", env=env)
    assert code == 1
    assert err.startswith("switchboard: no turns traced yet")
    fake_llm.queue(
        calls(("cron", {"action": "add", "schedule": "every day at 9:00", "message": "Tea!"})),
        text("Done: tea every day at 9."),
    )
    await switchboard("chat", "-m", "remind me of tea every day at 9", env=env)
    async with Store(tmp_path / "home" / "data" / "switchboard.db") as store:
        await store.pairings.request(
            channel="telegram", sender_id="77", sender_name="Robin", chat_id="77"
        )
    [job] = json.loads((await switchboard("cron", "list", "--json", env=env))[1])
    assert "09:00 every day" in job["schedule"] and job["text"] == "Tea!"
    assert job["target"] == "terminal:local" and job["runs"] == 0
    assert datetime.fromisoformat(job["next_run"]).time() == time(9, 0)
    assert {"id", "task_type", "agent"} <= set(job) and job["state"] == "active"
    assert (await switchboard("cron", "pause", job["id"], env=env))[:2] == (
        0,
        f"Paused job {job['id']}.\n",
    )
    [paused] = json.loads((await switchboard("cron", "list", "--json", env=env))[1])
    assert paused["state"] == "paused"
    assert (await switchboard("cron", "pause", job["id"], env=env))[0] == 1  # already paused
    assert (await switchboard("cron", "resume", job["id"][:4], env=env))[:2] == (
        0,
        f"Resumed job {job['id']}.\n",  # the start of an id is enough, as `trace` takes
    )
    [resumed] = json.loads((await switchboard("cron", "list", "--json", env=env))[1])
    assert resumed["state"] == "active"
    [request] = json.loads((await switchboard("pairing", "list", "--json", env=env))[1])
    assert request["channel"] == "telegram" and request["sender_id"] == "77"
    assert request["sender_name"] == "Robin" and request["state"] == "pending"
    assert request["expires_at"] > request["created_at"] and len(request["code"]) >= 6
    await switchboard("chat", "-m", "hello", env=env)
    code, out, _ = await switchboard("trace", "--json", env=env)
    trace = json.loads(out)
    assert code == 0 and trace["turn"] and trace["events"]
    assert {"t", "event"} <= set(trace["events"][0])


async def test_pairing_revoke_names_an_unknown_channel(tmp_path: Path, fake_llm: FakeLLM) -> None:
    env = cli_env(tmp_path / "home", fake_llm)
    (tmp_path / "home").mkdir()
    code, _, err = await switchboard("pairing", "revoke", "bogus", "123", env=env)
    assert code == 1
    assert (
        err
        == "switchboard: unknown channel 'bogus': pairing is for telegram, discord, slack, whatsapp, matrix, signal, irc, email.\n"
    )


async def test_logs_shows_and_follows_the_log(tmp_path: Path, fake_llm: FakeLLM) -> None:
    env = cli_env(tmp_path / "home", fake_llm)
    (tmp_path / "home").mkdir()
    code, _, err = await switchboard("logs", env=env)
    assert code == 1 and "switchboard: no log yet" in err
    follow = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "logs",
        "-f",
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    assert follow.stdout is not None
    try:
        await switchboard("chat", "-m", "hello", env=env)  # writes the log file
        async with asyncio.timeout(30):
            while b"ready" not in await follow.stdout.readline():
                pass
        # SIGTERM, not SIGINT: a suite started with SIGINT ignored (a background job of a
        # shell without job control) hands that on to its children.
        follow.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(follow.wait(), 30) == 0
    finally:
        if follow.returncode is None:  # never left running, whatever failed above
            follow.kill()
            await follow.wait()
    code, out, _ = await switchboard("logs", "-n", "1", env=env)
    assert code == 0 and len(out.splitlines()) == 1


@pytest.mark.parametrize("command", [("status", "--json"), ("config", "show")])
async def test_output_into_a_closed_pipe_ends_quietly(
    tmp_path: Path, fake_llm: FakeLLM, command: tuple[str, ...]
) -> None:
    """`switchboard status --json | head`: the reader is gone before the output is written
    (here it never existed), and the command ends like any Unix tool, without a traceback."""
    (tmp_path / "home").mkdir()
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway",
            *command,
            env=cli_env(tmp_path / "home", fake_llm),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_end,
            stderr=asyncio.subprocess.PIPE,
        )
    finally:
        os.close(write_end)
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 141
    assert err.decode() == ""


# what each shell's script sets when it calls switchboard, and how the answer starts
SHELL_PROTOCOLS = {
    "bash": ("complete ", {}, "config"),
    "zsh": ("#compdef switchboard", {"_ARGCOMPLETE_SUPPRESS_SPACE": "1"}, "config:show, get"),
    "fish": ("complete --command switchboard", {"_ARGCOMPLETE_DFS": "\t"}, "config"),
}


@pytest.mark.parametrize("shell", sorted(SHELL_PROTOCOLS))
async def test_completion_completes_commands(tmp_path: Path, fake_llm: FakeLLM, shell: str) -> None:
    marker, protocol, answer = SHELL_PROTOCOLS[shell]
    code, script, _ = await switchboard("completion", shell, env=cli_env(tmp_path, fake_llm))
    assert code == 0 and marker in script and "switchboard" in script
    answers = tmp_path / "answers"
    line = "switchboard con"
    env = cli_env(
        tmp_path,
        fake_llm,
        _ARGCOMPLETE="1",
        _ARGCOMPLETE_SHELL=shell,
        COMP_LINE=line,
        COMP_POINT=str(len(line)),
        _ARGCOMPLETE_STDOUT_FILENAME=str(answers),
        **protocol,
    )
    await switchboard(env=env)
    assert answers.read_text().startswith(answer)


@pytest.mark.skipif(not shutil.which("bash"), reason="bash is not installed")
async def test_bash_loads_the_completion_script(tmp_path: Path, fake_llm: FakeLLM) -> None:
    probe = f"source <({sys.executable} -m gateway completion bash); complete -p switchboard"
    process = await asyncio.create_subprocess_exec(
        "bash", "-c", probe, stdout=asyncio.subprocess.PIPE, env=cli_env(tmp_path, fake_llm)
    )
    out, _ = await asyncio.wait_for(process.communicate(), 30)
    assert out.decode().rstrip().endswith(" switchboard")


async def test_a_taken_web_port_stops_the_start_before_any_channel_and_is_logged(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    home = tmp_path / "home"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = cli_env(
            home,
            fake_llm,
            SWITCHBOARD_WEB__PORT=str(port),
            SWITCHBOARD_TELEGRAM__TOKEN=tg.token,
            SWITCHBOARD_TELEGRAM__BASE_URL=tg.base_url,
        )
        code, _, err = await switchboard("run", env=env)
    assert code == PORT_IN_USE  # the service does not restart on it (before: 1)
    assert (
        f"switchboard: the web server cannot listen on 127.0.0.1:{port}: another program "
        f"listens on port {port}. Stop it, or set web.port (SWITCHBOARD_WEB__PORT) to a free "
        "port, or web.enabled = false\n"
    ) in err
    assert tg.calls == []  # Telegram was never contacted
    log = (home / "data" / "logs" / "switchboard.log").read_text()
    assert (
        f"ERROR gateway.cli.main: run failed: the web server cannot listen on 127.0.0.1:{port}"
        in log
    )


async def test_whoever_holds_the_pairing_code_becomes_the_owner_with_approve_owner(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    """The first hour on Telegram: the person who set the bot up writes to it, gets a
    pairing code like anyone, and approves it at the machine with ``--owner``: the running
    gateway takes them as the owner (before, approving made them a member, with a
    member's allowance and tools)."""
    home = tmp_path / "home"
    env = cli_env(
        home,
        fake_llm,
        SWITCHBOARD_TELEGRAM__TOKEN=tg.token,
        SWITCHBOARD_TELEGRAM__BASE_URL=tg.base_url,
        SWITCHBOARD_TELEGRAM__POLL_TIMEOUT_SECONDS="1",
    )
    async with running_gateway(env):
        await tg.say("hello, it's me")
        [notice] = await tg.wait_sent(1, timeout=30)
        code_word = re.search(r"\b([A-Z2-9]{8})\b", notice.params["text"])
        assert code_word is not None, notice.params["text"]
        code, out, err = await switchboard(
            "pairing", "approve", code_word.group(1), "--owner", env=env
        )
        assert code == 0, err
        assert "Approved telegram user 42 (Dana)." in out
        assert 'telegram.owners = ["42"]' in out
        assert "applied by the running gateway" in out
        await tg.say("/model")
        *_, answer = await tg.wait_sent(3, timeout=30)  # the welcome, then the answer
    assert answer.params["text"].startswith("Models: "), answer.params["text"]  # not refused
    assert 'owners = ["42"]' in (home / "config.toml").read_text()


async def test_approving_on_a_channel_without_an_owner_says_how_to_become_one(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    (home / "data").mkdir(parents=True)
    async with Store(home / "data" / "switchboard.db") as store:
        requested = await store.pairings.request(
            channel="discord", sender_id="1234", sender_name="Ann", chat_id="1234"
        )
    assert requested.request is not None
    code, out, err = await switchboard("pairing", "approve", requested.request.code, env=env)
    assert code == 0, err
    assert "note: discord has no owner yet; if that was you," in out
    assert """`switchboard config set discord.owners '["1234"]'`""" in out


async def test_the_log_says_when_the_gateway_stops_and_chat_v_debugs_only_on_its_console(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    async with running_gateway(env):
        code, _, err = await switchboard("chat", "-v", "-m", "hello", env=env)
        assert code == 0, err
        assert " DEBUG " in err  # -v: this console
    log = (home / "data" / "logs" / "switchboard.log").read_text()
    assert " DEBUG " not in log  # not the log the gateway writes
    assert "INFO gateway.cli.stopping: stopping (nothing running)" in log
    assert log.rstrip().endswith("INFO gateway.cli.stopping: stopped")
