"""What ``switchboard run`` says and its exit status when it cannot start, as a person and a
supervisor see them: one line naming what to fix, and a status the service does not restart
on when only a person can fix it (gateway/cli/exit_codes.py, docs/reliability.md#exit-codes).

In-process (``main``, as the console script calls it); the entry point's own import failure
needs a process of its own: tests/test_upgrade.py."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.cli import exit_codes
from gateway.cli.entry import main
from gateway.cli.service.command import systemd_unit
from gateway.cli.service.launchd import STOPPED_FILE
from gateway.config.settings import Settings
from gateway.core.system.lock import ProcessLock
from gateway.runtime.deployment import LOCK_FILE

ROOT = Path(__file__).resolve().parents[1]
WEBHOOK = {
    "SWITCHBOARD_TELEGRAM__TOKEN": "123456:telegram-token-of-this-test",
    "SWITCHBOARD_TELEGRAM__BASE_URL": "http://127.0.0.1:9",  # never reached: nothing starts
    "SWITCHBOARD_TELEGRAM__MODE": "webhook",
    "SWITCHBOARD_WEB__PORT": "0",
}


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another program listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def said(capsys: pytest.CaptureFixture[str]) -> str:
    """What the command said on stderr: one line, the log's lines left out."""
    lines = [line for line in capsys.readouterr().err.splitlines() if not line[:4].isdigit()]
    assert len(lines) == 1, lines
    return lines[0]


def test_a_channel_setting_found_wrong_after_the_settings_loaded_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Telegram's webhook mode without its URL is found when the channel is built, after
    the settings loaded: exit 2, which the service does not restart on (before: 1)."""
    for name, value in WEBHOOK.items():
        monkeypatch.setenv(name, value)
    assert main(["run"]) == exit_codes.CONFIG
    line = said(capsys)
    assert line.startswith("switchboard: telegram.mode is webhook but telegram.webhook_url")
    assert "SWITCHBOARD_TELEGRAM__WEBHOOK_URL" in line


def test_a_channels_taken_port_stops_the_start_naming_its_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], taken_port: int
) -> None:
    """Telegram's webhook port held by another program: one line naming the port and the
    setting, exit 7, before the store is opened (before: an OSError traceback, exit 1,
    after the store was migrated)."""
    for name, value in WEBHOOK.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SWITCHBOARD_TELEGRAM__WEBHOOK_URL", "https://bot.example.test/telegram")
    monkeypatch.setenv("SWITCHBOARD_TELEGRAM__WEBHOOK_PORT", str(taken_port))
    assert main(["run"]) == exit_codes.PORT_IN_USE
    assert said(capsys) == (
        f"switchboard: the Telegram webhook cannot listen on 127.0.0.1:{taken_port}: another "
        f"program listens on port {taken_port}. Stop it, or set telegram.webhook_port "
        '(SWITCHBOARD_TELEGRAM__WEBHOOK_PORT) to a free port, or telegram.mode = "polling"'
    )
    assert not (Settings().data_dir / "switchboard.db").exists()


def test_launchd_restarts_a_crash_but_not_what_a_person_must_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The launchd agent keeps the gateway running while its stopped file is absent
    (gateway/cli/service/command.py): a configuration error writes it (launchd would otherwise
    start the gateway every few seconds, as it did on any status but 0); a start that
    fails in a way a restart may change (another process holds the home: 3) leaves it
    absent, and the exit statuses stay what they are."""
    stopped = tmp_path / "home" / "data" / "launchd-stopped"
    monkeypatch.setenv(STOPPED_FILE, str(stopped))
    monkeypatch.setenv("SWITCHBOARD_WEB__PORT", "0")
    monkeypatch.setenv("SWITCHBOARD_LLM__PROVIDER", "gemini")
    assert main(["run"]) == exit_codes.CONFIG
    assert "llm.provider" in capsys.readouterr().err
    text = stopped.read_text()
    assert "exited with status 2" in text and "deleting this file" in text

    monkeypatch.delenv("SWITCHBOARD_LLM__PROVIDER")
    with ProcessLock(Settings().data_dir / LOCK_FILE):  # a `switchboard run` in a terminal
        assert main(["run"]) == exit_codes.ANOTHER_INSTANCE
    assert "another Switchboard process" in said(capsys)
    assert not stopped.exists()  # launchd starts it again (as systemd does)


def test_the_exit_codes_table_lists_every_status_and_what_the_unit_restarts() -> None:
    """docs/reliability.md's table is the one list of exit statuses: each of
    gateway/cli/exit_codes.py, and "no" under "restarted" for exactly the ones the systemd
    unit does not restart on."""
    docs = (ROOT / "docs" / "reliability.md").read_text()
    table = docs.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \|(.*)$", table, re.MULTILINE)
    statuses = {
        value for name, value in vars(exit_codes).items() if name.isupper() and type(value) is int
    }
    assert {int(code) for code, _ in rows} == statuses
    not_restarted = {int(code) for code, rest in rows if rest.split("|")[-2].strip() == "no"}
    assert not_restarted == {exit_codes.OK, *exit_codes.A_PERSON_MUST_ACT}
    unit = systemd_unit(Settings())
    prevented = re.search(r"^RestartPreventExitStatus=(.*)$", unit, re.MULTILINE)
    assert prevented is not None
    assert {int(code) for code in prevented[1].split()} == set(exit_codes.A_PERSON_MUST_ACT)
