"""The settings over the web (gateway/web/control/settings.py): the form of the page at
``/settings`` (fetched and posted by its script with the page key, at
``/api/settings/form``), with an input per dotted key, the JSON API beside it, and the
restart; every route only for the owner. And the same path from the command line:
``switchboard config set`` and ``POST /api/settings`` on a running ``switchboard run``
change the model for the next turn in the same process, and a restart starts it anew."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from channels.memory import MemoryChannel
from channels.webchat import create
from gateway.config.settings import load_settings
from gateway.core.system.local_socket import reachable
from gateway.runtime.app import Gateway
from gateway.web.endpoint import socket_path
from tests.fakes.llm import FakeLLM, Recorded
from tests.fakes.telegram import FakeTelegram
from tests.nodes import spawn, telegram_env
from tests.test_cli import switchboard
from tests.test_live_settings import write_home
from tests.test_web_server import client, owner

WEB_TOKEN = "web-token-0123456789abcdefgh"
MEMBER_TOKEN = "member-token-0123456789abcdef"
ROUTES = [
    ("GET", "/settings"),
    ("GET", "/api/settings/form"),
    ("POST", "/api/settings/form"),
    ("GET", "/api/settings"),
    ("POST", "/api/settings"),
    ("POST", "/api/restart"),
]


@asynccontextmanager
async def web_gateway(home: Path, fake: FakeLLM) -> AsyncIterator[tuple[Gateway, MemoryChannel]]:
    """A gateway of a config.toml, serving the web chat (and the API, with a member's
    token) on a free port."""
    api = {"enabled": True, "tokens": [{"name": "script", "token": MEMBER_TOKEN, "role": "member"}]}
    write_home(home, fake, web={"enabled": True, "port": 0, "token": WEB_TOKEN}, api=api)
    settings = load_settings(home=home)
    channel = MemoryChannel()
    async with Gateway(settings, channels=[create(settings), channel]) as gateway:
        assert gateway.web is not None
        yield gateway, channel


class Inputs(HTMLParser):
    """What a browser submits of a page's form: each input's, select's and textarea's value."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}
        self._select: str | None = None
        self._area: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "input" and "name" in found:
            box = found.get("type") == "checkbox"
            if not box or "checked" in found:  # a box is sent only when ticked
                self.values[found["name"]] = found.get("value", "on" if box else "")
        elif tag == "select":
            self._select = found["name"]
            self.values.setdefault(self._select, "")
        elif tag == "option" and self._select is not None and "selected" in found:
            self.values[self._select] = "<selected>"
        elif tag == "textarea":
            self._area = found["name"]
            self.values[self._area] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._area = None

    def handle_data(self, data: str) -> None:
        if self._area is not None:
            self.values[self._area] += data
        elif self._select is not None and self.values.get(self._select) == "<selected>":
            self.values[self._select] = data


def form_of(page: str) -> dict[str, str]:
    parser = Inputs()
    parser.feed(page)
    return parser.values


async def form_page(browser: aiohttp.ClientSession, url: str, done: str = "") -> str:
    """The settings page's form as its script fetches it (with the page key)."""
    query = f"?done={done}" if done else ""
    async with browser.get(url + "/api/settings/form" + query) as r:
        assert r.status == 200, await r.text()
        html: str = (await r.json())["html"]
        return html


async def post_form(
    browser: aiohttp.ClientSession, url: str, form: dict[str, str]
) -> tuple[int, str, str | None]:
    """The form posted as the page's script posts it: the status, the form it answers
    with, and the id of a save's result (``done``)."""
    async with browser.post(url + "/api/settings/form", data=form, headers={"Origin": url}) as r:
        answer = await r.json()
        return r.status, answer["html"], answer["done"]


