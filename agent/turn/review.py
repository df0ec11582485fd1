"""The review stage of a turn: may this answer end it, and if not, what happens instead.

The rules (:func:`agent.guards.review.review`) look first; the optional LLM reviewer after
them. A substantive answer is never replaced by a failure notice: one that only leaves a
failed tool unmentioned is delivered with the gateway's note of what failed, without asking
the model again; when re-prompts run out, the first substantive answer is delivered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent.guards.review import (
    FAILURE_NOTICES,
    REVIEWER_PROMPT,
    Code,
    Finding,
    ToolStep,
    failure_note,
    review,
    substantive,
)
from agent.guards.trace import TurnTrace
from agent.llm.metered import Charge, MeteredModel
from agent.llm.types import ChatMessage, SystemPrompt
from agent.tools.base import TurnState
from agent.turn.inputs import TurnLimits
from gateway.core.usage import Purpose


@dataclass(slots=True)
class Step:
    """One tool call that ran, as the review sees it."""

    tool: str
    is_error: bool
    sends_before: int  # messages the `message` tool had sent before it
    acted: bool  # a side effect the user asked for (write, send, schedule, exec) succeeded
    error: str = ""  # the first line of the error result


class TurnReview:
    def __init__(
        self,
        model: MeteredModel,
        limits: TurnLimits,
        *,
        state: TurnState,
        trace: TurnTrace,
        unattended: bool,
        charge: Charge,
    ) -> None:
        self._model = model
        self._limits = limits
        self._state = state
        self._trace = trace
        self._unattended = unattended
        self._charge = charge
        self.steps: list[Step] = []
        self.answers: list[str] = []  # answers the review sent back, in order

    async def check(self, text: str, conversation: Sequence[ChatMessage]) -> Finding | None:
        """The problem with ending the turn on ``text``, or ``None``."""
        finding = review(
            final_text=text,
            sent_texts=self._state.sent_texts,
            steps=self.tool_steps(),
            unattended=self._unattended,
        )
        if finding is None and self._limits.llm_review and not self._unattended and text.strip():
            finding = await self._llm_review(text, conversation)
        if finding is not None:
            self.answers.append(text)
        return finding

    @staticmethod
    def deliver_anyway(finding: Finding, text: str) -> bool:
        """A substantive answer that only leaves a failed tool unmentioned: asking again
        rarely fixes what a tool refused, so it is delivered with the note of what failed."""
        return finding.code is Code.ERROR_UNRESOLVED and substantive(text)

    def kept_answer(self) -> str | None:
        """When re-prompts are used up: the first substantive answer (with its note), or
        ``None`` (then the failure notice goes out)."""
        best = next((a for a in self.answers if substantive(a)), None)
        if best is None:
            return None
        self._trace.decision("review", "KEPT", "the first substantive answer is delivered")
        return self.with_note(best)

    @staticmethod
    def failure_notice(finding: Finding) -> str:
        return FAILURE_NOTICES[finding.code]

    def with_note(self, text: str) -> str:
        note = failure_note(self.tool_steps())
        if note:
            self._trace.decision("review", "NOTE", note)
        return f"{text.strip()}\n\n{note}" if note else text

    def tool_steps(self) -> list[ToolStep]:
        sends = len(self._state.sent_texts)
        return [
            ToolStep(
                s.tool,
                s.is_error,
                s.sends_before == sends and s.tool != "message",
                s.acted,
                s.error,
            )
            for s in self.steps
        ]

    async def _llm_review(self, text: str, conversation: Sequence[ChatMessage]) -> Finding | None:
        request = next(
            (
                m.content
                for m in reversed(conversation)
                if m.role == "user" and not m.content.startswith("[review ")
            ),
            "",
        )
        prompt = REVIEWER_PROMPT.format(request=request[:2000], reply=text[:4000])
        response = await self._model.ask(
            SystemPrompt("You are a strict reviewer."),
            [ChatMessage("user", prompt)],
            (),
            purpose=Purpose.REVIEW,
            charge=self._charge,
        )
        verdict = response.text.strip()
        if verdict.upper().startswith("FAIL"):
            return Finding(
                Code.GENERIC, verdict.partition(":")[2].strip() or "reviewer rejected the reply"
            )
        return None
