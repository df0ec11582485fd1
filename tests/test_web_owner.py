"""Who is the owner of the web chat and its API (docs/security.md, "The web chat and
status page"): whoever holds a secret the gateway issued, never whoever seems local.

A browser signed in with a one-time link, the web token, or the command line over the
gateway's Unix socket (the kernel names its user). Where a connection comes from grants
nothing: these drive the real web server with clients running as the gateway's own uid and
as another user, clients that hang up before they are served while the server is busy, and
the real bubblewrap sandbox with a network, which cannot reach the gateway's sockets by TCP,
MPTCP or anything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path

import aiohttp
import pexpect
import pytest
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer
from yarl import URL

from agent.mcp.spec import StdioTarget
from agent.tools.base import ToolError
from agent.tools.sandbox import find_bwrap
from agent.tools.shell import Exec
from agent.toolset import default_tools
from agent.workspace import Workspace
from channels.memory import MemoryChannel
from gateway.cli.doctor.tools import sandbox_checks
from gateway.cli.web import sign_out_in_store
from gateway.config.channels import WebSettings
from gateway.core.system.portguard import PortGuard
from gateway.runtime.agents.mcp import transports
from gateway.runtime.app import Gateway
from gateway.web.access.security import KEY_HEADER, KEY_PROTOCOL, WebGuard
from gateway.web.access.sessions import GRACE_SECONDS, WebSessions
from gateway.web.access.signin import KEY_FILE, SignInCodes
from gateway.web.access.signin import sign_in_link as make_link
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, text
from tests.test_cli import cli_env
from tests.test_cli import switchboard as cli
from tests.test_sandbox import exec_tool
from tests.test_tools import run
from tests.test_web_server import client, message_form, next_event, owner, serving, sign_in

SYSTEM_PYTHON = "/usr/bin/python3"
STRANGER = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a client as uid 65534")
needs_python = pytest.mark.skipif(
    not Path(SYSTEM_PYTHON).exists(), reason="needs /usr/bin/python3 (readable by every uid)"
)
needs_guard = pytest.mark.skipif(
    not PortGuard(lambda: ()).available, reason="the kernel cannot keep sandboxes off our sockets"
)
needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or find_bwrap("auto") is None, reason="needs bubblewrap"
)

# What another local user's program does: a GET, a chat message, an approval; cookies kept,
# a sign-in link followed first when one is given (and the page key it hands the page sent
# from then on, as the pages do). Standard library only.
CLIENT = r"""
import json, re, sys, urllib.request, urllib.error, http.cookiejar
url, link = sys.argv[1], sys.argv[2]
origin = url.rstrip("/")
opener = urllib.request.build_opener(
    urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()),
    urllib.request.ProxyHandler({}),
)
key = ""
def call(method, path, body=None, kind=None):
    headers = {"Origin": origin, "X-Switchboard-Key": key}
    if kind:
        headers["Content-Type"] = kind
    request = urllib.request.Request(url + path, data=body, headers=headers, method=method)
    try:
        with opener.open(request, timeout=10) as response:
            return [response.status, response.read().decode()]
    except urllib.error.HTTPError as error:
        return [error.code, error.read().decode()]
results = {}
if link:
    results["link"] = call("GET", link[len(url):])
    found = re.search(r'data-key="([^"]+)"', results["link"][1])
    key = found[1] if found else ""