async def test_every_settings_route_is_refused_without_the_owners_session(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with web_gateway(tmp_path / "home", fake_llm) as (gateway, _):
        assert gateway.web is not None
        url = gateway.web.url.rstrip("/")
        before = (tmp_path / "home" / "config.toml").read_bytes()
        nobody, member, cross_site = [], [], []
        async with client() as http:
            for method, path in ROUTES:
                async with http.request(
                    method,
                    url + path,
                    headers={"Origin": url, "Accept": "text/html"},
                    data={"llm.model": "stolen"},
                    allow_redirects=False,
                ) as r:
                    nobody.append((path, r.status, r.headers.get("Location")))
                bearer = {"Authorization": f"Bearer {MEMBER_TOKEN}", "Origin": url}
                async with http.request(method, url + path, headers=bearer, json={}) as r:
                    member.append(r.status)
        async with owner(gateway) as browser:
            for method, path in ROUTES:
                if method == "POST":
                    headers = {"Origin": "http://evil.example"}
                    async with browser.post(url + path, headers=headers, data={}) as r:
                        cross_site.append(r.status)
        after = (tmp_path / "home" / "config.toml").read_bytes()
    assert nobody == [
        ("/settings", 303, "/login?next=/settings"),  # a browser is sent to sign in
        ("/api/settings/form", 303, "/login?next=/api/settings/form"),
        ("/api/settings/form", 401, None),
        ("/api/settings", 303, "/login?next=/api/settings"),
        ("/api/settings", 401, None),
        ("/api/restart", 401, None),
    ]
    assert member == [401] * len(ROUTES)  # an API token opens no page of the web server
    assert cross_site == [403, 403, 403]
    assert after == before


async def test_the_settings_page_saves_by_its_form_and_the_next_turn_uses_it(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with web_gateway(tmp_path / "home", fake_llm) as (gateway, channel):
        assert gateway.web is not None
        url = gateway.web.url.rstrip("/")
        async with owner(gateway) as browser:
            page = await form_page(browser, url)
            form = form_of(page)
            form["llm.model"] = "fake-model-2"  # the person changes one field, submits all
            form["_action"] = "save"
            saved, saved_page, _ = await post_form(browser, url, form)
            form = form_of(saved_page) | {"storage.retention_days": "10", "_action": "check"}
            _, checked_page, _ = await post_form(browser, url, form)
        await channel.push("hello")
        await channel.wait_for(1)
    assert 'name="llm.model" value="fake-model"' in page
    assert 'name="llm.api_key" value=""' in page and "sk-live-test-1234" not in page
    assert saved == 200, saved_page
    assert "applied: <code>llm.model</code>" in saved_page
    assert 'name="llm.model" value="fake-model-2"' in saved_page
    assert "would need a restart: <code>storage.retention_days</code>" in checked_page
    assert [r.body["model"] for r in fake_llm.requests] == ["fake-model-2"]
    written = (tmp_path / "home" / "config.toml").read_text()
    assert 'model = "fake-model-2"' in written and "retention_days" not in written
    assert 'api_key = "sk-live-test-1234"' in written  # the secret left as it was


async def test_the_form_sends_only_what_was_changed_on_it_and_keeps_what_was_typed(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """A setting changed elsewhere while the page was open is not put back by the form (it
    posts every input), and what Check or a refused Save showed is what Save then saves."""
    home = tmp_path / "home"
    async with web_gateway(home, fake_llm) as (gateway, _):
        assert gateway.web is not None
        url = gateway.web.url.rstrip("/")
        async with owner(gateway) as browser:

            async def post(form: dict[str, str]) -> str:
                return (await post_form(browser, url, form))[1]

            opened = form_of(await form_page(browser, url))
            # meanwhile, elsewhere (`config set`, another tab): the maximum answer length
            async with browser.post(
                url + "/api/settings",
                json={"values": {"llm.max_tokens": "2048"}},
                headers={"Origin": url},
            ) as r:
                assert r.status == 200
            saved = await post(opened | {"llm.timeout_seconds": "77", "_action": "save"})
            checked = await post(form_of(saved) | {"llm.model": "model-b", "_action": "check"})
            refused = await post(
                form_of(checked) | {"llm.max_tokens": "not a number", "_action": "save"}
            )
            fixed = await post(form_of(refused) | {"llm.max_tokens": "3000", "_action": "save"})
    assert "applied: <code>llm.timeout_seconds</code>" in saved  # and nothing else
    assert 'name="llm.max_tokens" value="2048"' in saved
    assert "would apply at once: <code>llm.model</code>" in checked
    assert 'name="llm.model" value="model-b"' in checked  # as typed, not as saved
    assert "Not saved" in refused and 'name="llm.model" value="model-b"' in refused
    assert "applied: <code>llm.max_tokens</code>, <code>llm.model</code>" in fixed
    written = (home / "config.toml").read_text()
    assert "max_tokens = 3000" in written and 'model = "model-b"' in written
    assert "timeout_seconds = 77" in written


async def test_a_save_is_named_in_the_pages_address_so_a_reload_saves_nothing_again(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """A Save answers with what it did and the id of that result, which the page puts in
    its address (``/settings?done=``): reloading it shows that again and posts nothing."""
    async with web_gateway(tmp_path / "home", fake_llm) as (gateway, _):
        assert gateway.web is not None
        url = gateway.web.url.rstrip("/")
        async with owner(gateway) as browser:
            form = form_of(await form_page(browser, url))
            form |= {"llm.model": "fake-model-2", "_action": "save"}
            status, saved, done = await post_form(browser, url, form)
            assert done is not None
            shown = [saved] + [await form_page(browser, url, done) for _ in range(2)]
            later = await form_page(browser, url)
        saves = await gateway.store.audit.recent(10, kind="settings_changed")
    assert status == 200
    assert all("applied: <code>llm.model</code>" in page for page in shown)
    assert "applied:" not in later
    assert len(saves) == 1


async def test_a_refused_value_is_told_in_one_sentence_under_its_key(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Not 'limits.max_concurrent_turns: limits.max_concurrent_turns: Input should be ...
    (set by the settings page (web:owner (cookie)))': the key once, and no internals."""
    async with web_gateway(tmp_path / "home", fake_llm) as (gateway, _):
        assert gateway.web is not None
        url = gateway.web.url.rstrip("/")
        async with (
            owner(gateway) as browser,
            browser.post(
                url + "/api/settings",
                json={"values": {"limits.max_concurrent_turns": "0", "agent.max_iterations": "0"}},
                headers={"Origin": url},
            ) as r,
        ):
            refused = await r.json()
    assert refused["errors"] == {
        "agent.max_iterations": "Input should be greater than or equal to 1",
        "limits.max_concurrent_turns": "Input should be greater than or equal to 1",
    }


def block(page: str, key: str) -> str:
    """The markup of one setting of the page."""
    start = page.index(f'<div class="setting" id="field-{key}"')
    return page[start : page.index('<div class="setting"', start + 1)]


def section_tag(page: str, title: str) -> str:
    """The opening tag of a section of the page."""
    start = page.index(f'id="section-{title}"')
    return page[page.rindex("<details", 0, start) : page.index(">", start) + 1]


async def test_the_settings_page_reads_like_the_reference_and_says_where_each_value_is_from(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Descriptions are rendered markdown (code, not backticks; the docs page named, not
    a raw link); "fields below" has the fields below; keys the page cannot save are
    read-only and never posted; each value says where it comes from; deprecated keys that
    nothing sets are left out; the sections in use are open, the platforms not set up
    are together in one closed section."""
    monkeypatch.setenv("SWITCHBOARD_AGENT__MAX_ITERATIONS", "7")
    async with web_gateway(tmp_path / "home", fake_llm) as (gateway, _):
        assert gateway.web is not None
        url = gateway.web.url.rstrip("/")
        async with owner(gateway) as browser:
            page = await form_page(browser, url)
    form = form_of(page)
    assert "`" not in page and "](" not in page
    assert "<code>debug</code>, <code>info</code>" in block(page, "log_level")
    assert "(<code>docs/connect.md</code>)" in block(page, "hooks")
    assert "<code>[api]</code>: the OpenAI-compatible API" in page
    fallbacks = block(page, "llm.fallbacks")
    assert "<summary>Fields of each item: <code>llm.fallbacks[]</code></summary>" in fallbacks
    assert '<td data-label="key"><code>api_key</code></td>' in fallbacks
    # never posted: home (config.toml is in it), a key the environment sets
    assert "home" not in form and "agent.max_iterations" not in form
    assert " readonly" in block(page, "home") and "Not changed here" in block(page, "home")
    iterations = block(page, "agent.max_iterations")
    assert 'value="7"' in iterations and " readonly" in iterations
    assert "set by the environment" in iterations
    assert "SWITCHBOARD_AGENT__MAX_ITERATIONS" in iterations
    assert "set in config.toml" in block(page, "llm.model")
    assert "set in" not in block(page, "llm.temperature")  # its default
    assert "llm.input_price_per_million" not in page  # deprecated, set nowhere
    assert "needs a restart" in block(page, "storage.retention_days")
    assert " open" in section_tag(page, "llm") and " open" in section_tag(page, "web")
    assert " open" not in section_tag(page, "tools.exec")
    off = page[page.index('id="section-channels-not-set-up"') :]
    assert 'id="section-discord"' in off and 'id="section-email"' in off
    assert " open" not in section_tag(page, "channels-not-set-up")
    assert '<a href="#section-tools.exec">tools.exec</a>' in page  # the index


async def test_a_refused_save_is_told_above_the_form_and_beside_the_field(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with web_gateway(tmp_path / "home", fake_llm) as (gateway, _):
        assert gateway.web is not None
        url = gateway.web.url.rstrip("/")
        async with owner(gateway) as browser:
            form = form_of(await form_page(browser, url))
            form |= {"agent.max_iterations": "0", "_action": "save"}
            status, page, _ = await post_form(browser, url, form)
    why = "Input should be greater than or equal to 1"
    summary = page[page.index('<div class="error-summary"') :]
    assert status == 400
    assert (
        '<a href="#setting-agent.max_iterations"><code>agent.max_iterations</code></a>: ' + why
    ) in summary
    field = block(page, "agent.max_iterations")
    assert 'aria-invalid="true"' in field
    assert 'aria-describedby="error-agent.max_iterations about-agent.max_iterations"' in field
    assert f'<p class="field-error" id="error-agent.max_iterations">{why}</p>' in field
    assert 'value="0"' in field  # as typed
    assert " open" in section_tag(page, "agent")


async def test_a_secret_is_removed_from_the_page_by_ticking_its_box(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """An empty secret keeps it (the page never shows it), so removing one is a box of its
    own: its line leaves the home's .env, and the page says it is not set."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text("SWITCHBOARD_CALENDAR__PASSWORD='cal-secret-1234'\n")
    async with web_gateway(home, fake_llm) as (gateway, _):
        assert gateway.web is not None
        url = gateway.web.url.rstrip("/")
        async with owner(gateway) as browser:
            before = await form_page(browser, url)
            form = form_of(before) | {"_clear.calendar.password": "on", "_action": "save"}
            _, after, _ = await post_form(browser, url, form)
            async with browser.post(
                url + "/api/settings", json={"clear": ["llm.model"]}, headers={"Origin": url}
            ) as r:
                not_a_secret = await r.json()
    assert 'name="_clear.calendar.password"' in block(before, "calendar.password")
    assert "set in .env" in block(before, "calendar.password")
    assert "saved; needs a restart: <code>calendar.password</code></li></ul>" in after
    assert "_clear.calendar.password" not in after
    assert "not set" in block(after, "calendar.password")
    assert "CALENDAR__PASSWORD" not in (home / ".env").read_text()
    assert list(not_a_secret["errors"]) == ["llm.model"]


async def test_the_settings_api_lists_every_key_and_never_a_secret(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with web_gateway(tmp_path / "home", fake_llm) as (gateway, _):
        assert gateway.web is not None
        url = gateway.web.url.rstrip("/")
        bearer = {"Authorization": f"Bearer {WEB_TOKEN}"}
        async with aiohttp.ClientSession(headers=bearer) as http:
            async with http.get(url + "/api/settings") as r:
                text = await r.text()
            async with http.post(
                url + "/api/settings", json={"values": {"llm.max_tokens": "5"}}
            ) as r:
                refused, refusal = r.status, await r.json()
    data = json.loads(text)
    fields = {f["key"]: f for s in data["sections"] for f in s["fields"]}
    reference = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text()
    documented = {  # the rows of the sections' tables: key, environment variable, ...
        line.split("`")[1] for line in reference.splitlines() if "| `SWITCHBOARD_" in line
    }
    assert set(fields) == documented and len(fields) > 250
    assert fields["llm.api_key"] | {"doc": ""} == fields["llm.api_key"] | {
        "value": "",
        "kind": "secret",
        "set": True,
        "live": True,
        "doc": "",
    }
    assert fields["llm.provider"]["choices"] == ["openai", "anthropic"]
    assert fields["storage.url"]["live"] is False
    assert "sk-live-test-1234" not in text and WEB_TOKEN not in text and MEMBER_TOKEN not in text
    assert data["restart_offered"] is False  # not started by `switchboard run`
    assert refused == 400 and list(refusal["errors"]) == ["llm.max_tokens"]


# -- a running `switchboard run` ----------------------------------------------------------


@asynccontextmanager
async def switchboard_run(env: dict[str, str]) -> AsyncIterator[asyncio.subprocess.Process]:
    """``switchboard run`` in a subprocess, once it is ready."""
    process = await spawn(env, asyncio.subprocess.DEVNULL)
    try:
        await said(process, "ready\n")
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0


async def said(process: asyncio.subprocess.Process, ending: str) -> None:
    assert process.stdout is not None
    async with asyncio.timeout(30):
        while not (line := (await process.stdout.readline()).decode()).endswith(ending):
            assert line, "switchboard run ended"


async def over_socket(home: Path, method: str, path: str, body: Any = None) -> Any:
    """A call of the running gateway's web API as the command line makes it."""
    with reachable(socket_path(home / "data")) as name:
        async with (
            aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=name)) as http,
            http.request(method, "http://localhost" + path, json=body) as response,
        ):
            return response.status, await response.json()


async def answered(tg: FakeTelegram, fake_llm: FakeLLM, text: str, count: int) -> Recorded:
    """The model request of the turn ``text`` starts (the fake model echoes it)."""
    await tg.say(text, chat_id=42, user_id=42)
    await tg.wait_sent(count, chat_id=42, timeout=30)
    [request] = [r for r in fake_llm.requests if r.user_texts[-1:] == [text]]
    return request


def served_env(home: Path, fake_llm: FakeLLM, tg: FakeTelegram) -> dict[str, str]:
    """Telegram (anyone may DM it), and the web server on a free port (its API on the data
    directory's socket)."""
    env = telegram_env(home, fake_llm, tg)
    return env | {"SWITCHBOARD_WEB__ENABLED": "true", "SWITCHBOARD_WEB__PORT": "0"}


@pytest.mark.slow
async def test_config_set_and_the_settings_api_change_the_model_of_a_running_gateway(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    home = tmp_path / "home"
    env = served_env(home, fake_llm, tg)
    assert (await switchboard("onboard", env=env))[0] == 0
    async with switchboard_run(env) as process:
        first = await answered(tg, fake_llm, "one", 1)
        code, out, err = await switchboard("config", "set", "llm.model", "fake-model-2", env=env)
        assert code == 0, err
        assert f"applied by the running gateway (pid {process.pid})" in out
        second = await answered(tg, fake_llm, "two", 2)
        status, change = await over_socket(
            home, "POST", "/api/settings", {"values": {"llm.model": "fake-model-3"}}
        )
        third = await answered(tg, fake_llm, "three", 3)
        code, out, err = await switchboard("config", "set", "storage.retention_days", "10", env=env)
        assert code == 0 and "needs a restart to apply storage.retention_days" in out, err
        # valid alone, but the gateway would not start with it (the email plug-in refuses an
        # inbox that cannot answer): taken back, named
        assert (await switchboard("config", "set", "email.imap_host", "localhost", env=env))[0] == 0
        before = (home / "config.toml").read_text()
        code, out, err = await switchboard("config", "set", "email.imap_username", "me", env=env)
        after = (home / "config.toml").read_text()
        running = process.returncode is None
    assert code == 1 and "not changed" in err and "email.smtp_host" in err, out + err
    assert after == before
    assert first.body["model"] != "fake-model-2" and second.body["model"] == "fake-model-2"
    assert (status, change["applied"], change["restart"]) == (200, ["llm.model"], [])
    assert third.body["model"] == "fake-model-3"
    assert running  # the same process all along


@pytest.mark.slow
async def test_a_secret_changed_on_a_running_gateway_is_kept_in_dotenv_and_used_at_once(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    home = tmp_path / "home"
    env = served_env(home, fake_llm, tg)
    del env["SWITCHBOARD_LLM__API_KEY"]  # a variable would win over .env
    assert (await switchboard("onboard", env=env))[0] == 0
    async with switchboard_run(env) as process:
        await answered(tg, fake_llm, "one", 1)
        key = "sk-from-the-cli-0123456"
        code, out, err = await switchboard("config", "set", "llm.api_key", key, env=env)
        assert code == 0, err
        assert f"applied by the running gateway (pid {process.pid})" in out
        second = await answered(tg, fake_llm, "two", 2)
        status, change = await over_socket(
            home, "POST", "/api/settings", {"values": {"llm.api_key": "sk-from-the-page-0123456"}}
        )
        third = await answered(tg, fake_llm, "three", 3)
    assert second.headers["Authorization"] == f"Bearer {key}"
    assert (status, change["applied"], change["errors"]) == (200, ["llm.api_key"], {})
    assert third.headers["Authorization"] == "Bearer sk-from-the-page-0123456"
    assert "sk-from" not in (home / "config.toml").read_text()
    assert "SWITCHBOARD_LLM__API_KEY='sk-from-the-page-0123456'" in (home / ".env").read_text()


@pytest.mark.slow
async def test_a_restart_asked_for_starts_the_gateway_anew_in_the_same_process(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    home = tmp_path / "home"
    env = served_env(home, fake_llm, tg)
    assert (await switchboard("onboard", env=env))[0] == 0
    async with switchboard_run(env) as process:
        status, change = await over_socket(
            home, "POST", "/api/settings", {"values": {"agent.name": "Robin"}}
        )
        before = await answered(tg, fake_llm, "who are you?", 1)
        _, form = await over_socket(home, "GET", "/api/settings")
        restarting = await over_socket(home, "POST", "/api/restart")
        await said(process, "restarting\n")
        await said(process, "ready\n")
        after = await answered(tg, fake_llm, "and now?", 2)
        pid_kept = process.returncode is None
    assert (status, change["restart"]) == (200, ["agent.name"])
    assert form["restart_offered"] is True
    assert restarting == (202, {"restarting": True})
    assert "Robin" not in before.system_text and "Robin" in after.system_text
    assert pid_kept
