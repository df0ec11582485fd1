"""``switchboard mcp list`` and ``switchboard mcp test NAME``: are the MCP servers working,
and which tools does the model get from them?

Both connect to the servers themselves (a stdio server is started for the check and stopped
again), so they work whether or not the gateway runs. ``doctor`` uses the same probe.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.mcp.manager import Probe
    from gateway.config.settings import Settings


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser | None = None,
) -> None:
    """``mcp list|test``; ``common`` carries the global options (``--home``, ``-v``)."""
    parents = [] if common is None else [common]
    mcp = commands.add_parser(
        "mcp",
        parents=parents,
        help="check the MCP servers and the tools they offer",
        description="Check the MCP servers (connect to each) and list the tools they offer.",
    )
    actions = mcp.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser(
        "list",
        parents=parents,
        help="every server: state and tools",
        description="Connect to every enabled MCP server; show its state and tools.",
    )
    actions.add_parser(
        "test",
        parents=parents,
        help="connect to one server and list its tools",
        description="Connect to one MCP server and list its tools and instructions.",
    ).add_argument("name", help="the server's name, as in [mcp.servers.<name>]")


async def run(settings: Settings, args: argparse.Namespace) -> int:
    servers = settings.mcp.servers
    if args.action == "test":
        if args.name not in servers:
            known = ", ".join(servers) or "none configured"
            print(
                f"switchboard: no MCP server {args.name!r} (configured: {known})", file=sys.stderr
            )
            return 1
        [result] = await probe_servers(settings, [args.name])
        for line in describe(result, verbose=True):
            print(line)
        return 0 if result.ok else 1
    if not servers:
        print("No MCP servers configured (add [mcp.servers.<name>] to config.toml).")
        return 0
    enabled = [name for name, server in servers.items() if server.enabled]
    results = {p.spec.name: p for p in await probe_servers(settings, enabled)}
    for name in servers:
        if name not in results:
            print(f"{name}  disabled")
            continue
        for line in describe(results[name]):
            print(line)
    print(budget_note(settings, results.values()))
    return 0 if all(p.ok for p in results.values()) else 1


async def probe_servers(settings: Settings, names: Sequence[str]) -> list[Probe]:
    """Connect to each server at once; a failure is reported, never raised."""
    from agent.mcp.manager import probe  # noqa: PLC0415 - the MCP SDK only when asked
    from gateway.runtime.agents.mcp import limits, server_spec, transports  # noqa: PLC0415

    transport = transports(settings)  # ConfigError: [mcp] sandbox = "bwrap" cannot work here
    bounds = limits(settings)
    servers = settings.mcp.servers
    specs = [server_spec(settings, name, servers[name]) for name in names]
    return list(await asyncio.gather(*(probe(spec, transport, bounds) for spec in specs)))


def describe(result: Probe, *, verbose: bool = False) -> list[str]:
    from agent.mcp.spec import StdioTarget  # noqa: PLC0415

    spec = result.spec
    roles = ", ".join(sorted(spec.roles))
    target = spec.target
    where = target.command if isinstance(target, StdioTarget) else target.url
    head = f"{spec.name}  {spec.transport}  {where}  (roles: {roles})"
    if not result.ok:
        return [head, f"  FAILED: {result.error}"]
    lines = [f"{head}  ready, {len(result.tools)} tool(s), ~{result.tokens} tokens of schemas"]
    if verbose and result.instructions:
        lines.append(f"  instructions: {result.instructions[:300]}")
    for name in result.tools:
        kind = "read-only" if name in result.read_only else "side effect"
        lines.append(f"  {name}  ({kind})")
    lines += [f"  left out: {s.tool} ({s.reason})" for s in result.skipped]
    return lines


def budget_note(settings: Settings, results: Iterable[Probe]) -> str:
    mcp = settings.mcp
    count = sum(len(p.tools) for p in results)
    tokens = sum(p.tokens for p in results)
    if count <= mcp.max_offered_tools and tokens <= mcp.max_offered_tokens:
        return f"{count} MCP tool(s), ~{tokens} tokens: all sent with every request."
    return (
        f"{count} MCP tool(s), ~{tokens} tokens: more than the prompt budget "
        f"({mcp.max_offered_tools} tools, {mcp.max_offered_tokens} tokens); servers past it "
        "are searched with find_tools instead of sent with every request."
    )
