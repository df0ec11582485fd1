"""The heartbeat: should this tick become a check-in turn, and with what?

Every rule that can skip a tick runs before any model call: nothing due in HEARTBEAT.md
(empty, or headings and comments only), quiet hours in the user's time zone, the previous
heartbeat still running, nowhere to deliver, the target chat rate-limited, today's token
budget for heartbeats spent, a money cap of background work or of the gateway reached
(gateway/runtime/people/spend.py), or the owner paused it (the control center; kept across
restarts). Peers burned tokens on all of these.

With ``calendar.heartbeat`` the check-in also sees the rest of the day's events (read
before the model call, in the owner's zone); they are outside content, so such a check-in
is tainted: an invitation's words cannot make it act.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from pathlib import Path
from typing import Protocol

from gateway.config.connect import parse_target
from gateway.config.settings import HeartbeatSettings, Settings
from gateway.core.messages import ChatRef, ChatType
from gateway.core.principal import Principal, Role
from gateway.core.schedule_spec import zone
from gateway.core.text.textutil import only_headings, without_comments
from gateway.core.turns import TurnKind
from gateway.runtime.people.budget import UserBudget
from gateway.runtime.people.directory import PeopleDirectory, owners_home
from gateway.runtime.schedule.agenda import OwnersAgenda
from gateway.runtime.schedule.runs import ScheduledRun
from gateway.store import HomeChat, HomeChats, KeyValue, Outbox, Store, UsageReport

log = logging.getLogger(__name__)

SESSION = "heartbeat:main"
PAUSED_KEY = "heartbeat.paused"  # kv: the owner paused check-ins (the control center)
HISTORY_LIMIT = 6  # a light session: the last few check-ins, not the whole story
PROMPT = """\
Heartbeat check-in. These are the standing tasks from HEARTBEAT.md:

{tasks}

Do what is due now (use your tools if needed) and write the message the user should get. \
If nothing needs the user's attention right now, reply exactly HEARTBEAT_OK."""
CALENDAR = """

The rest of the owner's day in their calendar (times in {zone}):

{events}"""


def has_tasks(text: str) -> bool:
    """True when HEARTBEAT.md holds something besides headings, comments and blank lines."""
    return not only_headings(text)


def in_quiet_hours(spec: str, local: datetime) -> bool:
    if not spec:
        return False
    start_text, end_text = spec.split("-")
    start = time.fromisoformat(start_text.zfill(5))
    end = time.fromisoformat(end_text.zfill(5))
    now = local.time().replace(tzinfo=None)
    if start <= end:
        return start <= now < end
    return now >= start or now < end  # spans midnight


@dataclass(frozen=True, slots=True)
class Skip:
    reason: str


