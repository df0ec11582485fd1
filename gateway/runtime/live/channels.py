"""A chat channel's settings changed while the gateway runs: that channel alone is stopped
and started again with its new section, and its outbox worker with it.

The channel's section is also what the access gate, the turn handlers and the approval
desk read for each message (they share one dict of sections), so its access rules apply to
the next message. A channel turned on is built by its plug-in and started; one turned off is
stopped, and what its outbox holds waits for it to come back.

Some changes still need a new process, and say so: a channel the gateway did not build
itself (one a test or ``switchboard chat`` handed it), one that serves routes on the web
server (WhatsApp's webhook: the server's routes are fixed when it starts), a section whose
older speech keys configure transcription for every channel, and any channel of a cluster
node (which channels a node runs follows who leads).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.config.channels import ChannelSection
from gateway.config.plugins import ChannelPlugin
from gateway.config.settings import Settings
from gateway.core.channel import Channel, StartContext
from gateway.runtime.outbound.worker import OutboundWorker

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ChannelChange:
    """What :meth:`LiveChannels.prepare` made of a change: each channel's new section and
    its new adapter (None: the channel is off now), built and not started."""

    sections: dict[str, ChannelSection] = field(default_factory=dict)
    adapters: dict[str, Channel | None] = field(default_factory=dict)
    restart: set[str] = field(default_factory=set)  # keys only a new process applies

    @property
    def names(self) -> list[str]:
        return list(self.sections)


class LiveChannels:
    def __init__(
        self,
        *,
        channels: dict[str, Channel],
        sections: dict[str, ChannelSection],
        workers: dict[str, OutboundWorker],
        worker: Callable[[Channel], OutboundWorker],
        start: StartContext,
        ready: Callable[[str], None],
        plugins: Mapping[str, ChannelPlugin[Any]],
        managed: bool,
    ) -> None:
        """``channels``, ``sections`` and ``workers``: the gateway's own dicts, changed in
        place. ``worker``: a new outbox worker for a channel; ``ready``: tells the outbox a
        channel can send (its waiting messages go out). ``managed``: the gateway built its
        channels from the settings (``switchboard run``), so it can build them again."""
        self._channels = channels
        self._sections = sections
        self._workers = workers
        self._worker = worker
        self._start = start
        self._ready = ready
        self._plugins = plugins
        self._managed = managed

    def names(self) -> list[str]:
        """The channels running now (those of other programs and agents too)."""
        return list(self._channels)

    def prepare(self, old: Settings, new: Settings, keys: Collection[str]) -> ChannelChange:
        """Build the adapters of the channels ``keys`` change (raises
        :class:`~gateway.core.errors.ConfigError` for a section its plug-in refuses, as at
        start); nothing running is touched."""
        change = ChannelChange()
        before, after = old.channel_sections(), new.channel_sections()
        for name in dict.fromkeys(key.split(".", 1)[0] for key in keys):
            own = {key for key in keys if key.split(".", 1)[0] == name}
            section = after[name]
            adapter = (
                self._plugins[name].create(section, new.channel_context())
                if section.enabled
                else None
            )
            speech_changed = before[name].speech_settings(old.voice) != section.speech_settings(
                new.voice
            )
            if speech_changed or self._needs_restart(name, adapter):
                change.restart |= own
                continue
            change.sections[name] = section
            change.adapters[name] = adapter
        return change

    def _needs_restart(self, name: str, adapter: Channel | None) -> bool:
        """Whether only a new process can change this channel (see the module docstring)."""
        if not self._managed:
            return True
        running = self._channels.get(name)
        return any(_serves_web(c) for c in (running, adapter) if c is not None)

    async def commit(self, change: ChannelChange) -> list[str]:
        """Stop each changed channel and its worker, then start its new adapter and a new
        worker; returns what did not work (the rest of the change stands)."""
        problems = []
        for name in change.names:
            self._sections[name] = change.sections[name]
            worker = self._workers.pop(name, None)
            if worker is not None:
                await worker.stop()  # messages in flight finish on the old adapter first
            running = self._channels.pop(name, None)
            if running is not None:
                try:
                    await running.stop()
                except Exception:
                    log.exception("channel %s did not stop cleanly", name)
            adapter = change.adapters[name]
            if adapter is None:
                log.info("channel %s stopped: its section turns it off now", name)
                continue
            try:
                await adapter.start(self._start)
            except Exception as exc:
                log.exception("channel %s did not start with its new settings", name)
                problems.append(f"{name} did not start with its new settings: {exc}")
                continue
            self._channels[name] = adapter
            self._workers[name] = self._worker(adapter)
            await self._workers[name].start()
            self._ready(name)  # what waited in its outbox goes out now
            log.info("channel %s started with its new settings", name)
        return problems


def _serves_web(channel: Channel) -> bool:
    """Whether the channel has routes on the web server (fixed when the server starts)."""
    # aiohttp's server side loads only when a channel changes, not at every start
    from gateway.core.webhost import ServesPrograms, ServesWeb, ServesWebhooks  # noqa: PLC0415

    return isinstance(channel, ServesWeb | ServesWebhooks | ServesPrograms)
