"""The ``/status`` answer: the gateway, this conversation, the models, and (for the owner and
admins) the channels, what waits to be sent where, everyone's spend today and, in a direct
chat, the background work. A member sees what concerns them: not which channels the
gateway serves, nor where the messages waiting to be sent go.

Read from the store, the model pool and the node's load, so it needs nothing that runs the
turns: it can be answered in the middle of one.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence

from gateway import __version__
from gateway.config.settings import Settings
from gateway.core.clock import Clock, day_start
from gateway.core.load import NodeLoad
from gateway.core.messages import InboundMessage
from gateway.core.principal import Principal
from gateway.core.schedule_spec import zone
from gateway.core.turns import TurnControl
from gateway.runtime.agents.models import ModelPool, model_lines
from gateway.store import Store
from gateway.store.metering.usage import UsageTotals
from gateway.store.outbox import OutboxState, UnsentMessage

UNSENT_SHOWN = 20  # unsent messages explained one by one (the oldest)
ERROR_CHARS = 120


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

    def configure(self, settings: Settings) -> None:
        """The settings a reload put in use: ``/status`` names the model they name."""
        self._settings = settings

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
        own = await self._store.journal.find(msg.channel, msg.platform_message_id)
        waiting = counts.get("pending", 0) - (1 if own is not None and own[1] == "pending" else 0)
        history = await self._store.history.message_count(session)
        llm = self._settings.llm
        others = self._load.running - (1 if running is not None else 0)
        # What others asked for (task prompts, jobs) and why a platform refused a message
        # are for the owner and admins, in DMs.
        private = principal.is_admin and not msg.is_group
        channels = f"Channels: {', '.join(self._channels) or 'none'}"
        lines = [
            f"Switchboard {__version__} · model {running.model if running and running.model else llm.model} ({llm.provider})",
            *([channels] if principal.is_admin else []),
            *([_now_line(running)] if running is not None else []),
            f"Other turns running: {max(0, others)} · messages waiting for a turn: {waiting}",
            *await self._unsent_lines(errors=private, where=principal.is_admin),
            f"This conversation: {history} messages in context",
            await self._context_line(session, running),
            *await self._spend_lines(principal),
            *model_lines(self._models.states(), now=self._clock.now().timestamp()),
        ]
        if private:
            lines.extend(await self._background_lines())
        return "\n".join(lines)

    async def _unsent_lines(self, *, errors: bool, where: bool) -> list[str]:
        """What waits in the outbox, in words: how many messages, and (``where``) to which
        channel and why each is not out yet (a failed try, the platform's rate limit, an
        earlier message); ``errors``: with the platform's error (it may name a recipient)."""
        total = await self._store.outbox.pending_count()
        if not total:
            return ["Messages to send: none waiting"]
        if not where:
            return [f"Messages to send: {_count(total, 'message')} not delivered yet"]
        now = self._clock.now().timestamp()
        reasons: Counter[tuple[str, str]] = Counter(
            (m.channel, _why_unsent(m, now, errors=errors))
            for m in await self._store.outbox.unsent(UNSENT_SHOWN)
        )
        lines = [f"Messages to send: {_count(total, 'message')} not delivered yet"]
        lines += [
            f"- {_count(n, 'message')} to {channel}: {why}" for (channel, why), n in reasons.items()
        ]
        shown = sum(reasons.values())
        if total > shown:
            lines.append(f"- and {total - shown} more")
        return lines

    async def _context_line(self, session: str, running: TurnControl | None) -> str:
        if running is not None and running.context_tokens:
            tokens, window = running.context_tokens, running.context_window
        else:
            tokens = await self._store.history.context_tokens(session)
            window = self._settings.llm.context_window
        if window and tokens > window:  # history longer than the window: a turn reads its end
            share = (
                f" (more than the {window:,}-token window: each turn reads the latest part "
                "that fits, and compaction summarises the rest)"
            )
        elif window:
            share = f" ({tokens / window:.0%} of the {window:,}-token window)"
        else:
            share = ""
        return f"Context: about {tokens:,} tokens{share}"

    async def _spend_lines(self, principal: Principal) -> list[str]:
        """Today's spend: the person's own, and everyone's for the owner and admins only
        (what others spend is no member's business, nor a member API token's)."""
        since = day_start(self._clock.now().astimezone(zone(self._settings.timezone))).timestamp()
        mine = await self._store.usage.spent(since, principal=principal.person)
        line = f"Today: you {self._spent(mine)}"
        if principal.is_admin:
            line += f"; everyone {self._spent(await self._store.usage.spent(since))}"
        return [line]

    def _spent(self, totals: UsageTotals) -> str:
        tokens = totals.input_tokens + totals.output_tokens
        cost = totals.cost_usd
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


def _why_unsent(message: UnsentMessage, now: float, *, errors: bool) -> str:
    if message.behind:
        return "waiting behind an earlier message to the same chat"
    wait = message.due_at - now
    if wait > 0 and message.last_error:
        error = f" ({' '.join(message.last_error.split())[:ERROR_CHARS]})" if errors else ""
        return f"the last try failed{error}; next try in {wait:.0f} s"
    if wait > 0:
        return f"the platform asked to slow down (rate limit); next try in {wait:.0f} s"
    if message.state is OutboxState.SENDING:
        return "being sent now"
    return f"queued {max(0.0, now - message.created_at):.0f} s ago, about to be sent"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _now_line(running: TurnControl) -> str:
    """What the conversation's running turn is doing, and for how long."""
    now = time.monotonic()
    doing = "working" if running.activity == "starting" else running.activity
    line = f"Now: {doing} for {now - running.activity_since:.0f} s"
    line += f" (this turn started {now - running.started_at:.0f} s ago)"
    return line + (" · stopping" if running.stopping else "")
