"""Upgrades that cannot break a working install (issue 52): a copy of the store before every
migration, ``switchboard upgrade --check`` and ``--rollback``, PostgreSQL waiting for its
owner's backup, and an older cluster node that stops once a newer one migrated.

The first test runs the previous release itself: its commit is taken out of this
repository's history (``git archive``) into a directory of its own and run from there with
the same interpreter, on the same home as this code.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from gateway.cli.exit_codes import NOT_INSTALLED, PORT_IN_USE, STORE_REFUSED
from gateway.core.errors import SchemaRefused
from gateway.store import Store
from gateway.store.cluster.membership import Membership
from gateway.store.engine.backups import KEPT, copies
from gateway.store.engine.schema import MIGRATIONS
from gateway.store.engine.schema_pg import MIGRATION_LOCK, PG_MIGRATIONS
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.nodes import telegram_env
from tests.test_cli import cli_env, switchboard

REPOSITORY = Path(__file__).resolve().parents[1]
PREVIOUS_RELEASE = "5a711e7"  # a landed version whose newest schema is v22
PREVIOUS_SCHEMA = 22


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's code, from this repository's history."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPOSITORY), "archive", PREVIOUS_RELEASE],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"commit {PREVIOUS_RELEASE} (the previous release) is not in this checkout")
    code = tmp_path_factory.mktemp("previous-release")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(code, filter="data")
    return code


@contextlib.asynccontextmanager
async def running(env: dict[str, str], code: Path = REPOSITORY) -> AsyncIterator[None]:
    """``switchboard run`` of the code in ``code`` until it is ready; SIGTERM at the end."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "run",
        cwd=code,  # `-m gateway` is the package of the working directory
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(60):
            async for line in process.stdout:
                if line.decode().endswith("ready\n"):
                    break
        assert process.returncode is None, "it did not start"
        yield
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 30)