class Heartbeat:
    def __init__(
        self,
        settings: HeartbeatSettings,
        *,
        workspace: Path,
        outbox: Outbox,
        usage: UsageReport,
        chat: OwnersChat,
        kv: KeyValue,
        timezone: str = "UTC",
        agenda: OwnersAgenda | None = None,
        budget: UserBudget | None = None,
    ) -> None:
        self.settings = settings
        self.timezone = timezone  # user.timezone: the owner's quiet hours
        self._file = workspace / "HEARTBEAT.md"
        self._outbox = outbox
        self._usage = usage
        self._chat = chat  # where check-ins go
        self._agenda = agenda  # calendar.heartbeat: the rest of the day's events
        self._budget = budget  # the money caps of background work
        self._kv = kv
        self._running: ScheduledRun | None = None
        self.target: str | None = None  # "channel:chat" of the last check-in planned or looked up
        self.last_skip: str | None = None  # why the latest tick was skipped (None: it ran)
        self._refused: str | None = None  # why heartbeat.target is not used, as last logged

    @property
    def running(self) -> bool:
        return self._running is not None and not self._running.done.is_set()

    async def paused(self) -> bool:
        return bool(await self._kv.get(PAUSED_KEY))

    async def pause(self, paused: bool) -> None:
        """Pause or resume check-ins (kept across restarts)."""
        await self._kv.set(PAUSED_KEY, paused)

    async def plan(self, now: datetime, *, asked: bool = False) -> ScheduledRun | Skip:
        """The check-in to run at ``now``, or why this tick is skipped. ``asked``: the owner
        asked for one now (it runs even while paused; every other rule holds)."""
        plan = await self._plan(now, asked=asked)
        self.last_skip = plan.reason if isinstance(plan, Skip) else None
        return plan

    async def _plan(self, now: datetime, *, asked: bool) -> ScheduledRun | Skip:
        if not asked and await self.paused():
            return Skip("paused by the owner")
        if self.running:
            return Skip("the previous heartbeat is still running")
        local = now.astimezone(zone(self.timezone))
        if in_quiet_hours(self.settings.quiet_hours, local):
            return Skip(f"quiet hours ({self.settings.quiet_hours} {self.timezone})")
        try:  # a file saved in another encoding (Latin-1 from a Windows editor) still reads
            tasks = self._file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            tasks = ""
        if not has_tasks(tasks):
            return Skip("HEARTBEAT.md has no tasks")
        home = await self._target()
        if isinstance(home, Refused):
            return Skip(home.reason)
        if home is None:
            return Skip(
                "no chat to deliver to yet (the owner has not written in a DM, and heartbeat.target is unset)"
            )
        chat, chat_type = home.chat, home.chat_type
        if await self._outbox.chat_held(chat.channel, chat.session_key, now.timestamp()):
            return Skip(f"{chat.session_key} is rate-limited")
        spent = await self._usage.tokens_today("heartbeat:")
        if spent >= self.settings.daily_token_budget:
            return Skip(
                f"daily heartbeat budget used ({spent}/{self.settings.daily_token_budget} tokens)"
            )
        principal = Principal(chat.channel, "heartbeat", "heartbeat", Role.OWNER, chat_type)
        if self._budget is not None:
            admission = await self._budget.admit(principal, background=True)
            if admission.refusal is not None:
                return Skip(admission.refusal.reason)
        # the template's examples and hints are comments: they are not the owner's tasks
        tasks = without_comments(tasks).strip()
        prompt = PROMPT.format(tasks=tasks)
        events = await self._rest_of_day(home, now)
        run = ScheduledRun(
            kind=TurnKind.HEARTBEAT,
            session_key=SESSION,
            chat=chat,
            principal=principal,
            prompt=prompt if events is None else prompt + events,
            history_limit=HISTORY_LIMIT,
            authorising_texts=(tasks,),  # the owner wrote HEARTBEAT.md; our template did not
            tainted=events is not None,  # invitations are anyone's words
        )
        self._running = run
        return run

    async def _target(self) -> HomeChat | Refused | None:
        found = await self._chat.find()
        self.target = found.label if isinstance(found, HomeChat) else None
        refused = found.reason if isinstance(found, Refused) else None
        if refused is not None and refused != self._refused:  # said once, not at every tick
            log.warning("heartbeat: %s", refused)
        self._refused = refused
        return found

    async def looked_up_target(self) -> str | None:
        """Where the next check-in goes, looked up now (the control center's Jobs page
        shows it before the first tick)."""
        await self._target()
        return self.target

    async def _rest_of_day(self, home: HomeChat, now: datetime) -> str | None:
        if self._agenda is None:
            return None
        zone = await self._agenda.zone_of(home)
        local = now.astimezone(zone)
        midnight = datetime.combine(local.date() + timedelta(days=1), time(), tzinfo=zone)
        events = await self._agenda.events(local, midnight)
        return None if events is None else CALENDAR.format(zone=zone, events=events)

    def configure(self, settings: HeartbeatSettings) -> None:
        """New ``[heartbeat]`` settings (a reload): the next check-in follows them."""
        self.settings = settings

    async def look_up_target(self) -> None:
        """Where check-ins go, for the control center (``target``)."""
        await self._target()


