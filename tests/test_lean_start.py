"""A gateway loads only what its configuration uses: the SDKs of channels that are off, the
other model provider's SDK, the web server and the browser stay out of the process (memory and
start-up time; see docs/performance.md, "lean start")."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from tests.fakes.telegram import FakeTelegram

# Runs in a fresh interpreter: starts the gateway with the channels its settings enable, as
# `switchboard run` does, then prints which of these top-level packages are loaded once it
# is ready.
PROBE = """
import asyncio, json, sys
from channels import build_channels
from gateway.config.settings import load_settings
from gateway.runtime.app import Gateway
from gateway.runtime.home import onboard

WATCHED = %r

async def main():
    settings = load_settings()
    onboard(settings.home, settings.workspace_dir)
    async with Gateway(settings, channels=build_channels(settings)):
        print(json.dumps(sorted(m for m in WATCHED if m in sys.modules)), flush=True)

asyncio.run(main())
"""
WATCHED = (
    "telegram",
    "discord",
    "slack_bolt",
    "slack_sdk",
    "nio",  # the Matrix channel's client (an optional extra)
    # every channel's plug-in module loads (its settings section); its adapter must not
    "channels.whatsapp.adapter",
    "channels.matrix.adapter",
    "aiosmtplib",
    "aioimaplib",
    "anthropic",
    "aiohttp.web",  # the web server (aiohttp's client is Telegram's transport)
    "playwright",
    "mcp",
    "psycopg",  # the PostgreSQL driver: only with storage.url
    "prompt_toolkit",  # the terminal chat's front end: only in `switchboard chat`
    # not "rich": httpx imports its own command line (click, rich, pygments) whenever they
    # are installed, and ddgs brings click
)


async def test_a_telegram_only_gateway_loads_no_other_channel_or_provider_sdk(
    tmp_path: Path, tg: FakeTelegram
) -> None:
    env = {
        **os.environ,
        "SWITCHBOARD_HOME": str(tmp_path / "home"),
        "SWITCHBOARD_LLM__PROVIDER": "openai",
        "SWITCHBOARD_LLM__MODEL": "fake-model",
        "SWITCHBOARD_LLM__API_KEY": "sk-test-key-123456",
        "SWITCHBOARD_LLM__BASE_URL": "http://127.0.0.1:9/v1",  # never called: no message comes
        "SWITCHBOARD_TELEGRAM__TOKEN": tg.token,
        "SWITCHBOARD_TELEGRAM__BASE_URL": tg.base_url,
        "SWITCHBOARD_WEB__ENABLED": "false",
        "SWITCHBOARD_HEARTBEAT__ENABLED": "false",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PROBE % (WATCHED,),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, err.decode()
    assert json.loads(out.decode().strip().splitlines()[-1]) == ["telegram"]
    assert tg.called("getUpdates") or tg.called("getMe")  # it really started the channel
