"""The store on both engines: a fresh PostgreSQL database per test, and the ``make_store``
fixture parametrized over SQLite and PostgreSQL.

The PostgreSQL server is ``SWITCHBOARD_TEST_POSTGRES`` (default: the local server, user
postgres, trust auth). Without a reachable server the PostgreSQL cases skip, naming the
server; under CI (``CI`` set) they fail instead, so a CI run never passes on SQLite alone.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from gateway.store import Store

SERVER = os.environ.get(
    "SWITCHBOARD_TEST_POSTGRES", "postgresql://postgres@localhost:5432/postgres"
)
BACKENDS = ("sqlite", "postgresql")


@cache
def server_problem() -> str | None:
    """Why the test server cannot be used (``None``: it can)."""
    try:
        with psycopg.connect(SERVER, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"no PostgreSQL server at {SERVER} ({str(exc).strip().splitlines()[0]})"
    return None


def require_server() -> None:
    problem = server_problem()
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the PostgreSQL tests: {problem}")
    pytest.skip(f"{problem}; set SWITCHBOARD_TEST_POSTGRES to run them")


def database_url(name: str) -> str:
    parts = urlsplit(SERVER)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


def create_database() -> str:
    """A new, empty database on the test server; returns its name."""
    require_server()
    name = f"switchboard_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(name: str) -> None:
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url() -> Iterator[str]:
    """The URL of a fresh PostgreSQL database, dropped after the test."""
    name = create_database()
    try:
        yield database_url(name)
    finally:
        drop_database(name)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


StoreFactory = Callable[..., Store]


@pytest.fixture
def store_url(backend: str, request: pytest.FixtureRequest) -> str | None:
    """``storage.url`` for this test's backend: ``None`` (SQLite) or a fresh database."""
    if backend == "sqlite":
        return None
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def make_store(tmp_path: Path, store_url: str | None) -> StoreFactory:
    """``make_store(**kwargs)``: a Store on this test's backend; every call opens the same
    database (a restart)."""

    def make(**kwargs: Any) -> Store:
        return Store(tmp_path / "db.sqlite", url=store_url, **kwargs)

    return make
