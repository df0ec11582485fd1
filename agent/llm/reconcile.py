"""Our count of a call's tokens beside the provider's: the difference logged, the ratio learned.

Peers' users found their bills several times what their gateway had logged. The tokens a
provider reports are what it bills, and they are what the usage table stores; ours are
what the gateway believed before the call: the prompt estimate every call is fitted to the
context window with (:func:`agent.llm.metered.prompt_tokens`), and the same estimate of the
answer it got (text and tool calls; a reasoning model's hidden tokens are billed as output
too, and show here). Each call the provider reported is compared: a prompt or answer whose
two counts differ by more than :data:`TOLERANCE` is logged (the first per model at once,
then at most one line per model every :data:`LOG_EVERY` seconds, saying how many calls
differed meanwhile, so a steady difference is not a line per call). The provider's prompt
count per token we estimated is learned per model, and the money check before a call
(:class:`agent.llm.metered.MeteredModel`) scales its prompt estimate by it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from agent.llm.types import Usage

log = logging.getLogger(__name__)

TOLERANCE = 0.05  # a difference above this share of the provider's count is logged
MIN_TOKENS = 16  # and above this many tokens (a three-word answer may be 3 or 4 tokens)
LOG_EVERY = 600.0  # seconds between two lines about one model
WEIGHT = 0.2  # of the newest call in the learned ratio
RATIO_RANGE = (0.5, 4.0)  # what a learned ratio may become (one odd call moves it little)


@dataclass(slots=True)
class _Model:
    ratio: float = 1.0  # the provider's prompt tokens per token of our estimate
    calls: int = 0  # calls compared
    differed: int = 0  # of them, by more than the tolerance, since the last line
    logged_at: float | None = None


def differs(ours: int, theirs: int) -> bool:
    """Whether two counts of the same text differ by more than the tolerance."""
    gap = abs(theirs - ours)
    return gap > MIN_TOKENS and gap > TOLERANCE * max(theirs, 1)


class Reconciler:
    """Compares each call's counts, per model; one per gateway process is enough."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._models: dict[str, _Model] = {}

    def ratio(self, model: str) -> float:
        """The provider's prompt tokens per token we estimate, as learned (1.0 at first)."""
        found = self._models.get(model)
        return 1.0 if found is None else found.ratio

    def observe(self, model: str, prompt: int, answer: int, usage: Usage) -> None:
        """One call's estimate (``prompt``, ``answer``) beside what the provider reported;
        calls it reported nothing for (counted by us instead) are not compared."""
        if usage.estimated_tokens or not usage.input_tokens or prompt <= 0:
            return
        state = self._models.setdefault(model, _Model())
        state.calls += 1
        seen = usage.input_tokens / prompt
        low, high = RATIO_RANGE
        state.ratio = min(high, max(low, (1 - WEIGHT) * state.ratio + WEIGHT * seen))
        if not (differs(prompt, usage.input_tokens) or differs(answer, usage.output_tokens)):
            return
        state.differed += 1
        now = self._clock()
        if state.logged_at is not None and now - state.logged_at < LOG_EVERY:
            return
        since = (
            f"; {state.differed} of the calls since the last such line differed"
            if state.logged_at is not None
            else ""
        )
        log.info(
            "token counts of %s differ from the provider's: prompt %d estimated, %d reported "
            "(%+.0f %%); answer %d estimated, %d reported (%+.0f %%)%s. The provider's "
            "counts are the ones recorded and charged",
            model,
            prompt,
            usage.input_tokens,
            _percent(prompt, usage.input_tokens),
            answer,
            usage.output_tokens,
            _percent(answer, usage.output_tokens),
            since,
        )
        state.logged_at = now
        state.differed = 0


def _percent(ours: int, theirs: int) -> float:
    return 100.0 * (theirs - ours) / max(ours, 1)
