"""The ``browser`` tool's open sessions, for every agent of the gateway.

One session per agent for its owner's and admins' turns, and one per member where members
may use the tool (``tools.policy.member_deny``): a member never acts in the owner's signed-in
session. Each keeps its cookies in its profile (agent.web.profiles) when the owner made one.
Sessions run in a Chromium of their own (not web_fetch's, whose restarts would cut them off),
launched by the first ``open`` and stopped within a minute of the last session's closing.
A session closes after ``idle_minutes`` unused, when more than ``max_sessions`` are open
(the longest unused first), on ``close``, and when the gateway stops. A session closes saved, so its cookies
outlive the gateway; the page itself does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from agent.web.browser import Browser
from agent.web.profiles import Profiles
from agent.web.session import BrowserSession, StepLimits

log = logging.getLogger(__name__)

Key = tuple[str, str | None]  # the agent, and the member (None: the agent's own session)
MAX_TURNS_COUNTED = 1_000


@dataclass(frozen=True, slots=True)
class SessionLimits:
    step: StepLimits = field(default_factory=StepLimits)
    max_sessions: int = 4
    idle_seconds: float = 1_800.0
    max_steps_per_turn: int = 30


class BrowserSessions:
    def __init__(self, browser: Browser, profiles: Profiles, limits: SessionLimits) -> None:
        self.browser = browser
        self.profiles = profiles
        self.limits = limits
        self._sessions: OrderedDict[Key, BrowserSession] = OrderedDict()  # least recent first
        self._lock = asyncio.Lock()
        self._steps: OrderedDict[str, int] = OrderedDict()  # turn id -> browser calls
        self._reaper: asyncio.Task[None] | None = None
        self._problem: tuple[str | None] | None = None

    def problem(self) -> str | None:
        """Why no browser can run here (looked up once); None when one can."""
        if self._problem is None:
            self._problem = (self.browser.problem(),)
        return self._problem[0]

    def find(self, key: Key) -> BrowserSession | None:
        session = self._sessions.get(key)
        return session if session is not None and session.open else None

    async def session(self, key: Key) -> BrowserSession:
        """The open session of ``key``, or a new one (loaded from its profile)."""
        async with self._lock:
            session = self._sessions.get(key)
            if session is not None and session.open:
                self._sessions.move_to_end(key)
                return session
            if session is not None:  # its page died (a crash): start afresh, cookies kept
                await self._close(key)
            while len(self._sessions) >= self.limits.max_sessions:
                oldest = next(iter(self._sessions))
                log.info("closing the browser session of %s: too many are open", oldest)
                await self._close(oldest)
            agent, person = key
            session = BrowserSession(
                self.browser,
                profiles=self.profiles,
                profile=self.profiles.path(agent, person),
                limits=self.limits.step,
            )
            await session.start()
            self._sessions[key] = session
            if self._reaper is None or self._reaper.done():
                self._reaper = asyncio.create_task(self._reap(), name="browser-sessions")
            return session

    async def close(self, key: Key) -> bool:
        """Close ``key``'s session (saved); False when none was open."""
        async with self._lock:
            return await self._close(key)

    def count_step(self, turn_id: str) -> int:
        """Count one browser call of ``turn_id``; returns how many it has made."""
        count = self._steps.pop(turn_id, 0) + 1
        self._steps[turn_id] = count
        while len(self._steps) > MAX_TURNS_COUNTED:
            self._steps.popitem(last=False)
        return count

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        async with self._lock:
            for key in list(self._sessions):
                await self._close(key)
        await self.browser.stop()

    async def _close(self, key: Key) -> bool:
        session = self._sessions.pop(key, None)
        if session is not None:
            await session.close()
        return session is not None

    async def _reap(self) -> None:
        """Close sessions unused for ``idle_seconds``; once none is open (at the next look,
        within a minute), stop the browser, so its memory goes back while nobody browses."""
        idle = self.limits.idle_seconds
        while True:
            await asyncio.sleep(min(idle, 60.0))
            async with self._lock:
                now = time.monotonic()
                for key, session in list(self._sessions.items()):
                    if now - session.last_used >= idle and not session.lock.locked():
                        log.info("closing the browser session of %s: unused", key)
                        await self._close(key)
                if not self._sessions:
                    await self.browser.stop()
                    return
