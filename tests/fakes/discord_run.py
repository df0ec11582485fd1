"""``switchboard run`` against the fake Discord, in a process of its own.

discord.py has no base-URL setting, so the in-process tests point two of its class
attributes at the fake (:meth:`tests.fakes.discord.FakeDiscord.patch`). A test that must kill
the gateway process starts it with ``python -m tests.fakes.discord_run run``: the same two
attributes, read from ``FAKE_DISCORD_URL``, then the real command line, unchanged.
"""

from __future__ import annotations

import os

import discord
import yarl

from gateway.cli.main import main

if __name__ == "__main__":
    base = os.environ["FAKE_DISCORD_URL"]
    discord.http.Route.BASE = f"{base}/api/v10"
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(
        base.replace("http://", "ws://", 1) + "/gateway"
    )
    raise SystemExit(main())