def schema_of(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_home_of_the_previous_release_is_copied_migrated_and_rolled_back(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram, previous_release: Path
) -> None:
    home = tmp_path / "home"
    env = telegram_env(home, fake_llm, tg)
    db = home / "data" / "switchboard.db"
    onboarded, _, errors = await switchboard("onboard", env=env, cwd=previous_release)
    assert onboarded == 0, errors
    async with running(env, previous_release):
        await tg.say("remember: the code word is heron")
        await tg.wait_for(lambda: tg.visible(42) == ["echo: remember: the code word is heron"], 30)
        # this version's `status` beside the previous release's gateway: it leaves the store
        code, out, err = await switchboard("status", env=env)
        assert code != 0 and "Nothing was changed" in out + err, out + err
    assert schema_of(db) == PREVIOUS_SCHEMA

    async with running(env):  # this code: a copy first, then the migration
        [copy] = copies(home / "backups")
        assert copy.schema == PREVIOUS_SCHEMA and schema_of(copy.path) == PREVIOUS_SCHEMA
        await tg.say("what was the code word?")
        await tg.wait_for(lambda: len(tg.visible(42)) == 2, 30)
    assert schema_of(db) == len(MIGRATIONS)
    assert "remember: the code word is heron" in fake_llm.requests[-1].user_texts  # goes on

    code, out, _ = await switchboard("upgrade", "--rollback", env=env)
    assert code == 0, out
    assert f"schema v{PREVIOUS_SCHEMA}" in out and "run " in out
    assert schema_of(db) == PREVIOUS_SCHEMA
    [kept] = list((home / "backups").glob("*-replaced.db"))  # nothing is lost
    assert schema_of(kept) == len(MIGRATIONS)

    async with running(env, previous_release):  # the previous release runs on it again
        await tg.say("still there?")
        await tg.wait_for(lambda: len(tg.visible(42)) == 3, 30)
    seen = fake_llm.requests[-1].user_texts
    assert "remember: the code word is heron" in seen
    assert "what was the code word?" not in seen  # written after the copy: in the kept store


def updated_code(tmp_path: Path, requirement: str, *, imported_by: str | None = None) -> Path:
    """This code as a `git pull` leaves it when the update needs a package the environment
    was not given (no `make install`): ``requirement`` added to pyproject.toml and, with
    ``imported_by``, its package imported by that module."""
    code = tmp_path / "updated"
    for package in ("gateway", "agent", "channels", "workspace-template"):
        shutil.copytree(
            REPOSITORY / package, code / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    project = (REPOSITORY / "pyproject.toml").read_text()
    (code / "pyproject.toml").write_text(
        project.replace("dependencies = [\n", f'dependencies = [\n    "{requirement}",\n', 1)
    )
    if imported_by is not None:
        module = code / imported_by
        name = requirement.partition(">")[0].replace("-", "_")
        text = module.read_text().replace(
            "from __future__ import annotations\n",
            f"from __future__ import annotations\n\nimport {name}  # noqa: F401\n",
            1,
        )
        module.write_text(text)
    return code


async def test_code_updated_without_reinstalling_says_what_to_install_not_a_traceback(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """After a `git pull` whose code imports a package not installed here, `run` and
    `status` say which package and the command that installs it, in one line (before, a
    ModuleNotFoundError traceback), with an exit status the service does not restart;
    `doctor` fails its install check (before: "No problems")."""
    code = updated_code(
        tmp_path, "switchboard-absent-package>=1.0", imported_by="agent/calendar/events.py"
    )
    env = cli_env(tmp_path / "home", fake_llm, SWITCHBOARD_WEB__ENABLED="false")
    exit_code, out, _ = await switchboard("doctor", env=env, cwd=code)
    assert exit_code == 1
    assert "[FAIL] install       switchboard-absent-package is not installed: run " in out, out
    for command in (("run",), ("status",)):
        exit_code, out, err = await switchboard(*command, env=env, cwd=code)
        assert exit_code == NOT_INSTALLED, (command, out, err)
        assert "Traceback" not in err
        [line] = err.splitlines()
        assert line.startswith(
            "switchboard: this Switchboard needs the Python package switchboard-absent-package, "
            f"which is not installed in {sys.prefix}"
        ), line
        assert "make install" in line or "pip install -e ." in line, line


async def test_a_package_missing_where_the_command_itself_starts_is_one_line_too(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The update imports the missing package at the top of the command's own module, which
    the entry point imports before any command runs: `python -m gateway run` and the console
    script that pyproject.toml names (as pip writes it) say the package in one line with
    exit status 6 (before: a ModuleNotFoundError traceback, exit 1)."""
    code = updated_code(
        tmp_path, "switchboard-absent-package>=1.0", imported_by="gateway/cli/main.py"
    )
    scripts = tomllib.loads((code / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["switchboard"].partition(":")
    console_script = f"import sys; from {module} import {function}; sys.exit({function}())"
    env = cli_env(tmp_path / "home", fake_llm)
    for command in (["-m", "gateway", "run"], ["-c", console_script, "run"]):
        process = await asyncio.create_subprocess_exec(
            sys.executable, *command, cwd=code, env=env, stderr=asyncio.subprocess.PIPE
        )
        _, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == NOT_INSTALLED, (command, err.decode())
        [line] = err.decode().splitlines()
        assert line.startswith(
            "switchboard: this Switchboard needs the Python package switchboard-absent-package"
        ), line


async def test_doctor_checks_the_installed_packages_against_what_the_code_needs(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The update needs a package that is missing and a newer one than installed: doctor
    fails its install check naming both and the reinstall (before: "No problems")."""
    code = updated_code(tmp_path, "switchboard-absent-package>=1.0")
    project = code / "pyproject.toml"
    project.write_text(project.read_text().replace('"tomlkit>=0.13"', '"tomlkit>=999"', 1))
    env = cli_env(tmp_path / "home", fake_llm)
    _, out, _ = await switchboard("doctor", "--json", env=env, cwd=code)
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    install = checks["install"]
    assert install["status"] == "fail", install
    assert "switchboard-absent-package is not installed" in install["message"]
    assert "tomlkit " in install["message"] and "this code needs >=999" in install["message"]
    assert "pip install -e ." in install["message"]
    _, out, _ = await switchboard("upgrade", "--check", env=env, cwd=code)  # part of an upgrade
    assert "packages: switchboard-absent-package is not installed; tomlkit " in out, out
    _, out, _ = await switchboard("doctor", "--json", env=env)  # this code, as installed
    assert {c["name"]: c for c in json.loads(out)["checks"]}["install"]["status"] == "ok"


def older_store(path: Path, version: int) -> None:
    """A SQLite store as a release whose newest schema is ``version`` left it."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        for number, script in enumerate(MIGRATIONS[:version], start=1):
            conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")


async def test_every_migration_is_copied_first_and_the_last_three_copies_are_kept(
    tmp_path: Path,
) -> None:
    backups = tmp_path / "backups"
    for version in (19, 20, 21, 22):  # four homes' stores, copied into one place
        db = tmp_path / f"store-{version}.db"
        older_store(db, version)
        async with Store(db, backups=backups):
            pass
        assert schema_of(db) == len(MIGRATIONS)
    kept = copies(backups)
    assert [c.schema for c in kept] == [22, 21, 20][:KEPT]
    assert all(schema_of(c.path) == c.schema for c in kept)
    # each copy and its note are yours only (the note was 0644 beside a 0600 copy)
    assert {
        (c.path.stat().st_mode & 0o777, c.path.with_suffix(".json").stat().st_mode & 0o777)
        for c in kept
    } == {(0o600, 0o600)}
    async with Store(tmp_path / "store-22.db", backups=backups):  # nothing to migrate
        pass
    assert len(copies(backups)) == KEPT


async def test_commands_beside_the_gateway_never_migrate_the_store(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Only the gateway's start and `switchboard upgrade` migrate: `pairing list`, `cron
    list` and `web` (and `status`, which reads the store when a gateway runs) on a home of
    an older version, whose gateway may be running on it, say so and leave the store as it
    is (before, each migrated it under that gateway)."""
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    code, _, err = await switchboard("onboard", env=env)
    assert code == 0, err
    db = home / "data" / "switchboard.db"
    db.unlink(missing_ok=True)
    older_store(db, PREVIOUS_SCHEMA)
    for command in (("pairing", "list"), ("cron", "list")):
        code, out, err = await switchboard(*command, env=env)
        assert code == STORE_REFUSED, command
        said = out + err
        assert f"schema version {PREVIOUS_SCHEMA} and this Switchboard needs" in said, said
        assert "Nothing was changed" in said and "Traceback" not in said
        # the advice names the flag that migrates (plain `upgrade` only checks)
        assert "or `switchboard upgrade --i-have-a-backup` does" in said, said
    assert schema_of(db) == PREVIOUS_SCHEMA
    assert not (home / "backups").exists() or not copies(home / "backups")
    code, _, err = await switchboard("upgrade", "--i-have-a-backup", env=env)  # as advised
    assert code == 0, err
    code, _, err = await switchboard("cron", "list", env=env)
    assert code == 0, err


async def test_a_taken_port_stops_the_start_before_the_store_is_migrated(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """What can fail cheaply is checked first: the store stays at the older version's
    schema, so that version still starts on it (before, it was migrated and then the start
    failed on the port, saying nothing about it)."""
    home = tmp_path / "home"
    db = home / "data" / "switchboard.db"
    db.parent.mkdir(parents=True)
    older_store(db, PREVIOUS_SCHEMA)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = cli_env(home, fake_llm, SWITCHBOARD_WEB__PORT=str(port))
        code, _, err = await switchboard("run", env=env)
    assert code == PORT_IN_USE and f"cannot listen on 127.0.0.1:{port}" in err, err
    assert schema_of(db) == PREVIOUS_SCHEMA
    assert not (home / "backups").exists() or not copies(home / "backups")


async def test_a_start_that_migrated_and_then_failed_says_so_and_how_to_go_back(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    """A start fails after the migration (Telegram refuses the token): the error says the
    store was migrated, names the copy and `switchboard upgrade --rollback`, in the log too,
    where the copy and the migration were logged as they happened."""
    home = tmp_path / "home"
    db = home / "data" / "switchboard.db"
    db.parent.mkdir(parents=True)
    older_store(db, PREVIOUS_SCHEMA)
    env = {**telegram_env(home, fake_llm, tg), "SWITCHBOARD_TELEGRAM__TOKEN": "123:not-the-token"}
    code, _, err = await switchboard("run", env=env)
    assert code != 0 and "Telegram rejected the bot token" in err, err
    [copy] = copies(home / "backups")
    said = f"This start had migrated the store from schema v{PREVIOUS_SCHEMA} to v{len(MIGRATIONS)}"
    assert said in err and str(copy.path) in err and "`switchboard upgrade --rollback`" in err
    log = (home / "data" / "logs" / "switchboard.log").read_text()
    assert said in log and "Traceback" not in err
    assert f"copied the store {db} to {copy.path}; migrating it from schema" in log
    assert f"migrated the store {db} to schema v{len(MIGRATIONS)}" in log

    code, _, err = await switchboard("upgrade", "--rollback", env=env)  # as it says
    assert code == 0, err
    assert schema_of(db) == PREVIOUS_SCHEMA


async def test_upgrade_check_names_a_damaged_or_truncated_store(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """As `run` and `doctor` do (before: a traceback, or "none yet" for a file cut to 0
    bytes, which `run` then refused)."""
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    db = home / "data" / "switchboard.db"
    db.parent.mkdir(parents=True)
    for content, said in ((b"", "is empty (0 bytes)"), (b"not sqlite " * 50, "cannot be read")):
        db.write_bytes(content)
        _, out, err = await switchboard("upgrade", "--check", env=env)
        assert "Traceback" not in err and said in out, out + err
        assert db.read_bytes() == content  # nothing was changed


async def test_rollback_puts_back_the_copy_and_keeps_the_store_it_replaces(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    env = cli_env(home, fake_llm)
    await switchboard("onboard", env=env)
    db = home / "data" / "switchboard.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    older_store(db, PREVIOUS_SCHEMA)
    code, out, _ = await switchboard("upgrade", "--check", env=env)
    assert code == 0
    assert f"schema v{PREVIOUS_SCHEMA}; this Switchboard migrates it to v{len(MIGRATIONS)}" in out
    assert "nothing was changed" in out and schema_of(db) == PREVIOUS_SCHEMA

    code, out, err = await switchboard("upgrade", "--i-have-a-backup", env=env)
    assert code == 0, err
    assert schema_of(db) == len(MIGRATIONS)
    code, out, err = await switchboard("upgrade", "--rollback", env=env)
    assert code == 0, err
    assert schema_of(db) == PREVIOUS_SCHEMA
    assert "the store it replaced is kept in" in out
    # again, with no migration since: nothing to undo (it put the same old copy back over
    # whatever was written since the first rollback)
    before = db.read_bytes()
    code, out, err = await switchboard("upgrade", "--rollback", env=env)
    assert code != 0 and "there is no migration to undo" in out + err
    assert db.read_bytes() == before


def older_database(url: str, version: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for script in PG_MIGRATIONS[:version]:
            conn.execute(script)
        conn.execute("INSERT INTO schema_version (version) VALUES (%s)", [version])


def schema_pg(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    assert row is not None
    return int(row[0])


async def test_postgresql_waits_for_its_owners_backup_before_migrating(
    tmp_path: Path, pg_url: str, fake_llm: FakeLLM
) -> None:
    older_database(pg_url, PREVIOUS_SCHEMA)
    env = cli_env(tmp_path / "home", fake_llm, SWITCHBOARD_STORAGE__URL=pg_url)
    code, out, _ = await switchboard("doctor", env=env)  # says so before a start fails
    assert code != 0
    assert f"has schema version {PREVIOUS_SCHEMA} and this Switchboard needs" in out, out
    assert "switchboard upgrade --i-have-a-backup" in out
    with pytest.raises(SchemaRefused, match=r"pg_dump .*switchboard upgrade --i-have-a-backup"):
        async with Store(tmp_path / "unused.db", url=pg_url, migrate=False):
            pass
    assert schema_pg(pg_url) == PREVIOUS_SCHEMA  # nothing was changed
    async with Store(tmp_path / "unused.db", url=pg_url, migrate=True):
        pass
    assert schema_pg(pg_url) == len(PG_MIGRATIONS)


async def test_an_older_node_refuses_a_database_a_newer_one_migrated(
    tmp_path: Path, pg_url: str
) -> None:
    async with Store(tmp_path / "unused.db", url=pg_url):
        pass
    node = Membership(pg_url, "old-node", host="here", pid=1, interval=0.1)
    await node.start()
    try:
        await node.lead()
        node.working = True
        with (
            psycopg.connect(pg_url, autocommit=True) as conn,  # a newer release migrates
            conn.transaction(),
        ):
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK])
            conn.execute("UPDATE schema_version SET version = version + 1")
        async with asyncio.timeout(10):
            await node.lost.wait()
        assert not node.working
        assert "upgrade it" in node.why_lost and f"up to {len(PG_MIGRATIONS)}" in node.why_lost
    finally:
        await node.stop()
    with pytest.raises(SchemaRefused, match="written by a newer Switchboard"):
        async with Store(tmp_path / "unused.db", url=pg_url):  # nor does it start again
            pass
