"""The fake platforms as pytest fixtures, one running fake per test.

A test module that needs a fake set up differently (pages served, a wider loop scope) defines
its own fixture of the same name, which takes precedence over these.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # imported in the fixtures: loading a plugin must not import discord.py
    from tests.fakes.discord import FakeDiscord
    from tests.fakes.ircd import Ircd
    from tests.fakes.mailservers import SmtpSink
    from tests.fakes.radicale import Radicale
    from tests.fakes.signal_cli import FakeSignal
    from tests.fakes.slack import FakeSlack
    from tests.fakes.synapse import Homeserver
    from tests.fakes.telegram import FakeTelegram
    from tests.fakes.web import FakeSite
    from tests.fakes.whatsapp import FakeGraph


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    """The fake Bot API with a fresh token."""
    from tests.fakes.telegram import FakeTelegram, random_token

    fake = await FakeTelegram(random_token()).start()
    yield fake
    await fake.stop()


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    from tests.fakes.slack import FakeSlack

    fake = await FakeSlack().start()
    yield fake
    await fake.stop()


@pytest.fixture
async def fake_discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    """The fake Discord gateway and REST API, with discord.py pointed at it."""
    from tests.fakes.discord import FakeDiscord

    fake = await FakeDiscord().start()
    fake.patch(monkeypatch)
    yield fake
    await fake.stop()


@pytest.fixture
async def site() -> AsyncIterator[FakeSite]:
    """A web server on loopback that a test fills with pages."""
    from tests.fakes.web import FakeSite

    fake = await FakeSite().start()
    yield fake
    await fake.stop()


@pytest.fixture
async def sink(tmp_path: Path) -> AsyncIterator[SmtpSink]:
    """An SMTP server that keeps what it receives."""
    from tests.fakes.mailservers import SmtpSink

    smtp = await SmtpSink().start(tmp_path)
    yield smtp
    await smtp.stop()


@pytest.fixture
async def graph() -> AsyncIterator[FakeGraph]:
    """The fake WhatsApp Cloud API (Graph API)."""
    from tests.fakes.whatsapp import FakeGraph

    fake = await FakeGraph().start()
    yield fake
    await fake.stop()


@pytest.fixture
async def signal_daemon() -> AsyncIterator[FakeSignal]:
    """The fake signal-cli daemon (``signal-cli daemon --http``)."""
    from tests.fakes.signal_cli import FakeSignal

    fake = await FakeSignal().start()
    yield fake
    await fake.stop()


@pytest.fixture
def ircd(tmp_path: Path) -> Iterator[Ircd]:
    """A real IRC server (ngIRCd) on 127.0.0.1, plain and TLS ports (tests/fakes/ircd.py)."""
    from tests.fakes.ircd import Ircd, missing_ngircd

    reason = missing_ngircd()
    if reason:
        pytest.skip(reason)
    server = Ircd(tmp_path / "ngircd").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def homeserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Homeserver]:
    """A real Synapse on 127.0.0.1 for the test session (tests/fakes/synapse.py)."""
    from tests.fakes.synapse import start_homeserver

    with start_homeserver(tmp_path_factory) as server:
        yield server


@pytest.fixture
def radicale(tmp_path: Path) -> Iterator[Radicale]:
    """A real CalDAV server (Radicale) on 127.0.0.1 for one test (tests/fakes/radicale.py)."""
    from tests.fakes.radicale import start_radicale

    with start_radicale(tmp_path / "radicale") as server:
        yield server
