"""switchboard doctor and status: what is wrong and what to do, against real endpoints."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.doctor import print_status, run_doctor
from gateway.settings import Settings
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, error


async def test_doctor_passes_against_a_working_model(
    make_settings: SettingsFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_doctor(make_settings()) == 0
    out = capsys.readouterr().out
    assert "[ok  ] llm " in out and "answered" in out
    assert "All checks passed." in out


async def test_doctor_explains_a_refused_key(
    make_settings: SettingsFactory, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_llm.queue(error(401, "invalid api key"))
    assert await run_doctor(make_settings()) == 1
    out = capsys.readouterr().out
    assert "refused the API key; check SWITCHBOARD_LLM__API_KEY" in out


async def test_doctor_explains_an_unreachable_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(
        home=tmp_path / "home",
        llm={"base_url": "http://127.0.0.1:9/v1", "api_key": "x", "max_retries": 0},
    )
    assert await run_doctor(settings) == 1
    out = capsys.readouterr().out
    assert "cannot reach http://127.0.0.1:9/v1" in out
    assert "switchboard onboard" in out  # the home does not exist yet


async def test_status_shows_waiting_work(
    run_gateway: object, make_settings: SettingsFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = make_settings()
    assert await print_status(settings) == 0
    assert "gateway: not running" in capsys.readouterr().out
