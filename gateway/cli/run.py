"""``switchboard run``: every configured channel, the web chat and the scheduler, until
SIGINT or SIGTERM.

A restart asked for while it runs (``POST /api/restart``, the settings page's *Restart
now*: settings that only a new process applies) stops the gateway as SIGTERM would, then
executes the same command line again in the same process (``os.execv``): the process id
stays, so it works alike in a terminal, under systemd (``Type=simple``: the unit's main
process goes on), launchd or a container's init, and no service manager has to be told to
start it again."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, NoReturn

from gateway import __version__

if TYPE_CHECKING:
    from gateway.config.settings import Settings
    from gateway.runtime.app import Gateway

RESTART = -1  # run_gateway's answer when a restart was asked for (never an exit status)

DESCRIPTION = (
    "Run every configured channel, the web chat and control center, and the scheduler, until "
    "Ctrl-C or SIGTERM (a second one stops at once). `switchboard chat` in another terminal "
    "attaches to it. Creates $SWITCHBOARD_HOME on first use."
)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    command = commands.add_parser(
        "run", parents=[common], help="run the gateway", description=DESCRIPTION
    )
    command.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    from gateway.core.system.connections import raise_open_files_limit  # noqa: PLC0415
    from gateway.runtime.home import onboard  # noqa: PLC0415 - keep start-up lean

    onboard(settings.home, settings.workspace_dir)  # first run: create what is missing
    # room for every connection the HTTP servers may hold besides the gateway's own files
    raise_open_files_limit()
    code = asyncio.run(run_gateway(settings))
    if code == RESTART:
        start_again()
    return code


def start_again() -> NoReturn:
    """This same command line, executed anew in this process (see the module docstring):
    it reads the configuration afresh. Descriptors Python opened are not inherited."""
    print("switchboard: restarting", flush=True)
    logging.shutdown()  # the log file's last lines written
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])  # noqa: S606 - ourselves


async def run_gateway(settings: Settings) -> int:
    from gateway.cli.stopping import Interrupts, stop_gateway  # noqa: PLC0415
    from gateway.core.addressing import INTERNAL_CHANNELS, LOCAL_CHANNELS  # noqa: PLC0415
    from gateway.runtime.app import Gateway  # noqa: PLC0415

    # every configured channel, the web chat, and the terminal that `switchboard chat`
    # windows attach to (gateway/cli/chat/command.py)
    gateway = Gateway(settings)
    gateway.restartable = True  # POST /api/restart: run_gateway returns RESTART
    with Interrupts() as interrupts:
        # a cluster's node runs turns at once but waits in start() until it leads (receives,
        # sends, schedules): a signal ends the wait
        starting = asyncio.create_task(gateway.start())
        signalled = asyncio.create_task(interrupts.next())
        standby = asyncio.create_task(gateway.guard.standby.wait())
        await asyncio.wait({starting, signalled, standby}, return_when=asyncio.FIRST_COMPLETED)
        if standby.done() and not starting.done():
            print(
                "switchboard: standby; another node leads the cluster (this node runs turns)",
                flush=True,
            )
            await asyncio.wait({starting, signalled}, return_when=asyncio.FIRST_COMPLETED)
        standby.cancel()
        if not starting.done():
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
            return 0
        signalled.cancel()
        await starting  # raises what start() raised
        if not set(gateway.channels) - LOCAL_CHANNELS - INTERNAL_CHANNELS:
            print(
                "switchboard: no channel is configured (set SWITCHBOARD_TELEGRAM__TOKEN, ...); "
                "use `switchboard chat` to talk in the terminal",
                file=sys.stderr,
            )
        if gateway.web is not None:
            print(f"web chat: {gateway.web.url}  status: {gateway.web.url}status", flush=True)
            if sys.stdout.isatty():  # never into a service's journal, which others may read
                print(f"sign in a browser (once, 10 minutes): {gateway.web.sign_in_link()}")
            else:
                print(
                    "switchboard: to sign in a browser, `switchboard web` prints a one-time link",
                    file=sys.stderr,
                )
        _freeze_start_up_objects()
        print(f"switchboard {__version__} ready", flush=True)
        signalled = asyncio.create_task(interrupts.next())
        fenced = asyncio.create_task(gateway.guard.fenced.wait())
        restart = asyncio.create_task(gateway.restart_requested.wait())
        with _reload_on_hangup(gateway):
            await asyncio.wait({signalled, fenced, restart}, return_when=asyncio.FIRST_COMPLETED)
        if restart.done() and not signalled.done():
            signalled.cancel()
            fenced.cancel()
            await gateway.stop()  # as on SIGTERM: running turns get their drain time
            return RESTART
        restart.cancel()
        if fenced.done():  # another node leads now, or a newer one migrated the database
            signalled.cancel()
            print(
                f"switchboard: {gateway.guard.why_fenced}; stopping (started again, it"
                " rejoins as a standby if its code knows the database's schema)",
                file=sys.stderr,
            )
            await gateway.stop(drain_timeout=0)
            return 4
        fenced.cancel()
        await stop_gateway(gateway, interrupts)
    return 0


def _freeze_start_up_objects() -> None:
    """Hide what start-up made from the cyclic garbage collector (``gc.freeze``).

    Modules, settings, clients, tokenizers and schemas live as long as the process (about
    150,000 objects). Left in view, each full collection scans them all again: about every
    hundred turns, 50-90 ms during which no chat moves (a tenth of a turn's CPU, and a
    visible stall in a burst). Frozen, a full collection walks only what came since.
    Garbage of start-up is collected first; objects freed by reference counting are freed
    as ever, frozen or not. Only here, in the process that runs the gateway: a test or a
    benchmark running many gateways in one process would keep each one's cycles."""
    gc.collect()
    gc.freeze()


@contextlib.contextmanager
def _reload_on_hangup(gateway: Gateway) -> Iterator[None]:
    """SIGHUP reloads the configuration (``kill -HUP``, ``systemctl reload``)."""
    loop = asyncio.get_running_loop()
    reloads: set[asyncio.Task[object]] = set()

    def reload() -> None:
        task = asyncio.create_task(gateway.config_reload.reload("SIGHUP"))
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    loop.add_signal_handler(signal.SIGHUP, reload)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGHUP)
