"""`switchboard backup` where the copy cannot be written, and at the store itself: the
error names the side that failed, no part of the copy stays behind, the store is never
replaced."""

from __future__ import annotations

import asyncio
import resource
import sys
from pathlib import Path

from gateway.core.messages import InboundMessage
from gateway.store import Store
from tests.fakes.llm import FakeLLM
from tests.test_cli import cli_env, switchboard

LIMIT = 1024 * 1024  # the largest file the backup's process may write: less than the copy


async def _store(path: Path) -> None:
    async with Store(path) as store:
        for index in range(600):  # about 5 MB
            message = InboundMessage(
                channel="telegram",
                chat_id="42",
                sender_id="7",
                sender_name="Dana",
                text=f"message {index} " + "x" * 8000,
                platform_message_id=str(index),
            )
            await store.journal.accept(message)


def _small_files() -> None:
    """In the backup's process: a file may not grow past LIMIT (``write`` fails with EFBIG,
    which SQLite reports as an I/O error writing), as on a disk that is full."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


async def test_a_copy_that_cannot_be_written_says_so_and_leaves_nothing_behind(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Before: "cannot back up …/data/switchboard.db: disk I/O error" (the store blamed)
    and the copy's journal (or write-ahead log and shared memory) left in the folder."""
    home = tmp_path / "home"
    store = home / "data" / "switchboard.db"
    await _store(store)
    before = store.read_bytes()
    target = tmp_path / "usb" / "copy.db"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "backup",
        str(target),
        env=cli_env(home, fake_llm),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=_small_files,
    )
    _, raw = await asyncio.wait_for(process.communicate(), 60)
    err = raw.decode()
    assert process.returncode == 1, err
    assert f"switchboard: cannot write the copy {target}: disk I/O error" in err, err
    assert f"the store {store} was only read" in err and "cannot back up" not in err
    assert sorted(p.name for p in target.parent.iterdir()) == []  # no copy, no part of one
    assert store.read_bytes() == before


async def test_backup_refuses_the_store_itself_as_the_copy(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Before: "replacing …/data/switchboard.db", over the store the gateway runs on."""
    home = tmp_path / "home"
    store = home / "data" / "switchboard.db"
    await _store(store)
    before = store.read_bytes()
    env = cli_env(home, fake_llm)
    for given in (str(store), str(store.parent), f"{store.parent}/"):
        code, out, err = await switchboard("backup", given, env=env)
        assert code == 1 and f"{store} is the store itself" in err, out + err
        assert "replacing" not in err
    assert store.read_bytes() == before
