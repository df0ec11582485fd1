"""``switchboard web``: a one-time link that signs a browser in to the local web chat.

The web chat without ``web.token`` belongs to the user who runs the gateway. Their own
programs are recognised by the connection (docs/security.md); a browser that is not (it
runs as another user, or the kernel lacks Landlock) opens this link once, within ten
minutes, and keeps a session cookie. Only that user can make a link: it is signed with a
key the gateway keeps owner-only in ``data/web-signin.key`` (:mod:`gateway.web.signin`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from gateway.web.endpoint import read_endpoint
from gateway.web.signin import LIFETIME_SECONDS, SignInUnavailable, read_key, sign_in_link

if TYPE_CHECKING:
    from gateway.config.settings import Settings

DESCRIPTION = (
    "Print a one-time link (valid 10 minutes) that signs a browser in to the running "
    "gateway's web chat and status page. Only the user who runs the gateway can make one."
)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    command = commands.add_parser(
        "web", parents=[common], help="sign a browser in to the web chat", description=DESCRIPTION
    )
    command.add_argument("--json", action="store_true", help="print {url, link, expires_in}")
    command.set_defaults(handler=web_command)


def web_command(args: argparse.Namespace, settings: Settings) -> int:
    endpoint = read_endpoint(settings.data_dir)
    if endpoint is None:
        print(
            "switchboard: the gateway is not running here (start it with `switchboard run`)",
            file=sys.stderr,
        )
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
