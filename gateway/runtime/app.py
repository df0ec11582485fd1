"""Gateway: runs the parts :mod:`gateway.runtime.build` makes, and is what the web server
sees of them (:class:`gateway.web.view.GatewayView`).

Start order: lock the data directory (or join the cluster), open the store, take on what a
previous run left open, start outbox workers and the dispatcher, then connect channels (so
nothing is accepted before it can be processed); stop in reverse, with a drain period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from agent.agent import Agent
from agent.llm.base import LLMProvider
from agent.llm.factory import configuration_problem
from agent.llm.lazy import LazyProvider
from agent.tools.base import Tool
from agent.tools.registry import ToolRegistry
from gateway import __version__
from gateway.config.reference.form import FormSection, settings_form
from gateway.config.settings import Settings
from gateway.config.sources import describe
from gateway.core.addressing import DEFAULT_AGENT
from gateway.core.channel import Channel, StartContext
from gateway.core.clock import Clock
from gateway.core.lifecycle import Service
from gateway.core.services import ScheduledItem
from gateway.core.workspace_files import FileText
from gateway.runtime.agents.assembly import workspaces
from gateway.runtime.build import build
from gateway.runtime.home import prepare_workspace
from gateway.runtime.intake.restored import settle_restored_copy
from gateway.runtime.live.settings import change_settings
from gateway.store import PairingRequest
from gateway.web.view import (
    CapSpend,
    HeartbeatAction,
    HeartbeatState,
    JobAction,
    LinkedPerson,
    ModelState,
    Revoked,
    SessionActivity,
    SettingsChange,
    WorkInProgress,
)

if TYPE_CHECKING:
    from agent.mcp.manager import McpManager
    from gateway.core.system.listener import Listener
    from gateway.web import WebServer

log = logging.getLogger(__name__)


class Gateway(Service):
    def __init__(
        self,
        settings: Settings,
        *,
        channels: Sequence[Channel] | None = None,
        llm: LLMProvider | None = None,
        extra_tools: Sequence[Tool] = (),
        clock: Clock | None = None,
        serve_programs: bool = True,
    ) -> None:
        """Built by :func:`gateway.runtime.build.build` (which says what the options mean)."""
        parts = build(
            settings,
            channels=channels,
            llm=llm,
            extra_tools=extra_tools,
            clock=clock,
            serve_programs=serve_programs,
        )
        self.parts = parts
        # what callers reach for (the command line, the web server, tests)
        self.clock = parts.clock
        self.load = parts.load
        self.store = parts.store
        self.guard = parts.guard
        self.channels = parts.channels
        self.bus = parts.bus
        self.inbound = parts.inbound
        self.records = parts.records
        self.recaller = parts.recaller
        self.indexer = parts.indexer
        self.agents = parts.agents
        self.drafts = parts.drafts
        self.approvals = parts.approvals
        self.budget = parts.budget
        self.subagents = parts.subagents
        self.config_reload = parts.config_reload
        self.dispatcher = parts.dispatcher
        self.scheduler = parts.scheduler
        self.control = parts.control  # what the owner's control center changes
        self.web: WebServer | None = None  # gateway/web; started with the web chat
        self._receiving: set[str] = set()  # channels started before this node led

        # set by POST /api/restart; `switchboard run` (which offers it) stops and starts anew
        self.restart_requested = asyncio.Event()
        self.restartable = False

    @property
    def settings(self) -> Settings:
        """The configuration in effect (a reload changes it)."""
        return self.config_reload.current

    @property
    def agent(self) -> Agent:
        """The default agent now (a change of its settings builds it again)."""
        return self.agents[DEFAULT_AGENT]

    @property
    def tools(self) -> ToolRegistry:
        return self.agent.executor.registry

    @property
    def mcp(self) -> McpManager | None:
        """The MCP servers' manager now in use."""
        return self.parts.roster.mcp

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        parts = self.parts
        await self.guard.acquire()  # the data directory's lock, or a cluster joined
        try:
            # what can fail cheaply first: a taken port stops us before the store is
            # migrated (the older version would refuse it) and before any channel connects
            self._check_ports()
            for workspace in workspaces(self.settings).values():
                prepare_workspace(workspace)  # a new agent's workspace starts from the template
            await self.store.start()
            # a restored copy: what was open in it is told, not answered a second time
            await settle_restored_copy(self.store, ZoneInfo(self.settings.timezone))
            await self.dispatcher.start()
            # one process: what the previous run left open; a node: runs turns at once, and
            # the rest once it leads (a standby waits in lead())
            await parts.intake.start()
            # background tasks run on the node whose turn spawned them: every node
            await self.subagents.start()
            await self._receive_early()
            await self.guard.lead()
            await self.approvals.expire_due()
            # Before the channels: what the last run left to send goes out while they
            # connect (a channel's send works before its start: gateway.core.channel).
            for worker in parts.workers.values():
                await worker.start()
            if self.mcp is not None:  # before anything can start a turn
                await self.mcp.start()
            await self.indexer.start()
            await self.scheduler.start()
            await self.approvals.start()
            for channel in self.channels.values():
                if channel.name not in self._receiving:
                    await channel.start(StartContext(self.inbound, records=self.records))
            for provider in parts.models.providers():
                if isinstance(provider, LazyProvider):
                    # import the model SDK now, on a thread, once the channels listen
                    provider.warm()
            await self._serve_web()
            await self.config_reload.start()
        except BaseException as exc:
            await self._shutdown()
            copy = self.store.migrated_from
            if copy is not None and isinstance(exc, Exception):
                exc.add_note(copy.undo())  # said with the error (gateway/cli/main.py)
            raise
        log.info(
            "Switchboard %s ready (channels: %s)", __version__, ", ".join(self.channels) or "none"
        )
        problem = configuration_problem(self.settings.llm)
        if isinstance(parts.llm, LazyProvider) and problem is not None:
            log.warning("%s", problem.explain())  # every turn will say so; say it now too

    def _check_ports(self) -> None:
        """Raise what a listener's bind would (a port another program holds:
        :class:`~gateway.core.errors.PortInUse`), before the store is opened or any channel
        connects: the web server's, and the channels' own (Telegram's webhook, Slack's
        Events API). A cluster node binds those only once it leads, maybe after a node on
        the same machine that holds them now goes: it checks the web server's only."""
        listeners: list[Listener] = []
        if self.settings.web.enabled:
            from gateway.web import web_listener  # noqa: PLC0415 - aiohttp only when serving

            listeners.extend(web_listener(self))
        if self.guard.single_process:
            sections = self.settings.channel_sections()
            for name in self.channels:
                if (section := sections.get(name)) is not None:
                    listeners.extend(section.listeners())
        for listener in listeners:
            listener.probe()

    async def _serve_web(self) -> None:
        if self.web is not None:  # started before this node led: now serve it all
            self.web.serve_all()
        elif self.settings.web.enabled:
            from gateway.web import start_web  # noqa: PLC0415 - aiohttp only when serving

            self.web = await start_web(self)

    async def _receive_early(self) -> None:
        """The channels the guard says receive before this process leads (a cluster node
        takes WhatsApp's webhooks and the signed hooks at once: they are journaled in the
        shared store and answered by the node that runs the session,
        gateway.core.channel.ReceivesOnEveryNode). Its web server serves only their routes
        until the node leads."""
        early = [c for c in self.channels.values() if self.guard.receives_early(c)]
        if not early or not self.settings.web.enabled:
            return
        from gateway.web import start_web  # noqa: PLC0415 - aiohttp when serving

        for channel in early:
            await channel.start(StartContext(self.inbound, records=self.records))
            self._receiving.add(channel.name)
        self.web = await start_web(self, standby=True)

    async def stop(self, *, drain_timeout: float = 10.0, now: asyncio.Event | None = None) -> None:
        """Stop; running turns get ``drain_timeout`` seconds to finish, or less once ``now``
        is set (a second Ctrl-C). A turn cut short resumes at the next start."""
        await self._shutdown(drain_timeout=drain_timeout, now=now)

    async def _shutdown(
        self, *, drain_timeout: float = 10.0, now: asyncio.Event | None = None
    ) -> None:
        parts = self.parts
        await self.config_reload.stop()
        if self.web is not None:  # first: no new web requests while the rest stops
            await self.web.stop()
            self.web = None
        for channel in self.channels.values():
            try:
                await channel.stop()
            except Exception:
                log.exception("channel %s did not stop cleanly", channel.name)
        await self.scheduler.stop()
        await self.indexer.stop()
        await self.approvals.stop()
        await self.subagents.stop(drain_timeout=drain_timeout, now=now)
        self.dispatcher.stop_taking()  # first: no turn starts while the turns drain
        await parts.intake.stop()  # what came in meanwhile: a /stop still applies
        await self.dispatcher.stop(drain_timeout=drain_timeout, now=now)
        await self.drafts.stop()
        await parts.display.stop()
        for worker in parts.workers.values():
            await worker.stop()
        await parts.roster.stop()
        await self.recaller.aclose()  # after the turns: an embeddings endpoint's connections
        if self.mcp is not None:  # after the turns that use the servers
            await self.mcp.stop()
        if parts.browser is not None:
            await parts.browser.stop()
        if parts.browser_sessions is not None:  # saved into their profiles, then closed
            await parts.browser_sessions.stop()
        for provider in parts.models.providers():
            with contextlib.suppress(Exception):
                await provider.aclose()
        if parts.speech is not None:
            await parts.speech.aclose()
        await self.store.stop()
        await self.guard.release()

    # -- what the web server sees (gateway.web.view.GatewayView) ---------------------------

    def work_in_progress(self) -> WorkInProgress:
        return WorkInProgress(self.dispatcher.running_turns, self.dispatcher.queued_messages)

    def schedule(self) -> list[ScheduledItem] | None:
        return self.scheduler.snapshot() if self.scheduler.running else None

    def model_states(self) -> list[ModelState]:
        return self.parts.models.states()

    async def spending(self) -> list[CapSpend]:
        caps = self.parts.spend_caps
        return [
            CapSpend(s.cap.key, s.spent_usd, s.cap.limit_usd, s.resets.timestamp())
            for s in await caps.states(caps.configured())
        ]

    def degraded(self) -> str | None:
        return self.guard.degraded()

    async def decide_pairing(self, code: str, *, approve: bool, by: str) -> PairingRequest | None:
        return await self.control.decide_pairing(code, approve=approve, by=by)

    def session_activity(self, session_key: str) -> SessionActivity:
        return self.control.activity(session_key)

    async def stop_turn(self, session_key: str, *, by: str) -> str:
        return await self.control.stop_turn(session_key, by=by)

    async def start_fresh(self, session_key: str, *, by: str) -> str:
        return await self.control.start_fresh(session_key, by=by)

    async def revoke_person(self, channel: str, sender_id: str, *, by: str) -> Revoked:
        return await self.control.revoke(channel, sender_id, by=by)

    async def linked_people(self) -> list[LinkedPerson]:
        return await self.control.linked_people()

    async def link_addresses(self, address: str, to: str, *, by: str) -> str:
        return await self.control.link(address, to, by=by)

    async def unlink_address(self, address: str, *, by: str) -> str:
        return await self.control.unlink(address, by=by)

    async def confirm_link(self, code: str, *, by: str) -> str:
        return await self.control.confirm_link(code, by=by)

    async def decide_approval(self, request_id: str, *, approve: bool, by: str) -> str:
        return await self.control.decide_approval(request_id, approve=approve, by=by)

    async def change_job(self, job_id: str, action: JobAction, *, by: str) -> bool:
        return await self.control.change_job(job_id, action, by=by)

    async def heartbeat_state(self) -> HeartbeatState:
        return await self.control.heartbeat_state()

    async def change_heartbeat(self, action: HeartbeatAction, *, by: str) -> bool:
        return await self.control.change_heartbeat(action, by=by)

    async def save_workspace_file(
        self, name: str, text: str, *, base: str, base_text: str | None, by: str
    ) -> FileText:
        return await self.control.save_file(name, text, base=base, base_text=base_text, by=by)

    def settings_form(self) -> list[FormSection]:
        settings = self.settings
        return settings_form(settings, describe(settings.home))

    async def change_settings(
        self,
        values: Mapping[str, str],
        *,
        by: str,
        check: bool = False,
        clear: Sequence[str] = (),
    ) -> SettingsChange:
        return await change_settings(
            self.config_reload, self.store.audit, values, by=by, check=check, clear=clear
        )

    def restart_offered(self) -> bool:
        return self.restartable

    async def restart(self, *, by: str) -> bool:
        if not self.restartable:
            return False
        await self.store.audit.record("restart_requested", detail={"by": by})
        log.warning("restart asked by %s: stopping, then starting anew", by)
        self.restart_requested.set()
        return True

    async def wait_idle(self, channel: str | None = None) -> None:
        """Return once no message of ``channel`` is waiting, running or unsent.

        Bound it with ``asyncio.timeout`` at the call site when needed.
        """
        await self.bus.settled(channel)