boundary = "b0undary"
body = (
    f"--{boundary}\r\nContent-Disposition: form-data; name=\"id\"\r\n\r\nmsg-0000000009\r\n"
    f"--{boundary}\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\n/approve\r\n"
    f"--{boundary}--\r\n"
).encode()
results["status"] = call("GET", "api/status")
results["memory"] = call("GET", "api/workspace/MEMORY.md")
results["message"] = call("POST", "api/chat/messages", body, f"multipart/form-data; boundary={boundary}")
print(json.dumps(results))
"""


async def as_stranger(url: str, link: str = "") -> dict[str, list[object]]:
    process = await asyncio.create_subprocess_exec(
        SYSTEM_PYTHON,
        "-I",
        "-c",
        CLIENT,
        url,
        link,
        user=STRANGER,
        group=STRANGER,
        extra_groups=[],
        cwd="/",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    results: dict[str, list[object]] = json.loads(out)
    return results


async def sign_in_link(home: Path) -> str:
    """What `switchboard web` prints, run as the gateway's user."""
    env = {**os.environ, "SWITCHBOARD_HOME": str(home)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "web", "--json", env=env, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0
    link: str = json.loads(out)["link"]
    return link


async def switchboard(home: Path, *args: str) -> tuple[int, str]:
    """The command line, run as the gateway's user."""
    env = {**os.environ, "SWITCHBOARD_HOME": str(home)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", *args, env=env, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode()


async def test_no_connection_is_the_owner_without_a_secret(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """The gateway's own uid over TCP (what a sandbox looks like from outside) gets nothing."""
    settings = make_settings(web={"port": 0})
    (settings.workspace_dir / "MEMORY.md").write_text("the owner's secret memory")
    async with serving(settings) as (gateway, url, _chat), client() as http:
        for path in ("api/status", "api/workspace/MEMORY.md"):
            async with http.get(url + path) as response:
                assert response.status == 401
                body = await response.text()
                assert "switchboard web" in body and "secret memory" not in body
        async with http.get(url, headers={"Accept": "text/html"}) as page:
            assert page.url.path == "/login"  # a browser is shown how to sign in
            assert "switchboard web" in await page.text()
        await gateway.wait_idle()
        assert fake_llm.requests == []


@as_root
@needs_python
async def test_another_user_gets_no_turn_no_approval_and_no_page_data(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(web={"port": 0})
    (settings.workspace_dir / "MEMORY.md").write_text("the owner's secret memory")
    async with serving(settings) as (gateway, url, _chat):
        results = await as_stranger(url)
        for name in ("status", "memory", "message"):
            status, body = results[name]
            assert status == 401, (name, body)
            assert "switchboard web" in str(body) and "secret memory" not in str(body)
        await gateway.wait_idle()
        assert fake_llm.requests == []  # no turn
        assert await gateway.store.journal.counts() == {}


@as_root
async def test_a_client_that_hangs_up_before_it_is_served_is_never_the_owner(
    make_settings: SettingsFactory,
) -> None:
    """Run as root, a client's closed connection is listed with uid 0 in /proc/net/tcp:
    when identity came from there, an approval sent by a client that hung up at once, while
    the server was kept busy, was the owner's. Now nothing of the connection counts."""
    settings = make_settings(web={"port": 0}, telegram={"token": "123:abc"})
    telegram = MemoryChannel("telegram")
    async with serving(settings, telegram) as (gateway, url, _chat):
        assert gateway.web is not None and gateway.web.port is not None
        await telegram.push("let me in", sender_id="555", sender_name="Stranger")
        await telegram.wait_for(1)
        [pending] = await gateway.store.pairings.listing()
        port = gateway.web.port
        request = (
            f"POST /api/pairing/{pending.code}/approve HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{port}\r\nOrigin: {url.rstrip('/')}\r\n"
            "Content-Length: 0\r\n\r\n"
        ).encode()

        def hang_up() -> None:
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(request)

        async def busy() -> None:
            async with client() as http, http.get(url + "api/status") as response:
                await response.read()

        for _ in range(3):
            await asyncio.gather(
                *(busy() for _ in range(50)),
                *(asyncio.to_thread(hang_up) for _ in range(20)),
            )
        await gateway.wait_idle()
        assert not await gateway.store.pairings.is_approved("telegram", "555")
        assert [p.state for p in await gateway.store.pairings.listing()] == ["pending"]


@as_root
@needs_python
async def test_a_sign_in_link_lets_one_browser_in_once(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(web={"port": 0})
    async with serving(settings) as (_gateway, url, _chat):
        key = settings.data_dir / KEY_FILE
        assert key.stat().st_mode & 0o777 == 0o600  # no other uid can make a link
        link = await sign_in_link(settings.home)
        assert link.startswith(url + "signin?code=")
        first = await as_stranger(url, link)
        assert first["link"][0] == 200  # the page that hands the page key to the origin
        assert first["status"][0] == 200 and first["memory"][0] == 200
        again = await as_stranger(url, link)  # another browser with the same link
        assert again["link"][0] == 403 and "switchboard web" in str(again["link"][1])
        assert again["status"][0] == 401


# What a browser's pages fetch: the owner's data, each refused to the session cookie alone.
DATA = (
    "api/status",
    "api/workspace/MEMORY.md",
    "api/conversations",
    "api/conversations/transcript?session=webchat:owner",
    "api/people",
    "api/approvals",
    "api/memory",
    "api/jobs",
    "api/usage",
    "api/health",
    "api/events",
    "api/settings",
    "api/settings/form",
    "api/restart",
    "api/traces/some-turn",
    "api/chat/files/some-entry/0",
    "metrics",
)
# The pages a browser navigates to: markup and scripts only, opened by the cookie alone.
SHELLS = ("", "conversations", "people", "memory", "settings", "health", "trace/some-turn")


async def test_the_session_cookie_alone_opens_the_page_shells_and_nothing_else(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """What a program that got hold of the owner's cookie can do with it (a browser sends
    it to every port of 127.0.0.1): open the pages' markup, none of the owner's data, no
    change, no socket. With the page key the sign-in handed the page, the same requests
    are the owner's; a socket offers the key as its subprotocol, and is answered with the
    plain one only."""
    settings = make_settings(web={"port": 0})
    (settings.workspace_dir / "MEMORY.md").write_text("the owner's secret memory")
    async with serving(settings) as (gateway, url, _chat), owner(gateway) as browser:
        key = browser.headers[KEY_HEADER]
        cookie = browser.cookie_jar.filter_cookies(URL(url))["switchboard_auth"].value
        origin = url.rstrip("/")
        alone = {"Cookie": f"switchboard_auth={cookie}", "Origin": origin}
        refused, shells, keyed = {}, {}, {}
        async with aiohttp.ClientSession(headers=alone) as thief:
            for path in DATA:
                async with thief.get(url + path) as r:
                    refused[path] = (r.status, (await r.json()).get("sign_in"))
                async with browser.get(url + path) as r:
                    keyed[path] = r.status
            for path in SHELLS:
                async with thief.get(url + path, headers={"Accept": "text/html"}) as r:
                    body = await r.text()
                    shells[path] = (r.status, r.content_type, "secret memory" in body)
            async with thief.post(url + "api/chat/messages", data=message_form("hi")) as r:
                refused["message"] = (r.status, (await r.json()).get("sign_in"))
            with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
                await thief.ws_connect(url + "api/chat/socket", protocols=["switchboard"])
            refused["socket"] = (caught.value.status, None)
            with pytest.raises(aiohttp.WSServerHandshakeError) as caught:  # not as a page
                await thief.ws_connect(url + "api/chat/socket", protocols=[KEY_PROTOCOL + key])
            refused["key alone"] = (caught.value.status, None)
            offered = ["switchboard", KEY_PROTOCOL + key]  # as the chat page opens it
            async with thief.ws_connect(url + "api/chat/socket", protocols=offered) as page:
                assert (await page.receive_json())["type"] == "hello"
                answered_with = page.protocol
        await gateway.wait_idle()
        assert fake_llm.requests == []
    assert refused == dict.fromkeys(DATA, (401, "key")) | {
        "message": (401, "key"),
        "socket": (401, None),
        "key alone": (401, None),
    }
    assert shells == dict.fromkeys(SHELLS, (200, "text/html", False))
    assert 401 not in keyed.values(), keyed
    assert answered_with == "switchboard"  # the key is never echoed


async def test_sessions_kept_before_page_keys_are_not_loaded(
    make_settings: SettingsFactory,
) -> None:
    """A session kept by an older version has no page key: its browser has none either,
    so it could open nothing; it is not loaded, and that browser signs in again."""
    settings = make_settings()
    async with Gateway(settings, channels=[]) as gateway:
        kv = gateway.store.kv
        sessions = WebSessions(b"", lifetime_seconds=3600, kv=kv)
        await sessions.create()
        kept = await kv.get("web_sessions")
        [(digest, [expires, renew_at, _key])] = kept["sessions"].items()
        again = WebSessions(b"", lifetime_seconds=3600, kv=kv)
        await again.load()
        await kv.set("web_sessions", kept | {"sessions": {digest: [expires, renew_at]}})
        older = WebSessions(b"", lifetime_seconds=3600, kv=kv)
        await older.load()
    assert (again.count, older.count) == (1, 0)


async def test_switchboard_run_in_a_terminal_prints_a_link_that_signs_the_browser_in(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The first hour: `make run` (a terminal) prints the link; the link is the way in."""
    env = cli_env(tmp_path / "home", fake_llm, SWITCHBOARD_WEB__PORT="0")
    assert (await cli("chat", "-m", "hello", env=env))[0] == 0  # a home to run
    child = pexpect.spawn(
        sys.executable, ["-m", "gateway", "run"], env=env, encoding="utf-8", timeout=60
    )
    try:
        await asyncio.to_thread(child.expect, r"(http://\S+/signin\?code=\S+)")
        link = str(child.match.group(1))
        await asyncio.to_thread(child.expect, "ready")
        url = link.split("signin?", maxsplit=1)[0]
        async with client() as http:
            async with http.get(url + "api/status") as response:
                assert response.status == 401  # nothing without the link
            await sign_in(http, link)
            async with http.get(url + "api/status") as response:
                assert response.status == 200
    finally:
        child.sendintr()
        await asyncio.to_thread(child.expect, pexpect.EOF)


async def test_a_forged_or_stale_code_signs_nobody_in(make_settings: SettingsFactory) -> None:
    settings = make_settings(web={"port": 0})
    async with serving(settings) as (_gateway, url, _chat), client() as http:
        link = await sign_in_link(settings.home)
        expires, nonce, mac = link.split("code=")[1].split(".")
        forged = f"{url}signin?code={int(expires) + 3600}.{nonce}.{mac}"
        async with http.get(forged, allow_redirects=False) as response:
            assert response.status == 403
            assert "has been used, has expired or is not right" in await response.text()
        assert "switchboard_auth" not in {c.key for c in http.cookie_jar}
        # the good link signs in once; opened again, it takes a signed-in browser home
        # instead of saying it was used (a reload of the page it led to, say)
        async with http.get(link, allow_redirects=False) as response:
            assert response.status == 200 and "Signed in" in await response.text()
        async with http.get(link, allow_redirects=False) as response:
            assert (response.status, response.headers.get("Location")) == (303, "/")
        async with client() as stranger, stranger.get(link, allow_redirects=False) as response:
            assert response.status == 403  # without the session, a used link signs nobody in


async def test_the_command_line_is_the_owner_over_its_local_socket(
    make_settings: SettingsFactory,
) -> None:
    settings = make_settings(web={"port": 0})
    async with serving(settings):
        code, out = await switchboard(settings.home, "status", "--json")
        assert code == 0
        report = json.loads(out)
        assert report["live"] is True and report["live_error"] is None
        sock = settings.data_dir / "web.sock"
        assert sock.stat().st_mode & 0o777 == 0o600
        assert settings.data_dir.stat().st_mode & 0o077 == 0  # nobody else may even look


@as_root
@needs_python
async def test_another_user_cannot_open_the_local_socket(make_settings: SettingsFactory) -> None:
    settings = make_settings(web={"port": 0})
    async with serving(settings):
        dial = (
            "import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "try:\n    s.connect(sys.argv[1]); print('connected')\n"
            "except OSError as e: print('refused', e.errno)\n"
        )
        process = await asyncio.create_subprocess_exec(
            SYSTEM_PYTHON,
            "-I",
            "-c",
            dial,
            str(settings.data_dir / "web.sock"),
            user=STRANGER,
            group=STRANGER,
            extra_groups=[],
            cwd="/",
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await asyncio.wait_for(process.communicate(), 60)
        assert out.decode().strip() == "refused 13"  # EACCES


async def signed_out(page: aiohttp.ClientWebSocketResponse) -> str:
    """How the server closed a page's socket: its reason, once the code says signed out."""
    async with asyncio.timeout(10):
        while (message := await page.receive()).type == WSMsgType.TEXT:
            pass  # events the page got before
    assert message.type == WSMsgType.CLOSE and message.data == 4401
    return str(message.extra)


async def ended(stream: aiohttp.ClientResponse) -> None:
    """A control page's event stream ends (the server dropped its connection)."""
    with contextlib.suppress(aiohttp.ClientPayloadError):
        async with asyncio.timeout(10):
            while await stream.content.readline():
                pass


async def test_signing_out_closes_that_browsers_open_chat_and_event_stream_at_once(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """The laptop signs out in one tab: its chat open in another tab is cut off there and
    then, so what the phone writes next never reaches it; the phone's chat goes on."""
    fake_llm.queue(text("an answer for the phone only"))
    settings = make_settings(web={"port": 0})
    async with (
        serving(settings) as (gateway, url, _chat),
        owner(gateway) as laptop,
        owner(gateway) as phone,
    ):
        origin = url.rstrip("/")
        async with (
            laptop.ws_connect(url + "api/chat/socket", origin=origin) as laptop_chat,
            phone.ws_connect(url + "api/chat/socket", origin=origin) as phone_chat,
            laptop.get(url + "api/events") as laptop_events,
        ):
            assert (await laptop_chat.receive_json())["type"] == "hello"
            assert (await phone_chat.receive_json())["type"] == "hello"
            assert (await laptop_events.content.readline()).startswith(b"event: pulse")
            async with laptop.post(
                url + "logout", headers={"Origin": origin}, allow_redirects=False
            ) as response:
                assert response.status == 303
            assert await signed_out(laptop_chat) == "signed out: sign in again"
            await ended(laptop_events)
            async with phone.post(
                url + "api/chat/messages",
                data=message_form("plans for after the sign-out"),
                headers={"Origin": origin},
            ) as response:
                assert response.status == 200
            answer = await next_event(phone_chat, "message", "assistant")
            assert answer["entry"]["text"] == "an answer for the phone only"


async def test_signing_out_everywhere_ends_every_session_and_unused_link(
    make_settings: SettingsFactory,
) -> None:
    settings = make_settings(web={"port": 0})
    async with serving(settings) as (gateway, url, _chat), owner(gateway) as http:
        unused = await sign_in_link(settings.home)
        async with http.get(url + "api/status") as response:
            assert response.status == 200
        async with http.ws_connect(url + "api/chat/socket", origin=url.rstrip("/")) as lost:
            await lost.receive_json()
            code, out = await switchboard(settings.home, "web", "--sign-out-all")
            assert code == 0 and "Signed out 1 browser session" in out
            assert await signed_out(lost) == "signed out: sign in again"  # the lost laptop's
        async with http.get(url + "api/status") as response:
            assert response.status == 401
        async with client() as other, other.get(unused, allow_redirects=False) as response:
            assert response.status == 403  # made before the sign-out: void


async def test_a_sign_out_of_everyone_made_in_the_store_ends_the_sessions_of_a_running_server(
    make_settings: SettingsFactory,
) -> None:
    """What `switchboard web --sign-out-all` does where no gateway runs beside it (a
    cluster's leader runs elsewhere): the store says so, and the running web server, which
    looks every few seconds, ends its sessions and unused links."""
    settings = make_settings(web={"port": 0})
    async with serving(settings) as (gateway, url, _chat), owner(gateway) as http:
        unused = await sign_in_link(settings.home)
        assert gateway.web is not None
        assert not await gateway.web.guard.follow_sign_outs()  # nothing new: nothing ends
        async with http.get(url + "api/status") as response:
            assert response.status == 200
        async with http.ws_connect(url + "api/chat/socket", origin=url.rstrip("/")) as page:
            await page.receive_json()
            assert await sign_out_in_store(settings) == 1
            assert await gateway.web.guard.follow_sign_outs()  # its next look
            assert await signed_out(page) == "signed out: sign in again"
        async with http.get(url + "api/status") as response:
            assert response.status == 401
        async with client() as other, other.get(unused, allow_redirects=False) as response:
            assert response.status == 403


async def test_a_session_in_use_gets_a_new_id_and_the_old_one_soon_stops_working() -> None:
    now = [1_000.0]
    sessions = WebSessions(
        b"", lifetime_seconds=7 * 86_400, clock=lambda: now[0], renew_seconds=3600
    )
    first = (await sessions.create()).session
    assert await sessions.renew(first) is None  # not due yet
    now[0] += 3601
    second = await sessions.renew(first)
    assert second is not None and second != first
    assert sessions.valid(first) and sessions.valid(second)  # requests already on their way
    now[0] += GRACE_SECONDS + 1
    assert not sessions.valid(first) and sessions.valid(second)


async def test_an_open_page_outlives_its_sessions_new_id_and_ends_when_the_session_expires() -> (
    None
):
    """A socket opened with an id that was renewed since stays open (the browser is still
    signed in); once the session expires, the server's next look closes it."""
    now = [time.time()]
    sessions = WebSessions(b"", lifetime_seconds=7200, clock=lambda: now[0], renew_seconds=3600)
    key = b"k" * 32
    guard = WebGuard(WebSettings(), sessions=sessions, sign_in=SignInCodes(key))

    async def open_page(request: web.Request) -> web.StreamResponse:  # as a channel's socket
        sock = web.WebSocketResponse()
        guard.prepare_stream(request, sock)
        await sock.prepare(request)
        async for _ in sock:
            pass
        return sock

    async def page_data(request: web.Request) -> web.StreamResponse:
        return web.json_response({})

    app = web.Application(middlewares=[guard.middleware])
    app.router.add_get("/signin", guard.sign_in)
    app.router.add_get("/socket", open_page)
    app.router.add_get("/data", page_data)
    async with TestServer(app, host="127.0.0.1") as server, client() as browser:
        url = str(server.make_url("/"))
        await sign_in(browser, make_link(key, url))
        async with browser.ws_connect(url + "socket", origin=url.rstrip("/")) as page:
            now[0] += 3601
            async with browser.get(url + "data") as response:
                assert "switchboard_auth" in response.cookies  # a new id
            now[0] += GRACE_SECONDS + 1  # the id the page was opened with has ended
            assert guard.end_streams() == 0
            async with browser.get(url + "data") as response:
                assert response.status == 200
            now[0] += 7200
            assert guard.end_streams() == 1
            assert await signed_out(page) == "signed out: sign in again"


DIAL = """
import errno, socket
for name, family, host, proto in (
    ("tcp", socket.AF_INET, "127.0.0.1", 0), ("tcp6", socket.AF_INET6, "::1", 0),
    ("mptcp", socket.AF_INET, "127.0.0.1", 262), ("mptcp6", socket.AF_INET6, "::1", 262),
    ("other", socket.AF_INET, "127.0.0.1", 0),
):
    port = OTHER if name == "other" else PORT
    try:
        s = socket.socket(family, socket.SOCK_STREAM, proto)
        s.settimeout(3); s.connect((host, port)); s.close()
        print("reached", name, port)
    except OSError as e:
        print("refused", name, errno.errorcode.get(e.errno, e.errno))
"""


@needs_bwrap
@needs_guard
@needs_python
async def test_a_networked_exec_cannot_reach_the_gateway_by_any_protocol(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(web={"port": 0}, tools={"exec": {"network": True, "sandbox": "bwrap"}})
    async with serving(settings) as (gateway, _url, _chat):
        assert gateway.web is not None and gateway.web.port is not None
        port = gateway.web.port
        other = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        other_port = other.sockets[0].getsockname()[1]
        script = DIAL.replace("OTHER", str(other_port)).replace("PORT", str(port))
        (settings.workspace_dir / "dial.py").write_text(script)
        async with other:
            result = await run(
                exec_tool(default_tools(settings)),
                Workspace(settings.workspace_dir),
                command=f"{SYSTEM_PYTHON} dial.py",
            )
        lines = result.content
        assert f"reached tcp {port}" not in lines and f"reached mptcp {port}" not in lines, lines
        assert "refused tcp EACCES" in lines  # Landlock's port rule
        assert "refused mptcp EPROTONOSUPPORT" in lines  # the socket filter
        assert "refused mptcp6 EPROTONOSUPPORT" in lines
        assert f"reached other {other_port}" in lines  # the network itself still works


@needs_bwrap
@needs_guard
@needs_python
async def test_a_sandboxed_mcp_server_cannot_reach_the_gateway_by_any_protocol(
    make_settings: SettingsFactory,
) -> None:
    async with serving(make_settings(web={"port": 0})) as (gateway, _url, _chat):
        assert gateway.web is not None
        port = gateway.web.port
        # The same home with a stdio server configured: the transports the gateway would use.
        settings = make_settings(
            web={"port": 0},
            mcp={"servers": {"probe": {"command": SYSTEM_PYTHON, "args": ["-c", "pass"]}}},
        )
        opener = transports(settings)
        cwd = settings.home / "mcp-probe"
        cwd.mkdir()
        for proto, error in ((0, "PermissionError"), (262, "Protocol not supported")):
            dial = (
                f"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, {proto}); "
                f"s.connect(('127.0.0.1', {port}))"
            )
            argv = opener.command_line(
                StdioTarget(command=SYSTEM_PYTHON, args=("-c", dial), cwd=cwd)
            )
            process = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
            )
            _out, err = await asyncio.wait_for(process.communicate(), 60)
            assert process.returncode != 0
            assert error in err.decode(), err.decode()


@needs_bwrap
@needs_python
async def test_a_networked_sandbox_is_refused_where_the_kernel_cannot_guard_it(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    guard = PortGuard(lambda: (), unguarded=lambda: "this kernel's Landlock (ABI 3) cannot")
    exec_tool_ = Exec(sandbox=find_bwrap("bwrap", network=True, guard=guard))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with pytest.raises(ToolError, match=r"refused here.*network off"):
        await run(exec_tool_, Workspace(workspace), command="echo ran")


@needs_guard
def test_doctor_says_which_protection_keeps_sandboxes_off_the_gateway(
    make_settings: SettingsFactory,
) -> None:
    quiet = sandbox_checks(make_settings())
    assert not [c for c in quiet if c.name == "network guard"]  # no networked sandbox
    [check] = [
        c
        for c in sandbox_checks(make_settings(tools={"exec": {"network": True}}))
        if c.name == "network guard"
    ]
    assert check.status == "ok"
    assert "Landlock" in check.message and "seccomp" in check.message
    assert "by any protocol" in check.message


def test_a_link_made_before_a_restart_signs_nobody_in_after_it() -> None:
    key = b"k" * 32
    link = make_link(key, "http://127.0.0.1:8080", now=1_000).split("code=")[1]
    restarted = SignInCodes(key, clock=lambda: 1_001.5)  # used links were forgotten
    assert not restarted.redeem(link)
    running = SignInCodes(key, clock=lambda: 999.2)  # the process that made it
    assert running.redeem(link) and not running.redeem(link)
