"""The review stage of a turn: may this answer end it, and if not, what happens instead.

The rules (:func:`agent.guards.review.review`) look first; then the answer's claims of having
done something are checked against the turn's tool ledger (:mod:`agent.guards.claims`; the
model is asked to find them only in a language the rules cannot read, and only while the
turn's budget allows); the optional LLM reviewer last. A substantive answer is never
replaced by a failure notice: one that only leaves a failed tool unmentioned is delivered
with the gateway's note of what failed, without asking the model again; one that claims what
no call did goes back to the model once with the ledger, and if it still claims it, it is
delivered with a note of what the ledger shows; when re-prompts run out, the first
substantive answer is delivered.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from agent.guards import claims as rules
from agent.guards.claims import FIND_PROMPT, Act, Claim
from agent.guards.review import (
    FAILURE_NOTICES,
    REVIEWER_PROMPT,
    Code,
    Finding,
    ToolStep,
    failure_note,
    is_review,
    review,
    substantive,
    unresolved_errors,
)
from agent.guards.trace import TurnTrace
from agent.llm.metered import Charge, MeteredModel, OverAllowance
from agent.llm.types import ChatMessage, LLMRequest, SystemPrompt
from agent.tokens import estimate
from agent.tools.base import Effect, TurnState
from agent.turn.inputs import TurnLimits
from gateway.core.usage import Purpose
from gateway.store import LedgerEntry

Ledger = Callable[[], Awaitable[list[LedgerEntry]]]  # the turn's side effects, as recorded
EffectOf = Callable[[str], Effect | None]  # a tool's effect by name (None: not known)
FIND_MAX_TOKENS = 200  # the model's list of claims is short
FIND_REPLY_CHARS = 4_000  # of the answer shown to it


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
        check_in: bool = False,
        explain_failures: bool = True,
        charge: Charge,
        ledger: Ledger,
        effect_of: EffectOf,
    ) -> None:
        self._model = model
        self._limits = limits
        self._state = state
        self._trace = trace
        self._unattended = unattended
        self._check_in = check_in  # a heartbeat's: a question for the owner may end it
        self._explain_failures = explain_failures  # failure_note's reasons
        self._charge = charge
        self._ledger = ledger
        self._effect_of = effect_of
        self.steps: list[Step] = []
        self.answers: list[str] = []  # answers the review sent back, in order
        self._claims_sent_back = 0  # answers returned to the model for an unbacked claim
        self._questions_sent_back = 0  # unattended answers returned for ending on a question
        self._unbacked: dict[str, list[Claim]] = {}  # by answer: its claims no call backs
        self._acts: list[Act] = []  # the ledger, as last read

    async def check(self, text: str, conversation: Sequence[ChatMessage]) -> Finding | None:
        """The problem with ending the turn on ``text``, or ``None``."""
        finding = review(
            final_text=text,
            sent_texts=self._state.sent_texts,
            steps=self.tool_steps(),
            unattended=self._unattended,
            check_in=self._check_in,
        )
        if finding is not None and finding.code is Code.ASKS_ABSENT:
            self._questions_sent_back += 1
        if finding is None or finding.code is Code.ERROR_UNRESOLVED:
            finding = await self._claims(text) or finding
        if finding is None and self._limits.llm_review and not self._unattended and text.strip():
            finding = await self._llm_review(text, conversation)
        if finding is not None:
            self.answers.append(text)
        return finding

    def deliver_anyway(self, finding: Finding, text: str) -> bool:
        """A substantive answer that only leaves a failed tool unmentioned, that still
        claims what no call did after it went back once, or an unattended one that still
        ends on a question after it was told why it should not: asking (again) rarely fixes
        it, so it is delivered (with the note of what the ledger shows)."""
        if finding.code is Code.UNVERIFIED_CLAIM:
            return self._claims_sent_back > 1
        if finding.code is Code.ASKS_ABSENT:  # told why once: asking again rarely helps
            return self._questions_sent_back > 1 and substantive(text)
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
        """``text`` with the gateway's notes: what failed, and what it claims that the
        ledger does not show."""
        steps = self.tool_steps()
        unbacked = self._unbacked.get(text)
        notes = [failure_note(steps, explain=self._explain_failures)]
        if unbacked:
            notes.append(rules.note(unbacked, self._acts))
            if set(unresolved_errors(steps)) <= {a.tool for a in self._acts}:
                notes = notes[1:]  # the ledger's line names those failures already
        notes = [n for n in notes if n]
        for note in notes:
            self._trace.decision("review", "NOTE", note)
        return "\n\n".join([text.strip(), *notes]) if notes else text

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

    async def _claims(self, text: str) -> Finding | None:
        """An answer claiming what no successful call of the turn did (the first time it
        goes back to the model with the ledger)."""
        mode = self._limits.verify_claims
        if mode == "off" or not text.strip():
            return None
        found = rules.claims(text)
        acts = None
        if not found and mode == "model" and not rules.readable(text):
            acts = await self.ledger()
            if any(a.succeeded and (a.effect or Effect.REMOTE) in rules.OPAQUE for a in acts):
                return None  # whatever it claims, a call it cannot see into may have done
            found = await self._find_claims(text)
        if not found:
            return None
        self._acts = await self.ledger() if acts is None else acts
        unbacked = rules.unbacked(found, self._acts)
        if not unbacked:
            return None
        self._unbacked[text] = unbacked
        self._claims_sent_back += 1
        reason = "; ".join(c.describe() for c in unbacked) + " without a call that did it"
        return Finding(Code.UNVERIFIED_CLAIM, reason, rules.fix_text(unbacked, self._acts))

    async def ledger(self) -> list[Act]:
        """The turn's side-effecting calls as its tool ledger recorded them (resumed and
        approved ones included)."""
        return [act(entry, self._effect_of(entry.tool)) for entry in await self._ledger()]

    async def _find_claims(self, text: str) -> list[Claim]:
        """The model's list of the claims in an answer the rules cannot read; none when the
        turn's token or money budget has no room for the call."""
        prompt = FIND_PROMPT.format(reply=text[:FIND_REPLY_CHARS])
        if self._state.meter.tokens + estimate(prompt) + FIND_MAX_TOKENS > (
            self._limits.max_turn_tokens
        ):
            return []
        request = LLMRequest(
            SystemPrompt("You read replies closely and list facts, nothing else."),
            (ChatMessage("user", prompt),),
            max_tokens=FIND_MAX_TOKENS,
        )
        try:
            response = await self._model.complete(
                request, purpose=Purpose.REVIEW, charge=self._charge
            )
        except OverAllowance:
            self._trace.decision("review", "CLAIMS_UNCHECKED", "no money left to ask the model")
            return []
        found = rules.listed(response.text)
        self._trace.add("claims", asked_model=True, found=len(found))
        return found

    async def _llm_review(self, text: str, conversation: Sequence[ChatMessage]) -> Finding | None:
        request = next(
            (m.content for m in reversed(conversation) if m.role == "user" and not is_review(m)),
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


def act(entry: LedgerEntry, effect: Effect | None) -> Act:
    """A ledger entry as the claims check reads it."""
    if entry.state != "done" or entry.result is None:
        return Act(
            entry.tool, effect, succeeded=False, detail="outcome unknown", target=entry.target
        )
    content, is_error, *_ = json.loads(entry.result)
    detail = str(content).splitlines()[0] if is_error and content else ""
    # at most 160 characters, cut between words: the note shows it to the person
    short = textwrap.shorten(detail, 160, placeholder=" …") if detail else ""
    return Act(entry.tool, effect, succeeded=not is_error, detail=short, target=entry.target)
