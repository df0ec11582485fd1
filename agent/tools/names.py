"""The names a tool can have: every built-in tool's, whether or not this setup offers it
(email, the calendar, images, the browser and the web tools only where configured), and an
MCP server's tools, ``<server>__<tool>`` (known only once the server runs).

A skill declares the tools it needs by these names (:mod:`agent.skills.permissions`); one
that no tool has (a typo, another assistant's name for it) leaves a turn that loads the
skill unable to use it, so the skill's review and ``switchboard doctor`` name it with the
known names nearest to it (:func:`unknown_tool`). tests/test_tools.py keeps
:data:`BUILT_IN_TOOLS` equal to the tools a gateway with everything configured registers.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection

SEPARATOR = "__"  # between an MCP server's name and its tool's: notes__read_file

BUILT_IN_TOOLS = frozenset(
    {
        "browser",
        "calendar",
        "chats",
        "cron",
        "edit_file",
        "exec",
        "find_tools",
        "generate_image",
        "get_skill",
        "goals",
        "list_dir",
        "memory_append",
        "memory_patch",
        "memory_read",
        "memory_search",
        "memory_write",
        "message",
        "notes",
        "notify",
        "read_file",
        "run_skill_script",
        "send_email",
        "send_to_agent",
        "skill_propose",
        "spawn",
        "timezone",
        "web_fetch",
        "web_search",
        "write_file",
    }
)


def unknown_tool(name: str, mcp_servers: Collection[str]) -> str | None:
    """Why no tool here is called ``name``, naming the nearest known names (``declares the
    tool 'web_fetc', which is no tool here (nearest: web_fetch)``); None when one is. An MCP
    server's tool counts as known when that server is configured."""
    server, separator, tool = name.partition(SEPARATOR)
    if name in BUILT_IN_TOOLS or (separator and server in mcp_servers):
        return None
    if separator and server and tool:
        close = [f"{s}{SEPARATOR}{tool}" for s in _nearest(server, mcp_servers)]
        why, known = f"of the MCP server {server!r}, which is not configured", "see mcp.servers"
    else:
        close = _nearest(name, BUILT_IN_TOOLS)
        why, known = "which is no tool here", "all tools: docs/tools.md"
    nearest = f"nearest: {', '.join(close)}; " if close else ""
    return (
        f"declares the tool {name!r}, {why} ({nearest}{known}): a turn that loads it cannot use it"
    )


def _nearest(name: str, names: Collection[str]) -> list[str]:
    by_lower = {known.lower(): known for known in names}
    close = difflib.get_close_matches(name.lower(), sorted(by_lower), n=3, cutoff=0.6)
    return [by_lower[match] for match in close]
