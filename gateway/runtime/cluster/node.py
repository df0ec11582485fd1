"""This process as a node of a cluster: the :class:`~gateway.runtime.deployment.Guard` of a
home on PostgreSQL (see :mod:`gateway.runtime.deployment`)."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable

from gateway.config.settings import Settings
from gateway.core.channel import Channel, ReceivesOnEveryNode
from gateway.core.lifecycle import Service
from gateway.core.load import NodeLoad
from gateway.core.messages import InboundMessage
from gateway.runtime.cluster.work import ClusterClaims, ClusterWork
from gateway.runtime.deployment import WaitingTurns, WorkSources
from gateway.runtime.dispatch.dispatcher import Claims, Dispatcher
from gateway.runtime.storage import node_name
from gateway.store import Store
from gateway.store.cluster.membership import Membership
from gateway.store.outbox import Fence


class ClusterGuard:
    """This node of the cluster: runs turns at once, and receives, sends and schedules once
    it leads; what every node receives (WhatsApp's webhook, the signed hooks) it takes
    before."""

    single_process = False  # any node may take a message; a task of a node that went ends

    def __init__(
        self, settings: Settings, url: str, *, load: NodeLoad, interval: float = 1.0
    ) -> None:
        self.fenced = asyncio.Event()
        self.membership = Membership(
            url,
            node_name(settings),
            host=socket.gethostname(),
            pid=os.getpid(),
            interval=interval,
            on_lost=self.fenced.set,
            load=load,
        )
        self.standby = self.membership.waiting
        self._claims: ClusterClaims | None = None

    @property
    def why_fenced(self) -> str:
        return self.membership.why_lost

    async def acquire(self) -> None:
        await self.membership.start()
        self.membership.working = True  # runs turns from now on: fences itself if cut off

    async def lead(self) -> None:
        await self.membership.lead()

    async def release(self) -> None:
        await self.membership.stop()

    def claims(
        self,
        store: Store,
        session_of: Callable[[InboundMessage], str],
        waiting_turns: WaitingTurns,
    ) -> Claims:
        self._claims = ClusterClaims(
            store.journal, self.membership, session_of=session_of, waiting_turns=waiting_turns
        )
        return self._claims

    def intake(self, dispatcher: Dispatcher, sources: WorkSources) -> Service:
        if self._claims is None:
            raise RuntimeError("a cluster node's work needs its claims first")
        return ClusterWork(
            self._claims,
            dispatcher,
            db=sources.store.db,
            journal=sources.store.journal,
            membership=self.membership,
            bus=sources.bus,
            session_of=sources.session_of,
            waiting_turns=sources.approvals.waiting_turns,
            channels=sources.channels,
            max_sessions=sources.max_sessions,
            people_changed=sources.people_changed,
            task_stopped=sources.task_stopped,
        )

    def send_fence(self) -> Fence | None:
        return self.membership.leads  # a node sends only while it leads

    def receives_early(self, channel: Channel) -> bool:
        return isinstance(channel, ReceivesOnEveryNode)

    def degraded(self) -> str | None:
        if self.membership.degraded.is_set():
            return "lost the database: paused, reconnecting"
        return None
