"""A damaged, foreign or too-new database stops the start with the path and what to do;
it is never replaced by a new empty store. `doctor` runs integrity_check; `backup` copies
the store while the gateway writes, and the copy restores."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from gateway.cli.exit_codes import STORE_REFUSED
from gateway.cli.main import main
from gateway.core.errors import StoreDamagedError
from gateway.core.messages import InboundMessage
from gateway.store import Store
from gateway.store.engine.schema import MIGRATIONS
from tests.fakes.llm import FakeLLM
from tests.test_cli import cli_env, switchboard


async def _store_with_history(path: Path, messages: int = 400) -> None:
    """A real store holding a pending inbound message and enough rows to span many pages."""
    async with Store(path) as store:
        for index in range(messages):
            await store.journal.accept(_message(f"message {index} " + "x" * 400, str(index)))


def _message(text: str, message_id: str) -> InboundMessage:
    return InboundMessage(
        channel="telegram",
        chat_id="42",
        sender_id="7",
        sender_name="Dana",
        text=text,
        platform_message_id=message_id,
    )


def _truncate(path: Path) -> None:
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.truncate(size // 2)


def _zero(path: Path) -> None:
    path.write_bytes(b"")


def _garbage_pages(path: Path) -> None:
    with path.open("r+b") as file:
        file.seek(4096 * 3)
        file.write(bytes(range(256)) * 16 * 6)  # six pages of nonsense in the middle


def _garbage_header(path: Path) -> None:
    with path.open("r+b") as file:
        file.write(b"this is not sqlite at all" * 4)


def _newer_schema(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    conn.close()


def _foreign(path: Path) -> None:
    path.unlink()
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO photos (name) VALUES ('cat.jpg')")
    conn.commit()
    conn.close()


DAMAGE = {
    "truncated": (_truncate, "cannot be read"),
    "zero bytes": (_zero, "is empty (0 bytes)"),
    "garbage pages": (_garbage_pages, "is damaged"),
    "garbage header": (_garbage_header, "cannot be read"),
    "newer schema": (_newer_schema, "newer Switchboard"),
    "foreign database": (_foreign, "is not a Switchboard database"),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
async def test_a_damaged_store_is_refused_with_the_path_and_never_replaced(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "data" / "switchboard.db"
    await _store_with_history(path)
    damage, said = DAMAGE[kind]
    damage(path)
    before = path.read_bytes()
    with pytest.raises(StoreDamagedError) as caught:
        async with Store(path):
            pass
    message = str(caught.value)
    assert said in message
    assert str(path) in message
    assert caught.value.path == path
    assert "switchboard doctor" in message or "Upgrade" in message
    assert path.read_bytes() == before  # untouched: no new empty store in its place


async def test_the_cli_refuses_to_run_on_a_truncated_store(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    assert (await switchboard("onboard", env=env))[0] == 0
    path = home / "data" / "switchboard.db"
    await _store_with_history(path)
    _truncate(path)
    code, _, err = await switchboard("chat", "-m", "hello", env=env, timeout=30)
    assert code == STORE_REFUSED  # a service is not restarted on it: no retry mends the file
    assert str(path) in err and "switchboard backup" in err and "Traceback" not in err
    code, out, _ = await switchboard("doctor", env=env, timeout=60)
    assert code == 1
    [line] = [line for line in out.splitlines() if " store " in line]
    assert line.startswith("[FAIL]") and "integrity_check" in line


async def test_doctor_reports_a_sound_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.cli.doctor.store import store_checks
    from gateway.config.settings import Settings

    settings = Settings(home=tmp_path / "home")
    await _store_with_history(settings.data_dir / "switchboard.db", messages=3)
    checks = {check.name: check for check in store_checks(settings)}
    assert checks["store"].status == "ok" and "integrity_check" in checks["store"].message
    assert checks["disk"].status in ("ok", "warn")
    _garbage_pages(settings.data_dir / "switchboard.db")
    assert {c.name: c for c in store_checks(settings)}["store"].status == "fail"


async def test_backup_while_writing_then_restore_keeps_every_accepted_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("SWITCHBOARD_HOME", str(home))
    path = home / "data" / "switchboard.db"
    async with Store(path) as store:  # the gateway's own writer stays open during the copy
        for index in range(50):
            await store.journal.accept(_message(f"kept {index}", str(index)))
        # a folder that is not there yet, written with its "/": the copy goes into it
        assert main(["backup", f"{tmp_path / 'backups'}/"]) == 0
        await store.journal.accept(_message("after the backup", "late"))
    out = capsys.readouterr().out
    copy = tmp_path / "backups" / "switchboard.db"
    assert "integrity check ok" in out and str(copy) in out
    assert oct(copy.stat().st_mode & 0o777) == "0o600"
    _garbage_pages(path)
    _restore(copy, path)
    async with Store(path) as store:
        work = await store.journal.open_work()
    texts = sorted(record.message.text for record in work.pending)
    assert texts == sorted(f"kept {index}" for index in range(50))


def _restore(copy: Path, path: Path) -> None:
    """As docs/reliability.md says: the gateway stopped, copy over, drop -wal/-shm, start."""
    path.write_bytes(copy.read_bytes())
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def test_backup_of_a_damaged_store_fails_and_leaves_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("SWITCHBOARD_HOME", str(home))
    path = home / "data" / "switchboard.db"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a database" * 500)
    target = tmp_path / "copy.db"
    assert main(["backup", str(target)]) == STORE_REFUSED
    assert "cannot be read" in capsys.readouterr().err
    assert not target.exists()
    assert not any(name.endswith(".partial") for name in os.listdir(tmp_path))
