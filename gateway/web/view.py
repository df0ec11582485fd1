"""What the web server reads of the running gateway, and what the owner may change there.

The web layer depends on this small interface, not on the
:class:`~gateway.runtime.app.Gateway` class that implements it, so the runtime can start
the server without the server reaching back into the runtime. Every change goes through
the code the chat commands and the command line use (gateway/runtime/control.py says
which), so a decision means the same wherever it is made; ``by`` says who made it, for the
audit log ("web:owner").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from gateway.config.reference.form import FormSection
from gateway.config.settings import Settings
from gateway.core.channel import Channel
from gateway.core.services import ScheduledItem
from gateway.core.text.merge import Merge
from gateway.core.workspace_files import FileText
from gateway.store import PairingRequest, Store

# What a conversation is doing: nothing, a turn running (or being stopped), or a turn
# parked until an approval request is decided.
Activity = Literal["idle", "running", "stopping", "waiting"]
JobAction = Literal["pause", "resume", "run", "delete"]
HeartbeatAction = Literal["pause", "resume", "run"]


@dataclass(frozen=True, slots=True)
class WorkInProgress:
    running_turns: int  # turns running now
    queued_messages: int  # messages behind a running turn of their chat


@dataclass(frozen=True, slots=True)
class ModelState:
    """One configured model and how it fares (fallback models: ``llm.fallbacks``)."""

    name: str  # "gpt-4o (openai)"
    label: str  # "openai gpt-4o at https://api.openai.com/v1": the trace's and log's name
    settings: tuple[str, ...]  # where it is configured: "llm", "llm.fallbacks[0]", "agents.x"
    answered_last: bool  # the gateway's latest model answer came from this one
    last_answer_at: float | None  # Unix time of its latest answer since the start
    cooling_until: float | None  # Unix time its cooldown ends; None: not cooling down
    last_error: str | None  # why it failed, while it cools down
    priced: bool  # [llm.prices] or the shipped table has its price now


@dataclass(frozen=True, slots=True)
class CapSpend:
    """How much of one money cap its current day or month has spent."""

    key: str  # the setting: "limits.gateway_daily_usd", "agents.work.monthly_usd"
    spent_usd: float
    limit_usd: float
    resets_at: float  # Unix time the next day or month begins


@dataclass(frozen=True, slots=True)
class SettingsChange:
    """What a change of settings did (:meth:`GatewayView.change_settings`). With any
    ``errors`` nothing was written or applied."""

    errors: dict[str, str] = field(default_factory=dict)  # key ("" for the whole) -> why
    saved: bool = False  # config.toml (a secret: .env) was written
    changed: tuple[str, ...] = ()  # the keys this change set (or would set)
    applied: tuple[str, ...] = ()  # of them, those in effect now (or that would be)
    restart: tuple[str, ...] = ()  # of them, those that wait for a restart
    problems: tuple[str, ...] = ()  # applied, but something did not work (a channel's start)


ACCESS_LISTS = ("owners", "admins", "allow_from")  # of a channel's section


@dataclass(frozen=True, slots=True)
class Revoked:
    """What a revocation of someone's access did (:meth:`GatewayView.revoke_person`, ``/pair
    revoke``, ``switchboard pairing revoke``: gateway/runtime/intake/revoke.py); nothing
    (:attr:`done` false) when there was nothing it could take away, :meth:`why_not` says
    why."""

    channel: str
    sender_id: str
    pairing: bool = False  # their approved pairing was revoked
    lists: tuple[str, ...] = ()  # the lists of config.toml they were taken out of
    still: tuple[str, ...] = ()  # lists set elsewhere that still name them, and where
    notes: tuple[str, ...] = ()  # what else still lets them in, or as more than a member
    refused: str | None = None  # why nothing was changed though something could have been

    @property
    def done(self) -> bool:
        return self.pairing or bool(self.lists)

    @property
    def who(self) -> str:
        return f"{self.channel} user {self.sender_id}"

    def summary(self) -> str:
        """``Revoked telegram user 555: their pairing, their place in telegram.owners
        (config.toml).``"""
        places = f"their place in {' and '.join(self.lists)} (config.toml)" if self.lists else ""
        revoked = [what for what in ("their pairing" if self.pairing else "", places) if what]
        return f"Revoked {self.who}: {', '.join(revoked)}."

    def why_not(self) -> str:
        """Why nothing was revoked."""
        if self.refused is not None:
            return f"not revoked: {self.refused}"
        if self.still:
            return f"not revoked: {'; '.join(self.still)}"
        lists = f"{self.channel}.{', '.join(ACCESS_LISTS)}"
        return f"{self.who} is not paired and not in {lists}: nothing to revoke"

    def text(self) -> str:
        """All of it, as a chat answer (and the control center's message) shows it."""
        if not self.done:
            why = self.why_not()
            return f"{why[0].upper()}{why[1:]}."
        lines = [self.summary()]
        lines += [f"Still: {line}." for line in self.still]
        lines += [f"Note: {note}." for note in self.notes]
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class SessionActivity:
    state: Activity
    queued: int  # messages waiting behind the running or parked turn


@dataclass(frozen=True, slots=True)
class HeartbeatState:
    enabled: bool  # heartbeat.enabled
    paused: bool  # paused by the owner (kept across restarts)
    last_skip: str | None  # why its latest tick did not run (None: it ran, or none yet)
    target: str | None = None  # where its check-ins go now ("channel:chat"; None: nowhere yet)


@dataclass(frozen=True, slots=True)
class LinkedPerson:
    """A person with more than one address (gateway/runtime/people/directory.py)."""

    key: str  # the address their usage and memory are kept under
    name: str  # the [people] key that lists them ("" : linked with /link)
    addresses: tuple[str, ...]
    role: str  # the highest of their addresses'
    one_conversation: bool  # their direct chats are one conversation across channels
    listed: tuple[str, ...] = ()  # the addresses config lists together (changed there only)


class WorkspaceConflict(Exception):
    """The file changed since the editor read it (the agent wrote a note meanwhile) in a part
    the owner changed too: nothing was saved; ``current`` is what it holds now, ``merge``
    the owner's text merged with it, each conflict for the owner to decide."""

    def __init__(self, current: FileText, merge: Merge) -> None:
        super().__init__(f"{current.name} changed since it was opened")
        self.current = current
        self.merge = merge


class NotEditable(Exception):
    """Not one of the owner's workspace files, or too long to edit from the web."""


class GatewayView(Protocol):
    @property
    def settings(self) -> Settings: ...

    @property
    def store(self) -> Store: ...

    @property
    def channels(self) -> Mapping[str, Channel]: ...

    def work_in_progress(self) -> WorkInProgress: ...

    def model_states(self) -> list[ModelState]:
        """Every configured model, primary first: which answered last, which cool down."""

    def degraded(self) -> str | None:
        """Why this node is paused, riding out a problem it recovers from by itself (a
        cluster node that lost its database); ``None``: it is not."""

    def schedule(self) -> list[ScheduledItem] | None:
        """Heartbeat and scheduled jobs, or None when this gateway runs no scheduler."""

    async def spending(self) -> list[CapSpend]:
        """The money caps that are set (the gateway's, background work's, each agent's,
        and those ``[people]`` set), with what each has spent."""

    async def decide_pairing(self, code: str, *, approve: bool, by: str) -> PairingRequest | None:
        """Approve or deny a pending pairing code; None when no such request is pending."""

    def settings_form(self) -> list[FormSection]:
        """Every setting with its current value (secrets never shown), type, documentation
        and whether a change applies at once."""

    async def change_settings(
        self,
        values: Mapping[str, str],
        *,
        by: str,
        check: bool = False,
        clear: Sequence[str] = (),
    ) -> SettingsChange:
        """Change settings as a form posts them (dotted key: text); write config.toml
        (comments kept; a secret into .env) and apply the configuration live where it can
        be. ``clear``: secrets to remove (an empty secret keeps it). ``check``: say what it
        would do, changing nothing. ``by``: who, for the audit log."""

    def restart_offered(self) -> bool:
        """Whether :meth:`restart` can start a new process (``switchboard run``)."""

    async def restart(self, *, by: str) -> bool:
        """Stop and start the gateway in a new process (the keys that wait for a restart);
        False when this gateway cannot (it was not started by ``switchboard run``)."""

    def session_activity(self, session_key: str) -> SessionActivity:
        """Whether a turn of the conversation runs here now, or waits for an approval."""

    async def stop_turn(self, session_key: str, *, by: str) -> str:
        """Stop the conversation's running turn as ``/stop`` does; what happened."""

    async def start_fresh(self, session_key: str, *, by: str) -> str:
        """Start the conversation afresh as ``/new`` does; what happened."""

    async def revoke_person(self, channel: str, sender_id: str, *, by: str) -> Revoked:
        """Take an address's access away as ``switchboard pairing revoke`` does: its pairing
        and its place in its channel's lists in config.toml (applied at once); what was
        revoked, and what still lets them in."""

    async def linked_people(self) -> list[LinkedPerson]:
        """Everyone with more than one address: config's and those linked by ``/link``."""

    async def link_addresses(self, address: str, to: str, *, by: str) -> str:
        """Make ``address`` one of the person ``to`` is (the owner may give any role);
        what happened. Raises ValueError with the reason when it cannot be."""

    async def unlink_address(self, address: str, *, by: str) -> str:
        """Make ``address`` its own person again, as ``/unlink`` does; what happened.
        Raises ValueError with the reason when it cannot be (linked in config)."""

    async def confirm_link(self, code: str, *, by: str) -> str:
        """Confirm a link waiting for the owner, as ``/link confirm CODE`` does."""

    async def decide_approval(self, request_id: str, *, approve: bool, by: str) -> str:
        """Approve or deny a waiting request as ``/approve ID`` does, the owner having been
        shown every argument in full; what happened."""

    async def change_job(self, job_id: str, action: JobAction, *, by: str) -> bool:
        """Pause, resume, run now or delete a scheduled job; whether it could be."""

    async def heartbeat_state(self) -> HeartbeatState: ...

    async def change_heartbeat(self, action: HeartbeatAction, *, by: str) -> bool:
        """Pause, resume or run the heartbeat now; whether it could be (it is on)."""

    async def save_workspace_file(
        self, name: str, text: str, *, base: str, base_text: str | None, by: str
    ) -> FileText:
        """Write one of the owner's workspace files (gateway/core/workspace_files.py): the
        editor's ``text``, made from the version whose digest is ``base`` (``base_text``),
        merged with what changed the file since (gateway/core/text/merge.py). What was written;
        :class:`WorkspaceConflict` when both changed the same part, :class:`NotEditable`
        when it is not such a file."""
