"""Webhooks, the API and background tasks in ``switchboard doctor``, ``switchboard status``
and ``/metrics``: a hook without a secret or an API without a token stops the start and
doctor names the key; a public bind is a warning; status lists what is served where; the
metrics count deliveries, requests and tasks.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import pytest

from channels.hooks.signature import sign
from channels.memory import MemoryChannel
from gateway.cli.doctor.command import run_doctor
from gateway.cli.status import gather
from gateway.config.partial import load_what_is_valid
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, held, text
from tests.test_web_server import sign_in

SECRET = "hook-secret-0123456789abcdef"
TOKEN = "api-token-0123456789abcdefgh"


def model_env(monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLLM, **env: str) -> None:
    monkeypatch.setenv("SWITCHBOARD_LLM__BASE_URL", fake_llm.openai_url)
    monkeypatch.setenv("SWITCHBOARD_LLM__API_KEY", "sk-test-key-123456")
    for name, value in env.items():
        monkeypatch.setenv(f"SWITCHBOARD_{name}", value)


async def doctor_report(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    settings, problem = load_what_is_valid()
    await run_doctor(settings, config_problem=problem, as_json=True)
    report = json.loads(capsys.readouterr().out)
    return {check["name"]: check for check in report["checks"]}


async def test_doctor_names_a_hook_without_a_secret_and_an_api_without_a_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fake_llm: FakeLLM
) -> None:
    model_env(monkeypatch, fake_llm, HOOKS__GITHUB__DELIVER_TO="telegram:42", API__ENABLED="true")
    checks = await doctor_report(capsys)
    config = checks["config"]
    assert config["status"] == "fail"
    assert "hooks.github.secret" in config["message"] and "api.tokens" in config["message"]


async def test_doctor_warns_of_a_public_bind_and_says_where_hooks_answer(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fake_llm: FakeLLM
) -> None:
    model_env(
        monkeypatch,
        fake_llm,
        WEB__HOST="0.0.0.0",
        WEB__TOKEN="web-token-0123456789abcdef",
        HOOKS__GITHUB__SECRET=SECRET,
        HOOKS__GITHUB__DELIVER_TO="webchat:0123456789abcdef01234567",
        HOOKS__CI__SECRET=SECRET + "y",
        HOOKS__CI__DELIVER_TO="telegram:42",
        HOOKS__FORM__SECRET=SECRET + "x",
        HOOKS__FORM__ROLE="owner",
        API__ENABLED="true",
        API__TOKENS=json.dumps([{"name": "ci", "token": TOKEN}]),
    )
    checks = await doctor_report(capsys)
    assert checks["config"]["status"] != "fail"
    assert checks["connect"]["status"] == "warn"
    assert "reachable from other machines" in checks["connect"]["message"]
    assert checks["hook github"]["status"] == "ok"
    assert "answers in webchat:0123456789abcdef01234567" in checks["hook github"]["message"]
    ci = checks["hook ci"]  # Telegram is not configured here
    assert ci["status"] == "fail" and "telegram is not configured" in ci["message"]
    form = checks["hook form"]
    assert form["status"] == "warn" and "role owner" in form["message"]
    assert "no chat to answer in yet" in form["message"]
    assert checks["api"]["message"] == "/v1 answers 1 token(s): ci (member)"


async def test_status_and_metrics_show_hooks_the_api_and_tasks(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "Done with the long job, all fine."))
    fake_llm.responder = lambda request: text("The delivery was read and is fine.")
    settings = make_settings(
        web={"port": 0},
        hooks={"github": {"secret": SECRET, "deliver_to": "telegram:42"}},
        api={"enabled": True, "tokens": [{"name": "ci", "token": TOKEN, "role": "owner"}]},
    )
    body = b'{"ok": true}'
    async with (
        Gateway(settings, channels=[MemoryChannel()]) as gateway,
        aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http,
    ):
        assert gateway.web is not None
        url = gateway.web.url
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with http.post(url + "v1/tasks", json={"text": "A long job."}, headers=bearer) as r:
            assert r.status == 202
        await fake_llm.wait_for_requests(1)
        signed = {
            "X-Switchboard-Signature": sign(SECRET, body, "1", int(time.time())),
            "X-Switchboard-Delivery": "1",
        }
        async with http.post(url + "hooks/github", data=body, headers=signed) as r:
            assert r.status == 202
        async with http.post(url + "hooks/github", data=body) as r:
            assert r.status == 401
        async with http.get(url + "v1/models", headers={"Authorization": "Bearer nope"}) as r:
            assert r.status == 401
        report = await gather(settings)
        await sign_in(http, gateway.web.sign_in_link())  # /metrics is the owner's
        async with http.get(url + "metrics") as r:
            metrics = await r.text()
        gate.set()
    assert report["tasks"] == {"running": 1}
    assert report["hooks"] == [
        {
            "name": "github",
            "url": url + "hooks/github",
            "role": "member",
            "agent": "main",
            "deliver_to": "telegram:42",
        }
    ]
    assert report["api"] == {
        "enabled": True,
        "url": url + "v1",
        "tokens": [{"name": "ci", "role": "owner"}],
    }
    channels = {c["name"]: c for c in report["channels"]}
    assert "1 delivery(ies) accepted" in channels["hook"]["detail"]
    for line in (
        'switchboard_program_requests_total{channel="hook",outcome="accepted",what="github"} 1.0',
        'switchboard_program_requests_total{channel="hook",outcome="bad_signature",what="github"} 1.0',
        'switchboard_program_requests_total{channel="api",outcome="unauthorized",what="models"} 1.0',
        'switchboard_program_requests_total{channel="api",outcome="ok",what="tasks"} 1.0',
        'switchboard_background_tasks{state="running"} 1.0',
    ):
        assert line in metrics
