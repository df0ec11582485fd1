"""The ``/status`` answer: the gateway, this conversation, the models, and (for the owner and
admins) everyone's spend today and, in a direct chat, the background work.

Read from the store, the model pool and the node's load, so it needs nothing that runs the
turns: it can be answered in the middle of one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from gateway import __version__
from gateway.config.settings import Settings
from gateway.core.clock import Clock
from gateway.core.load import NodeLoad
from gateway.core.messages import InboundMessage
from gateway.core.principal import Principal
from gateway.core.schedule_spec import zone
from gateway.core.turns import TurnControl
from gateway.runtime.models import ModelPool, model_lines
from gateway.store import Store
from gateway.store.usage import UsageTotals


class StatusText:
    def __init__(
        self,
        settings: Settings,
        *,
        store: Store,
        models: ModelPool,
        load: NodeLoad,
        channels: Sequence[str],
        clock: Clock,
    ) -> None:
        self._settings = settings
        self._store = store
        self._models = models
        self._load = load
        self._channels = tuple(channels)
        self._clock = clock

    async def render(
        self,
        msg: InboundMessage,
        principal: Principal,
        session: str,
        running: TurnControl | None = None,
    ) -> str:
        """``running``: this conversation's turn, when one runs (``/status`` is answered
        beside it)."""
        counts = await self._store.journal.counts()
        history = await self._store.history.message_count(session)
        unsent = await self._store.outbox.pending_count()
        llm = self._settings.llm
        others = self._load.running - (1 if running is not None else 0)
        lines = [
            f"Switchboard {__version__} · model {running.model if running and running.model else llm.model} ({llm.provider})",
            f"Channels: {', '.join(self._channels) or 'none'}",
            *([_now_line(running)] if running is not None else []),
            f"Other turns running: {max(0, others)} · messages waiting: "
            f"{counts.get('pending', 0)} · replies unsent: {unsent}",
            f"This conversation: {history} messages in context",
            await self._context_line(session, running),
            *await self._spend_lines(principal),
            *model_lines(self._models.states(), now=self._clock.now().timestamp()),
        ]
        # What others asked for (task prompts, jobs) is for the owner and admins, in DMs.
        if principal.is_admin and not msg.is_group:
            lines.extend(await self._background_lines())
        return "\n".join(lines)

    async def _context_line(self, session: str, running: TurnControl | None) -> str:
        if running is not None and running.context_tokens:
            tokens, window = running.context_tokens, running.context_window
        else:
            tokens = await self._store.history.context_tokens(session)
            window = self._settings.llm.context_window
        share = f" ({tokens / window:.0%} of the {window:,}-token window)" if window else ""
        return f"Context: about {tokens:,} tokens{share}"

    async def _spend_lines(self, principal: Principal) -> list[str]:
        """Today's spend: the person's own, and everyone's for the owner and admins only
        (what others spend is no member's business, nor a member API token's)."""
        midnight = self._clock.now().astimezone(zone(self._settings.timezone))
        since = midnight.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
        mine = await self._store.usage.spent(since, principal=principal.person)
        line = f"Today: you {self._spent(mine)}"
        if principal.is_admin:
            line += f"; everyone {self._spent(await self._store.usage.spent(since))}"
        return [line]

    def _spent(self, totals: UsageTotals) -> str:
        tokens = totals.input_tokens + totals.output_tokens
        cost = self._settings.llm.cost(
            input_tokens=totals.input_tokens,
            output_tokens=totals.output_tokens,
            cached_tokens=totals.cache_read_tokens,
        )
        return f"{tokens:,} tokens" + (f" (about ${cost:.2f})" if cost is not None else "")

    async def _background_lines(self) -> list[str]:
        lines = [
            f"Background task {t.id} ({t.task_type}): {t.prompt[:80]}"
            for t in await self._store.tasks.running()
        ]
        runs = [job.next_run for job in await self._store.jobs.active() if job.next_run]
        if runs:
            lines.append(f"Scheduled jobs: {len(runs)} (next: {min(runs):%Y-%m-%d %H:%M %Z})")
        return lines


def _now_line(running: TurnControl) -> str:
    """What the conversation's running turn is doing, and for how long."""
    now = time.monotonic()
    doing = "working" if running.activity == "starting" else running.activity
    line = f"Now: {doing} for {now - running.activity_since:.0f} s"
    line += f" (this turn started {now - running.started_at:.0f} s ago)"
    return line + (" · stopping" if running.stopping else "")
