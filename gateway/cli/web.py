"""``switchboard web``: a one-time link that signs a browser in to the web chat.

A browser is the owner only with a secret the gateway issued (docs/security.md): it opens
this link once, within ten minutes, and keeps a session cookie and, in the page's own
storage, the sign-in's page key (:mod:`gateway.web.access.security`). Only the user who runs the
gateway can make a link: it is signed with a key the gateway keeps owner-only in
``data/web-signin.key`` (:mod:`gateway.web.access.signin`). ``--sign-out-all`` ends every
browser's session and every link not used yet (a lost laptop, a shared link).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import TYPE_CHECKING

from gateway.cli.onboard.shell_command import switchboard
from gateway.web.access.signin import LIFETIME_SECONDS, SignInUnavailable, read_key, sign_in_link

if TYPE_CHECKING:
    from gateway.config.settings import Settings

DESCRIPTION = (
    "Print a one-time link (valid 10 minutes) that signs a browser in to the running "
    "gateway's web chat and control center. Only the user who runs the gateway can make one."
)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    command = commands.add_parser(
        "web", parents=[common], help="sign a browser in to the web chat", description=DESCRIPTION
    )
    command.add_argument(
        "--json",
        action="store_true",
        help="print {url, link, expires_in} (with --sign-out-all: {signed_out})",
    )
    command.add_argument(
        "--sign-out-all",
        action="store_true",
        help="sign every browser out and void the links not used yet",
    )
    command.set_defaults(handler=web_command, needs_settings="running", reads_home=True)


def web_command(args: argparse.Namespace, settings: Settings) -> int:
    from gateway.cli.gateway_api import cluster_nodes, find_running  # noqa: PLC0415

    if args.sign_out_all:
        return sign_out_all(settings, as_json=args.json)
    # data/web.json names the web server of the process that holds the home's lock: one a
    # crash, a kill or a power loss left behind names a server that is gone
    running = find_running(settings)
    endpoint = None if running is None else running.endpoint
    if endpoint is None:
        nodes = [] if running is not None else asyncio.run(cluster_nodes(settings))
        if nodes:
            where = (
                f"no node serves its web chat from this home; the cluster runs on "
                f"{', '.join(n.name for n in nodes)}: run this in the home of the node that leads"
            )
        elif running is not None:
            where = (
                "the running gateway serves no web chat (web.enabled = false)"
                if not settings.web.enabled
                else "the gateway running here is a `switchboard chat` window's, which serves "
                f"no web chat: `{switchboard('run')}` does"
            )
        else:
            where = f"the gateway is not running here (start it with `{switchboard('run')}`)"
        print(f"switchboard: {where}", file=sys.stderr)
        return 1
    try:
        link = sign_in_link(read_key(settings.data_dir), endpoint.url)
    except SignInUnavailable as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"url": endpoint.url, "link": link, "expires_in": LIFETIME_SECONDS}))
    else:
        print(f"Open this link in your browser (it works once, for 10 minutes):\n{link}")
    return 0


def sign_out_all(settings: Settings, *, as_json: bool = False) -> int:
    """Through the running gateway (it holds the sessions), over its local socket; with none
    running here, in the store, where every running web server of it (a cluster's leader,
    maybe on another machine) reads it within seconds."""
    from gateway.cli.gateway_api import GatewayUnreachable, call, find_running  # noqa: PLC0415

    if find_running(settings) is None:
        ended = asyncio.run(sign_out_in_store(settings))
    else:
        try:
            answer = asyncio.run(call(settings, "POST", "api/sessions/sign-out-all"))
        except GatewayUnreachable as exc:
            print(f"switchboard: {exc}", file=sys.stderr)
            return 1
        ended = int(answer.get("signed_out", 0))
    if as_json:
        print(json.dumps({"signed_out": ended}))
        return 0
    print(
        f"Signed out {ended} browser session{'s' if ended != 1 else ''}; sign-in links made "
        "before now no longer work (a gateway running elsewhere on this store follows "
        "within seconds). `switchboard web` makes a new one."
    )
    return 0


async def sign_out_in_store(settings: Settings) -> int:
    from gateway.runtime.storage import store_for  # noqa: PLC0415
    from gateway.web.access.sessions import sign_out_stored  # noqa: PLC0415

    async with store_for(settings, migrates=False) as store:
        return await sign_out_stored(store.kv, time.time())
