"""The ``/status`` answer: the gateway, this conversation, the models, and (for the owner and
admins, in a direct chat) the background work.

Read from the store, the model pool and the node's load, so it needs nothing that runs the
turns: it can be answered in the middle of one.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway import __version__
from gateway.config.settings import Settings
from gateway.core.clock import Clock
from gateway.core.load import NodeLoad
from gateway.core.messages import InboundMessage
from gateway.core.principal import Principal
from gateway.runtime.models import ModelPool, model_lines
from gateway.store import Store


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

    async def render(self, msg: InboundMessage, principal: Principal, session: str) -> str:
        counts = await self._store.journal.counts()
        history = await self._store.history.message_count(session)
        unsent = await self._store.outbox.pending_count()
        llm = self._settings.llm
        lines = [
            f"Switchboard {__version__} · model {llm.model} ({llm.provider})",
            f"Channels: {', '.join(self._channels) or 'none'}",
            # This /status runs as a turn of its own: count the others.
            f"Other turns running: {max(0, self._load.running - 1)} · messages waiting: "
            f"{counts.get('pending', 0)} · replies unsent: {unsent}",
            f"This conversation: {history} messages in context",
            *model_lines(self._models.states(), now=self._clock.now().timestamp()),
        ]
        # What others asked for (task prompts, jobs) is for the owner and admins, in DMs.
        if principal.is_admin and not msg.is_group:
            lines.extend(await self._background_lines())
        return "\n".join(lines)

    async def _background_lines(self) -> list[str]:
        lines = [
            f"Background task {t.id} ({t.task_type}): {t.prompt[:80]}"
            for t in await self._store.tasks.running()
        ]
        runs = [job.next_run for job in await self._store.jobs.active() if job.next_run]
        if runs:
            lines.append(f"Scheduled jobs: {len(runs)} (next: {min(runs):%Y-%m-%d %H:%M %Z})")
        return lines