class HomeSource(Protocol):
    async def get(self) -> HomeChat | None:
        """The owner's home chat (``None``: none known yet)."""

    async def owns(self, chat: ChatRef) -> bool:
        """Whether ``chat`` is a chat of the owner's."""


class OwnersHome:
    """The owner's home chat: the ``home`` config gives the owner's person (``[people.<name>]
    home``), else the direct chat the owner wrote in last, a platform's over a local one
    (the store's: gateway/store/home.py)."""

    def __init__(self, settings: Settings, last: HomeChats, directory: PeopleDirectory) -> None:
        self._configured = owners_home(settings.people, settings.channel_sections())
        self._last = last
        self._directory = directory  # whose an address is

    async def get(self) -> HomeChat | None:
        if self._configured:
            channel, _, chat_id = self._configured.partition(":")
            return HomeChat(ChatRef(channel, chat_id), ChatType.DM)
        return await self._last.get()

    async def owns(self, chat: ChatRef) -> bool:
        """An address of the owner's person (on a platform whose direct chat has the
        person's id, like Telegram's; a local chat), the home config gives them, or the
        owner's home chat as the store has it."""
        address = f"{chat.channel}:{chat.chat_id}"
        if address == self._configured:
            return True
        if (await self._directory.identify(address)).role is Role.OWNER:
            return True
        last = await self._last.get()
        return last is not None and last.label == address

    @classmethod
    def stored(cls, settings: Settings, store: Store) -> OwnersHome:
        """As a command reads it from the store (the gateway's is built with its parts)."""
        sections = settings.channel_sections()
        directory = PeopleDirectory(
            settings.people, sections, store.links, store.kv, scope=settings.session.scope
        )
        return cls(settings, store.homes, directory)


@dataclass(frozen=True, slots=True)
class Refused:
    """``heartbeat.target`` names a chat not known to be the owner's: nothing goes there."""

    reason: str


class OwnersChat:
    """Where the owner is written to unasked: check-ins, the morning briefing, webhooks
    without ``deliver_to``, the money and set-aside notices, a link waiting for them, the
    status page. ``heartbeat.target`` when it names a chat of the owner's (a check-in acts
    with the owner's rights and has the owner's memory in its prompt; config refuses a
    target it knows is someone else's, this one any it does not know as the owner's), else
    the owner's home chat (:class:`OwnersHome`). One for the gateway, told of a changed
    ``heartbeat.target`` by the live reload, so that all of them follow it at once."""

    def __init__(self, target: str | None, homes: HomeSource) -> None:
        self._target = target
        self._homes = homes

    def configure(self, target: str | None) -> None:
        """A new ``heartbeat.target`` (a reload)."""
        self._target = target

    async def find(self) -> HomeChat | Refused | None:
        """The chat, or why ``heartbeat.target`` is refused (``None``: none known yet)."""
        if not self._target:
            return await self._homes.get()
        chat = parse_target(self._target)
        if await self._homes.owns(chat):
            return HomeChat(chat, ChatType.DM)
        return Refused(
            f"heartbeat.target {self._target} is not known as a chat of the owner's (their "
            "own address, the home [people] gives them, or the direct chat they wrote from "
            "last), so no check-in goes there: it would act with the owner's rights and show "
            "the owner's memory"
        )

    async def get(self) -> HomeChat | None:
        """The chat (``None``: none known, or ``heartbeat.target`` is refused)."""
        found = await self.find()
        return found if isinstance(found, HomeChat) else None

    @classmethod
    def stored(cls, settings: Settings, store: Store) -> OwnersChat:
        """As a command reads it from the store (the gateway's is built with its parts)."""
        return cls(settings.heartbeat.target, OwnersHome.stored(settings, store))
