"""The small things of the command line, in this process: what a command says when it is
given too little, too much or something wrong, and that it says only what is so."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import argcomplete
import pytest

from gateway.cli.main import build_parser, main
from gateway.cli.onboard.shell_command import switchboard
from gateway.cli.status import render
from gateway.config.settings import load_settings
from gateway.core.messages import ChatRef
from gateway.core.schedule_spec import ScheduleSpec
from gateway.runtime.app import Gateway
from gateway.store import Job, Store
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.test_live_settings import write_home


def home() -> Path:
    return Path(os.environ["SWITCHBOARD_HOME"])  # the test's own (tests/conftest.py)


def exits(argv: list[str]) -> int:
    """The status of a command line the parser refuses (it exits)."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert isinstance(stopped.value.code, int)
    return stopped.value.code


def test_config_set_shows_a_plain_value_as_written_and_writes_a_list_as_a_list(
    fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    """`config set telegram.allow_from 123` showed `**********` (it looked like a secret it
    hid) and wrote `allow_from = 123`."""
    write_home(home(), fake_llm)
    assert main(["config", "set", "telegram.allow_from", "123456789"]) == 0
    assert capsys.readouterr().out.startswith(
        f'telegram.allow_from = ["123456789"]  ({home() / "config.toml"})\n'
    )
    assert 'allow_from = ["123456789"]' in (home() / "config.toml").read_text()
    assert main(["config", "set", "telegram.admins", "[456, 789]"]) == 0
    assert capsys.readouterr().out.startswith('telegram.admins = ["456", "789"]  (')
    assert main(["config", "set", "telegram.token", "123:abc"]) == 0  # a secret: masked
    assert capsys.readouterr().out.startswith('telegram.token = "**********"  (')


def test_config_set_under_a_name_like_a_configured_one_is_taken_for_a_typo(
    fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    """`config set agents.wrok.api_key` made a second agent, wrok, that doctor then probed."""
    write_home(home(), fake_llm, agents={"work": {"model": "m"}})
    before = (home() / "config.toml").read_text()
    assert main(["config", "set", "agents.wrok.api_key", "sk-1"]) == 1
    assert capsys.readouterr().err == (
        "switchboard: not changed, there is no agents.wrok (did you mean `work`? agents has "
        "work); a new one that close to another is made by editing config.toml\n"
    )
    assert (home() / "config.toml").read_text() == before
    assert main(["config", "set", "agents.research.model", "m2"]) == 0  # a new name is fine


def test_config_keys_complete_in_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    """`switchboard config get llm.mo<TAB>` offered nothing (commands and flags did)."""
    line = "switchboard config get llm.mo"
    for name, value in {
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_SHELL": "bash",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "IFS": "\n",
    }.items():
        monkeypatch.setenv(name, value)
    said = io.StringIO()
    with pytest.raises(SystemExit):
        argcomplete.autocomplete(build_parser(), exit_method=_stop, output_stream=said)
    assert said.getvalue().split() == ["llm.model"]


def _stop(code: int = 0) -> None:
    raise SystemExit(code)


def test_a_command_left_out_shows_what_there_is_and_a_wrong_option_its_commands_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`switchboard` alone said only "the following arguments are required: COMMAND", and
    `switchboard run --bogus` showed the top-level usage."""
    assert exits([]) == 2
    err = capsys.readouterr().err
    assert "pairing      approve who may talk to the bot" in err  # the command list
    assert err.rstrip().endswith(
        "switchboard: error: the following arguments are required: COMMAND"
    )
    assert exits(["pairing"]) == 2
    err = capsys.readouterr().err
    assert "revoke       take away someone's access" in err
    assert exits(["run", "--bogus"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "usage: switchboard run [-h] [--home HOME] [-v]",
        "switchboard run: error: unrecognized arguments: --bogus",
    ]


def test_every_help_page_is_a_sentence_of_its_own_and_every_argument_is_explained() -> None:
    """`pairing list --help` showed `pairing`'s description, `browser create` and the
    `skills` actions a lower-case fragment, and several arguments had no help."""
    found = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                continue
            for name, sub in action.choices.items():
                full = f"{path} {name}".strip()
                said = sub.description or ""
                if not said[:1].isupper() or not said.rstrip().endswith((".", ")")):
                    found.append(f"{full}: not a sentence: {said!r}")
                if path and said == parser.description:
                    found.append(f"{full}: its parent's description")
                found.extend(
                    f"{full}: {arg.dest} has no help"
                    for arg in sub._actions
                    if not arg.option_strings
                    and not isinstance(arg, argparse._SubParsersAction)
                    and not arg.help
                )
                walk(sub, full)

    walk(build_parser(), "")
    assert found == []


def test_logs_refuses_a_negative_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert exits(["logs", "-n", "-3"]) == 2  # printed nothing, exit 0
    assert "argument -n/--lines: -3: a number of lines is 0 or more" in capsys.readouterr().err


def test_sign_out_all_prints_json_when_asked(
    fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    write_home(home(), fake_llm)
    assert main(["web", "--sign-out-all", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"signed_out": 0}


async def test_cron_shows_a_paused_job_as_paused_and_pausing_it_again_says_so(
    fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    write_home(home(), fake_llm)
    owner = {"channel": "telegram", "sender_id": "5", "role": "owner"}
    async with Store(home() / "data" / "switchboard.db") as store:
        spec = ScheduleSpec("cron", "UTC", cron="0 8 * * mon-fri")
        due = datetime(2030, 1, 7, 8, 0, tzinfo=UTC)
        await store.jobs.add(
            Job("9c18a563", spec, None, "Tea", ChatRef("telegram", "5"), owner, next_run=due)
        )
    assert await asyncio.to_thread(main, ["cron", "pause", "9c1"]) == 0
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["cron", "list"]) == 0
    assert capsys.readouterr().out.startswith("9c18a563  paused  ")  # was "next paused"
    assert await asyncio.to_thread(main, ["cron", "pause", "9c1"]) == 1
    assert capsys.readouterr().err == "switchboard: job 9c18a563 is paused already.\n"
    assert await asyncio.to_thread(main, ["cron", "remove", "nope"]) == 1
    assert capsys.readouterr().err.startswith("switchboard: no active or paused job nope")


def test_service_status_with_nothing_installed_is_not_run_s_another_one_runs(
    fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    write_home(home(), fake_llm)
    assert main(["service", "status"]) == 1  # 3 is `run`'s "another Switchboard runs"
    assert capsys.readouterr().err.startswith("switchboard: no service installed")


def test_status_after_a_channel_dropped_does_not_say_yet() -> None:
    report = {"running": True, "pid": 7, "ready": False, "url": None, "live_error": None}
    report |= {"channels": [], "models": [], "live": False, "store": "empty", "last_error": None}
    assert render(report)[0] == "gateway: running (pid 7), NOT ready (no channel connected)"


def test_onboard_says_what_a_channel_takes_in_one_line_and_refuses_answers_without_one(
    fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped answer was a pydantic error of four lines; --set and --test-to without
    --channel were ignored; a missing token was to go into .env by hand."""
    write_home(home(), fake_llm)
    assert main(["onboard", "--channel", "telegram", "--set", "tokn=1"]) == 1
    assert capsys.readouterr().err == (
        "switchboard: unknown answer `tokn` for telegram; did you mean `token`? (it asks for "
        "token); nothing saved\n"
    )
    assert main(["onboard", "--channel", "telegram", "--set", "dm_policy=never"]) == 1
    assert capsys.readouterr().err == (
        "switchboard: telegram.dm_policy: Input should be 'pairing', 'allowlist', 'open' or "
        "'disabled'; nothing saved\n"
    )
    assert main(["onboard", "--set", "token=1"]) == 2
    assert capsys.readouterr().err.startswith(
        "switchboard: --set answers a channel's setup: give --channel too (telegram, "
    )
    assert main(["onboard", "--channel", "telegram", "--non-interactive"]) == 1
    assert (
        "FAIL: telegram.token is not set: answer it with --set token=... (or run this in a "
        "terminal, which asks)"
    ) in capsys.readouterr().err


def test_onboard_without_a_key_for_anthropic_asks_for_one_not_for_ollama(
    fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "Set the API key you gave" (none was) "or point the base URL you gave ... at
    a local server such as Ollama" (which is no Anthropic server)."""
    write_home(home(), fake_llm)
    (home() / "config.toml").write_text("")  # no model configured, no key
    code = main(["onboard", "--provider", "anthropic", "--non-interactive"])
    out = capsys.readouterr().out
    assert code == 1
    assert (
        "Give an API key (--api-key, or the API key answer) or set ANTHROPIC_API_KEY, or give "
        "the base URL (--base-url, or the Base URL answer) of an Anthropic-compatible server "
        "of your own."
    ) in out
    assert "Ollama" not in out


def test_onboard_without_a_terminal_names_no_file_that_is_not_there(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["onboard"]) == 1
    err = capsys.readouterr().err
    assert f"(or write [llm] in {home() / 'config.toml'} yourself" in err
    assert not (home() / "config.toml").exists()
    examples = [line for line in err.splitlines() if "--model llama3.1" in line]
    # named as the "Next:" lines name it: by its full path unless the shell finds it
    assert examples and all(line.startswith(f"  {switchboard('onboard')} ") for line in examples)


async def test_onboarding_a_channel_beside_a_running_gateway_does_not_say_start_it(
    fake_llm: FakeLLM, tg: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    write_home(home(), fake_llm)
    async with Gateway(load_settings(home=home())):
        argv = ["onboard", "--channel", "telegram", "--set", f"token={tg.token}"]
        argv += ["--set", f"base_url={tg.base_url}"]
        assert await asyncio.to_thread(main, argv) == 0
    out = capsys.readouterr().out
    assert f"The running gateway (pid {os.getpid()}) starts telegram with these settings" in out
    [step] = [line for line in out.splitlines() if line.startswith("Next: ")]
    assert "run`" not in step and "pairing approve CODE --owner" in step
