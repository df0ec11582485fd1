"""What the owner's control center changes, through the code the chats and the CLI use.

One place decides what each action means, wherever it is asked for:

- stop a turn, start a conversation afresh: :class:`~gateway.runtime.dispatch.controls.Controls`
  (``/stop``, ``/new``); a fresh start from the page also tells the conversation's chat, in
  a notice queued with it;
- approve or deny an approval request: :meth:`Approvals.resolve` (``/approve ID``);
- pairing: :mod:`gateway.runtime.intake.pairing` (``switchboard pairing``, ``/pair``);
  revoking someone's access: :mod:`gateway.runtime.intake.revoke` (``switchboard pairing
  revoke``, ``/pair revoke``);
- people's addresses linked and unlinked: :class:`~gateway.runtime.people.linking.Linking`
  (``/link``, ``/unlink``);
- scheduled jobs: :class:`~gateway.runtime.schedule.jobs.JobBook` (the ``cron`` tool;
  ``switchboard cron`` calls the same store methods), the heartbeat: the scheduler;
- workspace files: written under the same lock the agent's memory notes take
  (``agent/memory.py:exclusive``), so a note the agent adds meanwhile is never lost: a save
  of a file that changed since the page read it is merged with that change
  (gateway/core/text/merge.py), and refused when both changed the same part (the page shows
  each conflict for the owner to decide).

The page acts as the owner at the machine (like the terminal and the web chat: whoever has
the owner's session), and every action is audited with who asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from agent.memory import exclusive
from gateway.core.addressing import PERSON_CHANNEL, chat_of
from gateway.core.messages import ChatRef, ChatType, OutboundKind, OutboundMessage, new_id
from gateway.core.principal import Principal, Role
from gateway.core.system.fileutil import write_atomic
from gateway.core.workspace_files import FileText, digest, kind_of, path_of, read, rebased
from gateway.runtime.dispatch.controls import Controls
from gateway.runtime.dispatch.dispatcher import Dispatcher, SessionView
from gateway.runtime.intake.pairing import PairingDesk
from gateway.runtime.intake.revoke import Revocation
from gateway.runtime.people.linking import Linking, LinkRefused
from gateway.runtime.schedule.heartbeat import Heartbeat
from gateway.runtime.schedule.jobs import JobBook
from gateway.runtime.schedule.scheduler import Scheduler
from gateway.runtime.turns.approvals import Approvals
from gateway.store import AuditLog, Journal, Outbox, PairingRequest, PersonLinks
from gateway.web.view import (
    Activity,
    HeartbeatAction,
    HeartbeatState,
    JobAction,
    LinkedPerson,
    NotEditable,
    Revoked,
    SessionActivity,
    WorkspaceConflict,
)

log = logging.getLogger(__name__)

PAGE = "web"  # the audit log's channel for what the page does


def owner_as(by: str) -> Principal:
    """As whom the page acts: the owner, named as ``by`` names who acted ("web:owner"), on no
    channel with access settings (so, like the terminal, may decide any approval request:
    ``Approvals._may``)."""
    channel, _, sender = by.partition(":")
    return Principal(
        channel or PAGE, sender or "owner", "the owner (control center)", Role.OWNER, ChatType.DM
    )


NOTHING_RUNS = "Nothing is running in this conversation right now."
STARTED_FRESH = (
    "This conversation was started fresh from the control center: I no longer have what we "
    "said before in mind."
)


class OwnerControls:
    def __init__(
        self,
        *,
        pairing: PairingDesk,
        revocation: Revocation,
        links: PersonLinks,
        audit: AuditLog,
        dispatcher: Dispatcher,
        controls: Controls,
        approvals: Approvals,
        jobs: JobBook,
        scheduler: Scheduler,
        heartbeat: Heartbeat,
        workspace: Path,
        on_outbound: Callable[[str], None],
        linking: Linking,
        journal: Journal,
        outbox: Outbox,
        chat_channels: tuple[str, ...],
    ) -> None:
        self._pairing = pairing
        self._revocation = revocation
        self._links = links
        self._audit_log = audit
        self._linking = linking
        self._dispatcher = dispatcher
        self._controls = controls
        self._approvals = approvals
        self._jobs = jobs
        self._scheduler = scheduler
        self._heartbeat = heartbeat
        self._workspace = workspace
        self._on_outbound = on_outbound  # a message was queued on a channel: send it now
        self._journal = journal
        self._outbox = outbox
        self._chat_channels = chat_channels  # the channels people write on (not programs')

    # -- conversations ----------------------------------------------------------------------

    def activity(self, session_key: str) -> SessionActivity:
        view = SessionView(self._dispatcher, session_key)
        queued = len(view.queued())
        state: Activity = "waiting" if view.parked is not None else "idle"
        if view.running is not None:
            state = "stopping" if view.running.stop_requested.is_set() else "running"
        return SessionActivity(state, queued)

    async def stop_turn(self, session_key: str, *, by: str) -> str:
        stopped = await self._controls.stop(SessionView(self._dispatcher, session_key), by=by)
        await self._audit("control-stop", by, session=session_key, stopped=stopped)
        if stopped is None:
            return NOTHING_RUNS
        return "Stopping: the chat is told what it had done." if stopped else "Already stopping."

    async def start_fresh(self, session_key: str, *, by: str) -> str:
        """As ``/new`` does; the chat is told, in a notice queued with the fresh start (the
        person there would otherwise go on, not knowing the assistant forgot)."""
        view = SessionView(self._dispatcher, session_key)
        chat = await self._chat_of(session_key)
        notices = []
        if chat is not None:
            notices.append(
                OutboundMessage(
                    channel=chat.channel,
                    chat_id=chat.chat_id,
                    thread_id=chat.thread_id,
                    text=STARTED_FRESH,
                    kind=OutboundKind.NOTICE,
                    idempotency_key=f"started-fresh:{new_id()}",  # once per fresh start
                )
            )
        text = await self._controls.start_afresh(view, by=by, notices=notices)
        told = None if chat is None else f"{chat.channel}:{chat.chat_id}"
        await self._audit("control-new", by, session=session_key, told=told)
        if chat is None:
            return text
        self._on_outbound(chat.channel)
        return f"{text} The chat is told so."

    async def _chat_of(self, session_key: str) -> ChatRef | None:
        """Where the people of a conversation are: the chat its person wrote from last
        (the journal, a week), else the chat the session's key names (told apart as the
        outbox sent there, a month; or as it reads, when nothing in it can be read two
        ways), a person's conversation across channels where they are reached; ``None`` for
        the gateway's own sessions (jobs, the heartbeat, programs, agents)."""
        found = await self._journal.last_chat(session_key, self._chat_channels)
        if found is not None:
            return found
        chat = chat_of(session_key)
        channel, _, rest = chat.partition(":")
        if channel == PERSON_CHANNEL:
            directory = self._linking.directory
            return await directory.reach(await directory.identify(rest))
        if channel not in self._chat_channels or not rest:
            return None
        sent = await self._outbox.last_chat(chat)
        if sent is not None:
            return sent
        return None if ":" in rest else ChatRef(channel, rest)

    # -- people and approvals ---------------------------------------------------------------

    async def decide_pairing(self, code: str, *, approve: bool, by: str) -> PairingRequest | None:
        request = await self._pairing.decide(code, approve=approve, by=by)
        if request is not None:
            self._on_outbound(request.channel)  # deliver the welcome now
        return request

    async def revoke(self, channel: str, sender_id: str, *, by: str) -> Revoked:
        return await self._revocation.revoke(channel, sender_id, by=by)

    async def linked_people(self) -> list[LinkedPerson]:
        directory = self._linking.directory
        candidates = [*directory.configured_addresses()]
        for link in await self._links.listing():
            candidates += [link.person, link.address]
        people: dict[str, LinkedPerson] = {}
        for address in dict.fromkeys(candidates):
            identity = await directory.identify(address)
            if identity.linked and identity.person not in people:
                people[identity.person] = LinkedPerson(
                    identity.person,
                    identity.name,
                    identity.addresses,
                    identity.role.value,
                    identity.one_conversation,
                    identity.listed,
                )
        return list(people.values())

    async def link(self, address: str, to: str, *, by: str) -> str:
        try:
            return await self._linking.link(address, to, by=by)
        except LinkRefused as exc:
            raise ValueError(str(exc)) from None

    async def unlink(self, address: str, *, by: str) -> str:
        try:
            return await self._linking.unlink(address, by=by)
        except LinkRefused as exc:
            raise ValueError(str(exc)) from None

    async def confirm_link(self, code: str, *, by: str) -> str:
        return await self._linking.confirm(code, by=by)

    async def decide_approval(self, request_id: str, *, approve: bool, by: str) -> str:
        principal = owner_as(by)
        return await self._approvals.resolve(
            request_id, principal, approve=approve, shown_whole=True
        )

    # -- jobs and the heartbeat -------------------------------------------------------------

    async def change_job(self, job_id: str, action: JobAction, *, by: str) -> bool:
        change = {
            "pause": self._jobs.pause_job,
            "resume": self._jobs.resume_job,
            "run": self._jobs.run_job_now,
            "delete": self._jobs.remove_job,
        }[action]
        done = await change(job_id, owner_as(by))
        await self._audit(f"job-{action}", by, job=job_id, done=done)
        return done

    async def heartbeat_state(self) -> HeartbeatState:
        return HeartbeatState(
            enabled=self._heartbeat.settings.enabled,
            paused=await self._heartbeat.paused(),
            last_skip=self._heartbeat.last_skip,
            target=await self._heartbeat.looked_up_target(),
        )

    async def change_heartbeat(self, action: HeartbeatAction, *, by: str) -> bool:
        if not self._heartbeat.settings.enabled:
            return False
        if action == "run":
            done = self._scheduler.beat_now()
        else:
            await self._heartbeat.pause(action == "pause")
            done = True
        await self._audit(f"heartbeat-{action}", by, done=done)
        return done

    # -- workspace files --------------------------------------------------------------------

    async def save_file(
        self, name: str, text: str, *, base: str, base_text: str | None, by: str
    ) -> FileText:
        saved = await asyncio.to_thread(self._write, name, text, base, base_text)
        await self._audit(
            "workspace-edited",
            by,
            path=name,
            before=base,
            after=saved.digest,
            chars=len(saved.text),
            merged=saved.text != text,
        )
        log.info("%s edited by %s", name, by)
        return saved

    def _write(self, name: str, text: str, base: str, base_text: str | None) -> FileText:
        path = path_of(self._workspace, name)
        if path is None:
            raise NotEditable(f"{name} is not a bootstrap, memory or skill file")
        # the notes the agent writes are changed under its lock (bootstrap files and skills are
        # the owner's alone: no lock file beside them)
        agents = kind_of(name) in ("memory", "daily", "person", "group")
        with exclusive(path) if agents else contextlib.nullcontext():
            current = read(self._workspace, name)
            if current is None:
                raise NotEditable(f"{name} is gone")
            if not current.whole:
                raise NotEditable(f"{name} is too long to edit here")
            merged = rebased(current, text, base=base, base_text=base_text)
            if merged.text is None:
                raise WorkspaceConflict(current, merged)
            text = merged.text
            data = text.encode("utf-8")
            write_atomic(path, data)
        return FileText(name, text, digest(data), whole=True)

    async def _audit(self, kind: str, by: str, **detail: object) -> None:
        await self._audit_log.record(kind, channel=PAGE, sender_id=by, detail=dict(detail))
