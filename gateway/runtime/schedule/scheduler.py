"""The scheduler: scheduled jobs, heartbeat ticks, the morning briefing and housekeeping, on
an injectable clock.

Jobs persist in SQLite. A run is recorded *before* it is handed to the dispatcher, so a job
runs at most once per due time, even across crashes. After downtime every overdue job runs
once (missed runs are coalesced), spread over a few seconds of jitter so a restart does not
fire everything at the same moment.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from gateway.config.settings import Settings
from gateway.core.addressing import qualify
from gateway.core.clock import Clock
from gateway.core.errors import StoreUnavailable
from gateway.core.lifecycle import Service
from gateway.core.messages import ChatRef, ChatType
from gateway.core.principal import Principal
from gateway.core.schedule_spec import ScheduleError, every
from gateway.core.services import ScheduledItem
from gateway.core.turns import TurnKind
from gateway.runtime.dispatch.dispatcher import Dispatcher
from gateway.runtime.people.directory import PeopleDirectory
from gateway.runtime.people.zones import Zones
from gateway.runtime.schedule.briefing import Briefing
from gateway.runtime.schedule.heartbeat import Heartbeat, Skip
from gateway.runtime.schedule.housekeeping import Housekeeping
from gateway.runtime.schedule.jobs import JobBook
from gateway.runtime.schedule.runs import ScheduledRun
from gateway.store import Job, Jobs

log = logging.getLogger(__name__)

STORE_RETRY = 2.0  # seconds: a cluster node whose database is away tries again after this
RETRY = timedelta(minutes=1)  # a job (or briefing) that failed is tried again after this

PRUNE_EVERY = timedelta(hours=24)
# The jobs are read again at least this often: a change made outside this process (the
# `cron` command, another node of a cluster) is seen within it.
JOBS_REREAD = timedelta(seconds=30)


class Scheduler(Service):
    def __init__(
        self,
        settings: Settings,
        *,
        jobs: Jobs,
        book: JobBook,
        dispatcher: Dispatcher,
        heartbeat: Heartbeat,
        housekeep: Housekeeping,
        clock: Clock,
        zones: Zones,
        directory: PeopleDirectory,
        briefing: Briefing | None = None,
        jitter: Callable[[float], float] = lambda limit: random.uniform(0, limit),  # noqa: S311
    ) -> None:
        self._settings = settings
        self._stored_jobs = jobs
        self._housekeep = housekeep  # prunes the store and old traces, once a day
        self._dispatcher = dispatcher
        self.heartbeat = heartbeat  # the control center pauses and runs it
        self._briefing = briefing  # calendar.briefing: the day's events each morning
        self._clock = clock
        self._jitter = jitter
        self._zones = zones  # a job's owner's quiet hours, in their zone
        self._directory = directory  # where a person whose chats are one conversation is
        self._jobs: list[Job] = []
        self._failed: dict[str, datetime] = {}  # job id -> not before: its last run failed
        self._wake = book.changed  # a job was added or removed: plan anew
        self._task: asyncio.Task[None] | None = None
        self._next_heartbeat: datetime | None = None
        self._next_briefing: datetime | None = None
        self._next_prune: datetime | None = None
        self._beat_asked = False  # the owner asked for a check-in now
        # When housekeeping last ran and what it removed; ``housekept`` is set after each run.
        self.last_housekeeping: tuple[datetime, dict[str, int]] | None = None
        self.housekept = asyncio.Event()

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        now = self._clock.now()
        await self._catch_up(now)
        if self.heartbeat.settings.enabled:
            await self.heartbeat.look_up_target()
            self._next_heartbeat = now + timedelta(seconds=self.heartbeat.settings.interval_seconds)
        if self._briefing is not None:
            self._next_briefing = await self._briefing.wake_after(now)
        self._next_prune = now + timedelta(minutes=5)
        self._task = asyncio.create_task(self._loop(), name="scheduler")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])  # however it ended, the rest of the shutdown goes on

    @property
    def running(self) -> bool:
        """Whether the loop runs (it is not started on a cluster node that does not lead)."""
        return self._task is not None and not self._task.done()

    async def configure(self, settings: Settings) -> None:
        """New ``[heartbeat]`` and ``[scheduler]`` settings (a configuration reload): the
        heartbeat turned on or off, its next check-in planned from now when it was turned
        on or its interval changed."""
        self._settings = settings
        before = self.heartbeat.settings
        self.heartbeat.configure(settings.heartbeat)
        if self._task is None:  # not running (yet): start() plans with the new settings
            return
        beat = settings.heartbeat
        if not beat.enabled:
            self._next_heartbeat = None
        elif not before.enabled or before.interval_seconds != beat.interval_seconds:
            await self.heartbeat.look_up_target()
            self._next_heartbeat = self._clock.now() + timedelta(seconds=beat.interval_seconds)
        elif before.target != beat.target:
            await self.heartbeat.look_up_target()
        self._wake.set()  # the loop waits for the new next check-in

    async def _catch_up(self, now: datetime) -> None:
        """Overdue jobs (the gateway was down) run once each, jittered instead of in a burst,
        and in the order they were due (a microsecond apart when the jitter is off)."""
        limit = self._settings.scheduler.catchup_jitter_seconds
        overdue = sorted(
            (j for j in await self._stored_jobs.active() if j.next_run and j.next_run < now),
            key=lambda job: (job.next_run, job.id),
        )
        offsets = sorted(self._jitter(limit) for _ in overdue)
        for order, (job, offset) in enumerate(zip(overdue, offsets, strict=True)):
            when = now + timedelta(seconds=offset, microseconds=order)
            await self._stored_jobs.record_run(job.id, job.last_run or now, when, count=False)
            log.info("job %s missed its run at %s; running once at %s", job.id, job.next_run, when)
        self._jobs = await self._stored_jobs.active()
        for job in await self._stored_jobs.firing():
            log.info("job %s fired but never finished (restart); running it again", job.id)
            await self._submit(job, one_shot=True)

    # -- the loop -------------------------------------------------------------------------

    async def _loop(self) -> None:
        """Rounds until stopped: no error ends it (one would stop every reminder, job and
        check-in for good, without a word until the next stop)."""
        while True:
            try:
                await self._round()
            except StoreUnavailable as exc:  # a cluster's database is away: try again soon
                log.warning("scheduler: the store is unavailable (%s); trying again", exc)
                await self._pause(STORE_RETRY)
            except Exception:
                log.exception("scheduler: a round failed; trying again in %.0f s", RETRY)
                await self._pause(RETRY.total_seconds())

    async def _pause(self, seconds: float) -> None:
        self._wake.clear()
        await self._clock.sleep_until(self._clock.now() + timedelta(seconds=seconds), self._wake)

    async def _round(self) -> None:
        """Fire what is due, then wait for the next due time (or a change). A job, check-in,
        briefing or housekeeping that fails is logged and does not keep the others from
        running; a job or briefing that failed is tried again after :data:`RETRY`."""
        now = self._clock.now()
        self._failed = {job_id: at for job_id, at in self._failed.items() if at > now}
        for job in [j for j in self._jobs if (due := self._due(j)) is not None and due <= now]:
            if await self._step(f"job {job.id}", self._fire(job, now)):
                self._failed.pop(job.id, None)
            else:
                self._failed[job.id] = now + RETRY
        if self._next_heartbeat is not None and self._next_heartbeat <= now:
            await self._step("the heartbeat", self._beat(now))
        if self._next_briefing is not None and self._next_briefing <= now:
            await self._step("the morning briefing", self._brief(now))
        if self._next_prune is not None and self._next_prune <= now:
            self._next_prune = now + PRUNE_EVERY
            await self._step("housekeeping", self._prune(now))
        deadlines = [d for d in map(self._due, self._jobs) if d is not None]
        planned = (self._next_heartbeat, self._next_briefing, self._next_prune)
        deadlines += [d for d in planned if d is not None]
        self._wake.clear()
        await self._clock.sleep_until(min([*deadlines, now + JOBS_REREAD]), self._wake)
        self._jobs = await self._stored_jobs.active()

    def _due(self, job: Job) -> datetime | None:
        """When the job runs next: its next run, or later while a failed run waits."""
        if job.next_run is None:
            return None
        return max(job.next_run, self._failed.get(job.id, job.next_run))

    async def _step(self, what: str, work: Awaitable[None]) -> bool:
        """Run one piece of a round; whether it went well (a failure is logged)."""
        try:
            await work
        except StoreUnavailable:
            raise
        except Exception:
            log.exception("scheduler: %s failed; the scheduler goes on", what)
            return False
        return True

    async def _prune(self, now: datetime) -> None:
        removed = await self._housekeep(now.timestamp())
        self.last_housekeeping = (now, removed)
        self.housekept.set()

    async def _fire(self, job: Job, now: datetime) -> None:
        current = await self._stored_jobs.get(job.id)  # removed meanwhile (CLI, another chat)?
        if current is None or current.state != "active":
            self._jobs = await self._stored_jobs.active()
            return
        owner = Principal.from_record(job.owner).person
        quiet = await self._zones.quiet_until(owner, now)
        if quiet is not None:  # the owner's quiet hours: it runs once they end
            await self._stored_jobs.record_run(job.id, job.last_run or now, quiet, count=False)
            self._jobs = await self._stored_jobs.active()
            log.info("job %s waits for the end of its owner's quiet hours (%s)", job.id, quiet)
            return
        following = job.spec.next_after(now, now) if job.spec.recurring else None
        if following is not None and following <= now:  # it would fire on every round
            raise ScheduleError(f"its next run {following} is not after {now}")
        await self._stored_jobs.record_run(job.id, now, following)  # at most once per due time
        self._jobs = await self._stored_jobs.active()
        await self._submit(job, one_shot=following is None)
        log.info("job %s fired (%s)", job.id, job.spec.describe())

    async def _submit(self, job: Job, *, one_shot: bool) -> None:
        principal = Principal.from_record(job.owner)
        chat, conversation = await self._where(job, principal)
        self._dispatcher.submit(
            ScheduledRun(
                kind=TurnKind.CRON,
                session_key=qualify(job.agent, f"cron:{job.id}"),
                chat=chat,
                conversation=conversation,
                principal=principal,
                prompt=job.prompt,
                message=job.message,
                task_type=job.task_type,
                authorising_texts=job.authorised_by,
                tainted=job.tainted,
                job_id=job.id if one_shot else None,
            )
        )

    async def _where(self, job: Job, principal: Principal) -> tuple[ChatRef, str | None]:
        """Where a job's message goes, and the conversation that records it: a job made in
        the direct chat of a person whose chats are one conversation across channels goes
        to their ``home``, else to the chat they wrote from last; any other to its chat."""
        if principal.chat_type is not ChatType.DM or job.chat.channel != principal.channel:
            return job.chat, None
        identity = await self._directory.identify(principal.address)
        if not identity.one_conversation:
            return job.chat, None
        reach = await self._directory.reach(identity)
        return reach or job.chat, qualify(job.agent, identity.conversation)

    def beat_now(self) -> bool:
        """A heartbeat check-in at once (the control center's Run now), even while paused;
        whether the heartbeat is on at all."""
        if self._next_heartbeat is None:
            return False
        self._beat_asked = True
        self._next_heartbeat = self._clock.now()
        self._wake.set()
        return True

    async def _beat(self, now: datetime) -> None:
        interval = timedelta(seconds=self.heartbeat.settings.interval_seconds)
        self._next_heartbeat = now + interval
        asked, self._beat_asked = self._beat_asked, False
        plan = await self.heartbeat.plan(now, asked=asked)
        if isinstance(plan, Skip):
            log.debug("heartbeat skipped: %s", plan.reason)
            return
        self._dispatcher.submit(plan)

    async def _brief(self, now: datetime) -> None:
        briefing = self._briefing
        assert briefing is not None
        self._next_briefing = now + RETRY  # what follows fails: it is tried again then
        if await briefing.due(now):
            plan = await briefing.plan(now)
            if isinstance(plan, Skip):
                log.info("morning briefing skipped: %s", plan.reason)
            else:
                self._dispatcher.submit(plan)
        self._next_briefing = await briefing.wake_after(now)

    # -- what the control center and `switchboard status` see ---------------------------

    def snapshot(self) -> list[ScheduledItem]:
        items = [
            ScheduledItem(j.id, TurnKind.CRON, j.spec.describe(), j.next_run, j.chat.session_key)
            for j in self._jobs
        ]
        if self._next_heartbeat is not None:
            items.append(
                ScheduledItem(
                    "heartbeat",
                    TurnKind.HEARTBEAT,
                    every(self.heartbeat.settings.interval_seconds),
                    self._next_heartbeat,
                    self.heartbeat.target,
                )
            )
        if self._briefing is not None:
            at = f"every day at {self._briefing.at:%H:%M}"
            items.append(
                ScheduledItem(
                    "briefing", TurnKind.CRON, at, self._briefing.next_at, self.heartbeat.target
                )
            )
        return items
