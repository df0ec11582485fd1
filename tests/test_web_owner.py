"""Who is the owner of the token-less local web chat (docs/security.md, "The local web chat").

Only the user who runs the gateway: their own programs (recognised by the connecting
socket's uid) or a browser signed in with a one-time link of ``switchboard web``. These drive
the real web server with a client running as another user (uid 65534), and the real
bubblewrap sandbox with a network, which cannot reach the gateway's port at all.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from agent.mcp.spec import StdioTarget
from agent.tools.sandbox import find_bwrap
from agent.toolset import default_tools
from agent.workspace import Workspace
from gateway.cli.doctor_tools import sandbox_checks
from gateway.core.portguard import PortGuard
from gateway.runtime.mcp import transports
from gateway.web.signin import KEY_FILE, SignInCodes
from gateway.web.signin import sign_in_link as make_link
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM
from tests.test_sandbox import exec_tool
from tests.test_tools import run
from tests.test_web_server import client, serving

SYSTEM_PYTHON = "/usr/bin/python3"
STRANGER = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a client as uid 65534")
needs_python = pytest.mark.skipif(
    not Path(SYSTEM_PYTHON).exists(), reason="needs /usr/bin/python3 (readable by every uid)"
)
needs_guard = pytest.mark.skipif(
    not PortGuard(lambda: ()).available, reason="the kernel's Landlock cannot restrict TCP"
)
needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or find_bwrap("auto") is None, reason="needs bubblewrap"
)

# What another local user's program does: a GET, a chat message, an approval; cookies kept,
# a sign-in link followed first when one is given. Standard library only.
CLIENT = r"""
import json, sys, urllib.request, urllib.error, http.cookiejar
url, link = sys.argv[1], sys.argv[2]
origin = url.rstrip("/")
opener = urllib.request.build_opener(
    urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()),
    urllib.request.ProxyHandler({}),
)
def call(method, path, body=None, kind=None):
    headers = {"Origin": origin}
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
        # The owner's own program (this test's uid) still gets in without anything set up.
        async with client() as http, http.get(url + "api/workspace/MEMORY.md") as response:
            assert response.status == 200
            assert "secret memory" in (await response.json())["text"]


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
        assert first["link"][0] == 200  # the redirect to the chat page, followed
        assert first["status"][0] == 200 and first["memory"][0] == 200
        again = await as_stranger(url, link)  # another browser with the same link
        assert again["link"][0] == 403 and "switchboard web" in str(again["link"][1])
        assert again["status"][0] == 401


async def test_a_forged_or_stale_code_signs_nobody_in(make_settings: SettingsFactory) -> None:
    settings = make_settings(web={"port": 0})
    async with serving(settings) as (_gateway, url, _chat), client() as http:
        link = await sign_in_link(settings.home)
        expires, nonce, mac = link.split("code=")[1].split(".")
        forged = f"{url}signin?code={int(expires) + 3600}.{nonce}.{mac}"
        async with http.get(forged, allow_redirects=False) as response:
            assert response.status == 403
        assert "switchboard_auth" not in {c.key for c in http.cookie_jar}


@needs_bwrap
@needs_guard
@needs_python
async def test_a_networked_exec_cannot_reach_the_gateways_port(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(web={"port": 0}, tools={"exec": {"network": True, "sandbox": "bwrap"}})
    async with serving(settings) as (gateway, _url, _chat):
        assert gateway.web is not None and gateway.web.port is not None
        port = gateway.web.port
        other = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        other_port = other.sockets[0].getsockname()[1]
        dial = (
            f'{SYSTEM_PYTHON} -c "import socket\n'
            f"for host, port in (('127.0.0.1', {port}), ('::1', {port}), ('localhost', {port}),"
            f" ('127.0.0.1', {other_port})):\n"
            "    try:\n        socket.create_connection((host, port), 3).close(); print('reached', port)\n"
            "    except OSError as e: print('refused', port, e.errno)\""
        )
        async with other:
            result = await run(
                exec_tool(default_tools(settings)), Workspace(settings.workspace_dir), command=dial
            )
        assert f"reached {port}" not in result.content, result.content
        assert result.content.count(f"refused {port} 13") == 3  # EACCES: Landlock said no
        assert f"reached {other_port}" in result.content  # the network itself still works


@needs_bwrap
@needs_guard
@needs_python
async def test_a_sandboxed_mcp_server_cannot_reach_the_gateways_port(
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
        dial = f"import socket; socket.create_connection(('127.0.0.1', {port}), 3)"
        argv = opener.command_line(StdioTarget(command=SYSTEM_PYTHON, args=("-c", dial), cwd=cwd))
        process = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        _out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode != 0
        assert "PermissionError" in err.decode(), err.decode()


@needs_guard
def test_doctor_says_networked_sandboxes_are_kept_off_the_gateways_ports(
    make_settings: SettingsFactory,
) -> None:
    quiet = sandbox_checks(make_settings())
    assert not [c for c in quiet if c.name == "port guard"]  # no networked sandbox: no line
    [check] = [
        c
        for c in sandbox_checks(make_settings(tools={"exec": {"network": True}}))
        if c.name == "port guard"
    ]
    assert check.status == "ok" and "cannot connect to the gateway's own ports" in check.message


def test_a_link_made_before_a_restart_signs_nobody_in_after_it() -> None:
    key = b"k" * 32
    link = make_link(key, "http://127.0.0.1:8080", now=1_000).split("code=")[1]
    restarted = SignInCodes(key, clock=lambda: 1_001.5)  # used links were forgotten
    assert not restarted.redeem(link)
    running = SignInCodes(key, clock=lambda: 999.2)  # the process that made it
    assert running.redeem(link) and not running.redeem(link)
