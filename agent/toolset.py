"""The built-in tools, configured from settings."""

from __future__ import annotations

from agent.tools.base import Tool
from agent.tools.files import EditFile, ListDir, ReadFile, WriteFile
from agent.tools.message import Message
from agent.tools.shell import Exec
from gateway.settings import Settings


def default_tools(settings: Settings) -> list[Tool]:
    exec_settings = settings.tools.exec
    return [
        ReadFile(),
        WriteFile(),
        EditFile(),
        ListDir(),
        Exec(
            timeout=exec_settings.timeout_seconds,
            max_output_chars=exec_settings.max_output_chars,
            extra_deny_patterns=exec_settings.extra_deny_patterns,
        ),
        Message(),
    ]
