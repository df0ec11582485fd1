"""Loop detection: the same tool over and over, A↔B ping-pong, repeating sequences.

The first detection returns a recovery hint for the model; a second detection in the same
turn is a hard stop, and the user sees why the turn ended.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field


class LoopAction(enum.Enum):
    NONE = "none"
    HINT = "hint"
    STOP = "stop"


@dataclass(frozen=True, slots=True)
class LoopVerdict:
    action: LoopAction
    pattern: str = ""
    hint: str = ""


@dataclass(frozen=True, slots=True)
class _Step:
    tool: str
    call: str  # tool + normalised arguments
    result: str  # digest of the result


@dataclass(slots=True)
class LoopDetector:
    same_tool_limit: int = 3
    hints_before_stop: int = 1
    _steps: list[_Step] = field(default_factory=list)
    _hints: int = 0

    def observe(self, tool: str, call_key: str, result: str) -> LoopVerdict:
        digest = hashlib.blake2b(result.encode(), digest_size=8).hexdigest()
        self._steps.append(_Step(tool, call_key, digest))
        pattern = self._pattern()
        if pattern is None:
            return LoopVerdict(LoopAction.NONE)
        if self._hints >= self.hints_before_stop:
            return LoopVerdict(LoopAction.STOP, pattern)
        self._hints += 1
        self._steps.clear()  # give the model a fresh window after the hint
        return LoopVerdict(LoopAction.HINT, pattern, _HINTS[pattern])

    def _pattern(self) -> str | None:
        steps = self._steps
        n = self.same_tool_limit
        if len(steps) >= n:
            tail = steps[-n:]
            same_tool = len({s.tool for s in tail}) == 1
            no_progress = len({s.result for s in tail}) == 1 or len({s.call for s in tail}) == 1
            if same_tool and no_progress:
                return "same_tool"
        if len(steps) >= 4:
            a, b, c, d = steps[-4:]
            if a.call == c.call and b.call == d.call and a.call != b.call:
                return "ping_pong"
        for size in (3, 4):
            if len(steps) >= 2 * size:
                recent = [s.call for s in steps[-size:]]
                before = [s.call for s in steps[-2 * size : -size]]
                if recent == before:
                    return "cycle"
        return None


_HINTS = {
    "same_tool": (
        "Loop detected: you called the same tool several times in a row without new results. "
        "Stop repeating it. Use what you already have, try a different approach, or explain to "
        "the user what is blocking you."
    ),
    "ping_pong": (
        "Loop detected: you are alternating between the same two calls. Step back, decide what "
        "information is actually missing, and either get it differently or answer now."
    ),
    "cycle": (
        "Loop detected: the same sequence of calls is repeating. Do not run it again; answer "
        "with what you have or explain what is missing."
    ),
}

STOP_NOTICE = (
    "I stopped because I was going in circles ({pattern}) and could not make progress. "
    "Could you rephrase the request or tell me what to try differently?"
)
