"""Which tools a turn may use, decided in code from settings and the principal.

The same rule filters the tools offered to the model and is checked again when a call
arrives, so a model that invents a call to a tool it was not offered is still refused.
"""

from __future__ import annotations

from agent.tools.base import Effect, Tool, ToolContext


class ToolPolicy:
    def __init__(self, *, safe_mode: bool = False, exec_enabled: bool = True) -> None:
        self.safe_mode = safe_mode
        self.exec_enabled = exec_enabled

    def refusal(self, tool: Tool, ctx: ToolContext) -> str | None:
        if tool.effect is Effect.EXEC and not self.exec_enabled:
            return "exec is disabled in this gateway's configuration"
        if self.safe_mode and tool.effect in (Effect.EXEC, Effect.WRITE):
            return f"{tool.name} is not available in safe mode (no commands, no file writes)"
        return None

    def offered(self, tool: Tool) -> bool:
        if tool.effect is Effect.EXEC and not self.exec_enabled:
            return False
        return not (self.safe_mode and tool.effect in (Effect.EXEC, Effect.WRITE))
