"""The jobs people schedule by asking ("remind me at 9"): the service the ``cron`` tool uses.

Jobs are stored (:class:`gateway.store.Jobs`); :class:`JobBook` checks and records them and
tells the scheduler (:attr:`JobBook.changed`), which fires them
(:mod:`gateway.runtime.schedule.scheduler`). Each person sees and removes only their own jobs
(made from any of their addresses); the owner sees every job.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from gateway.config.settings import Settings
from gateway.core.addressing import DEFAULT_AGENT
from gateway.core.clock import Clock
from gateway.core.messages import ChatRef, ChatType, new_id
from gateway.core.principal import Principal
from gateway.core.schedule_spec import ScheduleError, parse_schedule, zone
from gateway.core.services import JobInfo
from gateway.core.turns import TaskTypeName
from gateway.runtime.people.directory import PeopleDirectory
from gateway.runtime.people.zones import Zones
from gateway.store import Job, Jobs


class JobBook:
    def __init__(
        self,
        settings: Settings,
        *,
        jobs: Jobs,
        clock: Clock,
        zones: Zones,
        directory: PeopleDirectory,
    ) -> None:
        self._settings = settings
        self._jobs = jobs
        self._clock = clock
        self._zones = zones  # a job's times are in its owner's own zone
        self._directory = directory  # a person's addresses: their jobs are made from any
        self.changed = asyncio.Event()  # set when a job was added: the scheduler plans anew

    def configure(self, settings: Settings) -> None:
        """The settings a reload put in use: the limits on jobs count from now."""
        self._settings = settings

    async def add_job(
        self,
        *,
        schedule: str,
        timezone: str | None,
        prompt: str | None,
        message: str | None,
        chat: ChatRef,
        principal: Principal,
        task_type: TaskTypeName,
        agent: str = DEFAULT_AGENT,
        user_texts: tuple[str, ...] = (),
        tainted: bool = False,
    ) -> JobInfo:
        now = self._clock.now()
        if not principal.is_admin and not own_chat(chat, principal):
            raise ScheduleError("members may schedule jobs for their own direct chat only")
        if timezone is None:
            timezone = await self._zones.zone_of(principal.person)
        spec = parse_schedule(schedule, now=now, timezone=timezone)
        first = spec.next_after(None, now)
        if first is None or first < now:  # never tell a time that has passed
            raise ScheduleError(f"{schedule!r} would first run at {first}, which has passed")
        addresses = await self._addresses(principal)
        mine = [j for j in await self._jobs.active() if j.owner_key in addresses]
        scheduler = self._settings.scheduler
        cap = scheduler.max_jobs_per_user if principal.is_admin else scheduler.max_jobs_per_member
        if len(mine) >= cap:
            raise ScheduleError(
                f"you already have {len(mine)} scheduled jobs (at most {cap}); remove some first"
            )
        job = Job(
            id=new_id()[:8],
            spec=spec,
            prompt=prompt,
            message=message,
            chat=chat,
            owner=principal.record(),
            task_type=task_type,
            next_run=first,
            agent=agent,
            authorised_by=user_texts,
            tainted=tainted,
        )
        await self._jobs.add(job)
        self.changed.set()
        found = info(job)
        if job.next_run is not None:  # said now, not found out at 07:00
            quiet = await self._zones.quiet_until(principal.person, job.next_run)
            if quiet is not None:
                found = replace(found, waits_until=quiet)
        return found

    async def list_jobs(self, principal: Principal) -> list[JobInfo]:
        addresses = await self._addresses(principal)
        listed = await self._jobs.listing()
        return [info(j) for j in listed if visible(j, principal, addresses)]

    async def remove_job(self, job_id: str, principal: Principal) -> bool:
        """The ``cron`` tool's remove and the control center's Delete (``switchboard cron
        remove`` calls the same :meth:`Jobs.remove`)."""
        if not await self._may_change(job_id, principal):
            return False
        removed = await self._jobs.remove(job_id)
        self.changed.set()
        return removed

    async def pause_job(self, job_id: str, principal: Principal) -> bool:
        """Keep the job but run it no more until resumed; whether it was active."""
        if not await self._may_change(job_id, principal):
            return False
        paused = await self._jobs.pause(job_id)
        self.changed.set()
        return paused

    async def resume_job(self, job_id: str, principal: Principal) -> bool:
        """Run a paused job again from its next time (one whose time passed meanwhile runs
        now, once); whether it was paused."""
        if not await self._may_change(job_id, principal):
            return False
        resumed = await self._jobs.resume(job_id)
        self.changed.set()
        return resumed

    async def run_job_now(self, job_id: str, principal: Principal) -> bool:
        """Fire an active job now; its schedule goes on after that. Whether it was active."""
        if not await self._may_change(job_id, principal):
            return False
        due = await self._jobs.run_at(job_id, self._clock.now())
        self.changed.set()
        return due

    async def _may_change(self, job_id: str, principal: Principal) -> bool:
        job = await self._jobs.get(job_id)
        return job is not None and visible(job, principal, await self._addresses(principal))

    async def _addresses(self, principal: Principal) -> tuple[str, ...]:
        """Every address of the person ``principal`` is: a job is theirs whichever of them
        it was made from (it records that one)."""
        return (await self._directory.identify(principal.address)).addresses


def visible(job: Job, principal: Principal, addresses: tuple[str, ...]) -> bool:
    """The owner sees every job; anyone else the jobs made from their ``addresses``."""
    return principal.is_owner or job.owner_key in addresses


def own_chat(chat: ChatRef, principal: Principal) -> bool:
    """Whether ``chat`` is ``principal``'s own direct chat (where their job's output goes)."""
    return principal.chat_type is ChatType.DM and chat.channel == principal.channel


def info(job: Job) -> JobInfo:
    """The job as the ``cron`` tool shows it: its next run in the job's own zone, as its
    description is (the time of "in 2 minutes" is counted in UTC)."""
    local = job.next_run.astimezone(zone(job.spec.timezone)) if job.next_run else None
    what = job.message or job.prompt or ""
    return JobInfo(job.id, job.spec.describe(), local, what, paused=job.state == "paused")
