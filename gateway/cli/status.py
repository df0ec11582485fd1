"""``switchboard status``: is the gateway running, what is it doing, what is waiting.

It asks the running gateway through its web API on the local socket (channels connected, turns running,
queue depth, the latest error) and reads the rest from the store, which works whether or
not the gateway runs. ``--json`` prints the fields documented in README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.config.settings import Settings

DESCRIPTION = (
    "Show whether the gateway runs and what it is doing: channels connected, models (which "
    "answered last, which cool down), turns running, messages queued, waiting and unsent, "
    "failed deliveries, background tasks, webhooks and the API, the latest error."
)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    command = commands.add_parser(
        "status", parents=[common], help="what the gateway is doing", description=DESCRIPTION
    )
    command.add_argument("--json", action="store_true", help="print the status as JSON")
    command.set_defaults(handler=status_command, needs_settings="running", reads_home=True)


def status_command(args: argparse.Namespace, settings: Settings) -> int:
    report = asyncio.run(gather(settings))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("\n".join(render(report)))
    return 0


async def gather(settings: Settings) -> dict[str, Any]:
    """Everything ``status`` shows, as plain data (the ``--json`` output)."""
    from gateway.cli.gateway_api import GatewayUnreachable, find_running, get_json  # noqa: PLC0415

    running = find_running(settings)
    report: dict[str, Any] = {
        "running": running is not None,
        "pid": running.pid if running is not None and running.pid > 0 else None,
        "url": None,
        "ready": None,
        "channels": [],
        "models": [],
        "turns_running": None,
        "queue_depth": None,
        "last_error": None,
        "live": False,
        "live_error": None,
    }
    if running is not None and running.endpoint is None:
        report["live_error"] = (
            "the gateway serves no web API (web.enabled = false)"
            if not settings.web.enabled
            else "it is the gateway a `switchboard chat` window runs, which serves no web "
            "API: `switchboard run` does"
        )
    elif running is not None and running.endpoint is not None:
        report["url"] = running.endpoint.url
        try:
            live = await get_json(settings, "api/status")
            ready = await get_json(settings, "readyz")
        except GatewayUnreachable as exc:
            report["live_error"] = str(exc)
        else:
            report.update(
                live=True,
                ready=bool(ready.get("ready")),
                channels=live.get("channels", []),
                models=live.get("models", []),
                turns_running=live.get("work", {}).get("running"),
                queue_depth=live.get("work", {}).get("queued"),
                last_error=live.get("last_error"),
            )
    report.update(await stored_report(settings))
    report.update(programs(settings, report["url"]))
    return report


def programs(settings: Settings, url: str | None) -> dict[str, Any]:
    """Webhooks and the API as configured (docs/connect.md), with their addresses."""
    base = url or f"http://{settings.web.host}:{settings.web.port}/"
    return {
        "hooks": [
            {
                "name": name,
                "url": f"{base}hooks/{name}",
                "role": hook.role,
                "agent": hook.agent,
                "deliver_to": hook.deliver_to,
            }
            for name, hook in settings.hooks.items()
        ],
        "api": {
            "enabled": settings.api.enabled,
            "url": f"{base}v1" if settings.api.enabled else None,
            "tokens": [{"name": t.name, "role": t.role} for t in settings.api.tokens],
        },
    }


async def stored_report(settings: Settings) -> dict[str, Any]:
    from gateway.runtime.schedule.heartbeat import OwnersChat, Refused  # noqa: PLC0415
    from gateway.runtime.storage import store_for  # noqa: PLC0415

    path = settings.data_dir / "switchboard.db"
    empty = {"store": "empty", "waiting": 0, "in_turn": 0, "unsent": 0, "failed": 0, "tasks": {}}
    if settings.storage.url is None and not path.exists():
        return {**empty, "heartbeat_target": None, "heartbeat_refused": None, "nodes": []}
    async with store_for(settings, migrates=False) as store:
        counts = await store.journal.counts()
        found = await OwnersChat.stored(settings, store).find()
        target = None if found is None or isinstance(found, Refused) else found.label
        return {
            "store": "ok",
            "waiting": counts.get("pending", 0),
            "in_turn": counts.get("processing", 0),
            "unsent": await store.outbox.pending_count(),
            "failed": await store.outbox.failed_count(),
            # background tasks not finished, by state (queued, running, awaiting_approval)
            "tasks": await store.tasks.counts(),
            "heartbeat_target": target,
            "heartbeat_refused": found.reason if isinstance(found, Refused) else None,
            # the nodes of a cluster on PostgreSQL (none with the SQLite file)
            "nodes": [node.to_dict(time.time()) for node in await store.nodes.listing()],
        }


def render(report: dict[str, Any]) -> list[str]:
    alive = [n for n in report.get("nodes", []) if n.get("alive")]
    lines = _gateway(report, alive)
    lines.extend(f"  channel {c['name']}: {_channel_state(c)}" for c in report["channels"])
    lines.extend(f"  model {m['name']}: {_model_state(m)}" for m in report["models"])
    if report["live"]:
        lines.append(
            f"turns running: {report['turns_running']}, "
            f"messages queued behind them: {report['queue_depth']}"
        )
    if report["store"] == "empty":
        lines.append("store: empty (no messages yet)")
    else:
        lines.append(
            f"messages waiting: {report['waiting']}, in a turn: {report['in_turn']}, "
            f"replies unsent: {report['unsent']}, failed deliveries: {report['failed']}"
        )
        if not (report["running"] or alive) and (report["in_turn"] or report["waiting"]):
            lines.append(  # a stop or a crash left them: nothing is lost
                "  (left by the last run: the next start resumes the turns and answers the "
                "messages)"
            )
    tasks = report.get("tasks") or {}
    if tasks:
        lines.append(
            "background tasks: "
            + ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in sorted(tasks.items()))
        )
    for hook in report.get("hooks", []):
        target = hook["deliver_to"] or "the owner's home chat"
        lines.append(
            f"webhook {hook['name']}: POST {hook['url']} (as {hook['role']}, answers in {target})"
        )
    api = report.get("api") or {}
    if api.get("enabled"):
        tokens = ", ".join(f"{t['name']} ({t['role']})" for t in api["tokens"])
        lines.append(f"API: {api['url']} (tokens: {tokens})")
    if report["last_error"]:
        problem = report["last_error"]
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(problem["at"]))
        lines.append(f"latest {problem['level']}: {at} {problem['message']}")
    lines.extend(
        f"node {n['name']}: {n['role'] if n.get('alive') else 'gone'} (pid {n['pid']} on"
        f" {n['host']}, heartbeat {n['heartbeat_age']:.0f}s ago; "
        f"{n.get('sessions_in_flight', 0)} session(s) in flight, {n.get('turns', 0)} turn(s) run)"
        for n in report.get("nodes", [])
    )
    if report.get("heartbeat_target"):
        lines.append(f"heartbeat goes to: {report['heartbeat_target']}")
    if report.get("heartbeat_refused"):
        lines.append(f"heartbeat goes nowhere: {report['heartbeat_refused']}")
    return lines


def _gateway(report: dict[str, Any], alive: list[dict[str, Any]]) -> list[str]:
    """Whether the gateway runs: from this home, or as a cluster's nodes elsewhere."""
    lines = []
    if not report["running"] and alive:  # a cluster's nodes run elsewhere (or not from here)
        leader = next((n["name"] for n in alive if n["role"] == "leader"), "none yet")
        lines.append(
            f"gateway: not running from this home; its cluster runs on {len(alive)} "
            f"node(s), leader {leader}"
        )
    elif not report["running"]:
        from gateway.cli.onboard.shell_command import switchboard  # noqa: PLC0415

        lines.append(f"gateway: not running (start it with `{switchboard('run')}`)")
    else:
        pid = f"pid {report['pid']}" if report["pid"] else "pid unknown"
        ready = {True: ", ready", False: ", NOT ready (no channel connected)"}.get(
            report["ready"], ""
        )
        url = f", {report['url']}" if report["url"] else ""
        lines.append(f"gateway: running ({pid}){ready}{url}")
        if report["live_error"]:
            lines.append(f"  live status unavailable: {report['live_error']}")
    return lines


def _model_state(model: dict[str, Any]) -> str:
    where = ", ".join(model.get("settings") or ())
    if model.get("cooling_until"):
        until = time.strftime("%H:%M:%S", time.localtime(model["cooling_until"]))
        state = f"cooling down until {until}"
        if model.get("last_error"):
            state += f" ({model['last_error']})"
    elif model.get("answered_last"):
        state = "answered last"
    else:
        state = "ready"
    return f"{state} [{where}]" if where else state


def _channel_state(channel: dict[str, Any]) -> str:
    connected = channel.get("connected")
    state = {True: "connected", False: "NOT connected", None: "running"}[connected]
    if channel.get("detail"):
        state += f" ({channel['detail']})"
    if channel.get("last_error"):
        state += f"; last error: {channel['last_error']}"
    return state
