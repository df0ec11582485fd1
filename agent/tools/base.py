"""What a tool is, what it gets when it runs, and what it returns."""

from __future__ import annotations

import enum
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from agent.llm.metered import Charge, TurnUsage
from agent.llm.types import ImagePart, ToolSpec
from agent.tools.bounds import Bounds
from agent.workspace import Workspace
from gateway.core.messages import Attachment, ChatRef, InboundMessage, OutboundMessage
from gateway.core.principal import Principal, Role
from gateway.core.services import Services
from gateway.core.turns import TurnKind


class Effect(enum.StrEnum):
    """What a tool can do to the world; policy and safe mode decide on this."""

    READ = "read"  # reads the workspace or the web; no side effects
    WRITE = "write"  # changes files or memory in the workspace
    EXEC = "exec"  # runs programs
    SEND = "send"  # reaches people (chat messages, email)
    SCHEDULE = "schedule"  # creates future work (cron jobs)
    REMOTE = "remote"  # acts on another system (an MCP server's tool not marked read-only)


class ToolError(Exception):
    """Raise inside a tool to return a clean error to the model (no traceback)."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    content: str
    is_error: bool = False
    untrusted: bool = False  # text from outside: a web page, an email, a command's output
    images: tuple[ImagePart, ...] = ()  # pictures for a vision-capable model (MCP tools)
    # Files the tool made for this turn (a page's screenshot): images are shown to a vision
    # model with the result, and every file goes to the user with the turn's answer.
    files: tuple[Attachment, ...] = ()

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(message, is_error=True)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a call may not run. ``askable``: the policy refuses it, but the owner (or, for
    ``authority = "admin"``, the channel's admins too) could allow this one call; with
    ``tools.approvals = "ask"`` the turn then waits for their decision (agent.approval).
    ``confirmable``: the person of this turn may allow it themselves, in their own chat (a
    side effect after outside content in the owner's or an admin's own turn): it is asked
    with either ``tools.approvals``, since it brings nobody else a request. ``shown``: lines
    for the approvers' verbatim block (what the turn read, the person's words), never for
    the prose around it: they hold text others wrote."""

    reason: str
    askable: bool = False
    authority: Role = Role.ADMIN  # ADMIN: the owner or the channel's admins; OWNER: the owner
    shown: str = ""
    confirmable: bool = False

    def joined(self, other: Refusal | None) -> Refusal:
        """This refusal and ``other`` as one request: both reasons, the stricter authority
        (an approval waives every check that asked, so its approver must be entitled to
        all of them)."""
        if other is None:
            return self
        owner = Role.OWNER in (self.authority, other.authority)
        return Refusal(
            f"{self.reason} Also: {other.reason}",
            self.askable and other.askable,
            Role.OWNER if owner else Role.ADMIN,
            "\n".join(s for s in (self.shown, other.shown) if s),
            self.confirmable and other.confirmable,
        )


@dataclass(frozen=True, slots=True)
class Outside:
    """Outside content a turn read: ``kind`` in our own words, for the prose approvers read
    ("a web page", "another person's memory"); ``detail`` which one (an address, a path),
    shown to them only verbatim, since others chose it."""

    kind: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Reach:
    """What approvers are shown of a call besides its arguments (agent.approval): ``text``,
    what it could read, write or act on (``exec``: its sandbox's view; ``browser``: the
    element and the form it would send), shown inside the request's verbatim block; ``files``,
    pictures of it, sent to them with the request (``browser``: the page with the element
    marked)."""

    text: str = ""
    files: tuple[Attachment, ...] = ()


Sender = Callable[[OutboundMessage], Awaitable[None]]


async def _no_audit(kind: str, **detail: object) -> None:
    return None


class Audit(Protocol):
    async def __call__(self, kind: str, **detail: object) -> None: ...


@dataclass(slots=True)
class TurnState:
    """Mutable facts about the running turn that tools and guards share."""

    sent_texts: list[str] = field(default_factory=list)  # what `message` already delivered
    read_untrusted: bool = False  # the turn has seen content from outside
    outside: list[Outside] = field(default_factory=list)  # which, as far as known
    # Web addresses the turn saw verbatim: in the person's own words or in what it read
    # (agent.web.seen); a tainted turn fetches only these without approval.
    seen: set[str] = field(default_factory=set)
    meter: TurnUsage = field(default_factory=TurnUsage)  # every model call the turn caused
    # Tools this turn may call whose schemas are not sent until find_tools surfaces them
    # (past the prompt budget for MCP tools), and the names it surfaced so far.
    deferred: dict[str, ToolSpec] = field(default_factory=dict)
    found: list[str] = field(default_factory=list)
    files: list[Attachment] = field(default_factory=list)  # go out with the turn's answer
    # The skills the turn loaded, and the tools, hosts and paths they leave it (narrowed
    # by each one: agent.tools.bounds).
    bounds: Bounds = field(default_factory=Bounds)

    def read(self, what: Outside) -> None:
        """The turn read outside content ``what``: it is tainted from now on."""
        self.read_untrusted = True
        if what not in self.outside:
            self.outside.append(what)


@dataclass(frozen=True, slots=True)
class ToolContext:
    turn_id: str
    call_id: str
    session_key: str
    chat: ChatRef
    principal: Principal
    workspace: Workspace
    send: Sender
    state: TurnState
    inbound: InboundMessage | None = None
    # What the user wrote in this turn (all folded messages): the only text that may
    # authorise a side effect such as a new email recipient.
    user_texts: tuple[str, ...] = ()
    audit: Audit = _no_audit
    channels: tuple[str, ...] = ()  # channels configured on this gateway
    services: Services = field(default_factory=Services)
    unattended: bool = False  # heartbeat, cron or background turn: no user is waiting
    turn_kind: TurnKind = TurnKind.CHAT
    agent: str = "main"  # the agent this turn belongs to
    # The owner (or an admin) approved this exact call: checks that asked are waived.
    approved: bool = False

    @property
    def idempotency_key(self) -> str:
        return f"{self.turn_id}:{self.call_id}"

    @property
    def charge(self) -> Charge:
        """Who pays for a model call this tool makes (a page condensed for web_fetch): the
        turn, so it counts against the turn's token cap and the person's allowance."""
        return Charge(self.session_key, self.turn_id, self.principal.person, self.state.meter)


class Tool(ABC):
    """A JSON-schema tool. Subclasses set the class attributes and implement :meth:`run`."""

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]
    effect: ClassVar[Effect] = Effect.READ
    # Tools meant to be called repeatedly with the same arguments opt out of deduplication.
    repeatable: ClassVar[bool] = False
    # The result depends on the moment, not only on the arguments and on what this turn did
    # (jobs fire, other chats change things): a repeat is never skipped.
    time_sensitive: ClassVar[bool] = False
    # For a tool with an ``action`` argument: the actions that only read (see changes_state).
    read_actions: ClassVar[frozenset[str]] = frozenset()
    # The arguments that name what a call acts on (a path, a recipient, a job id, a url): the
    # tool ledger keeps their values with the call, so the claims check tells "I deleted
    # report.pdf" from a write to todo.md (agent.guards.claims).
    targets: ClassVar[tuple[str, ...]] = ()
    # Words a person uses asking for this kind of action: after outside content they are
    # only a hint for the approver (agent.policy), never an authorisation.
    intent: ClassVar[tuple[str, ...]] = ()
    # What a call does, in words for the approver, when outside content could have asked
    # for it (see guarded_action); "" says it from the effect.
    does: ClassVar[str] = ""
    # Its results are text the model did not write (a page, search results): the web
    # addresses in them count as seen by the turn (agent.web.seen).
    shows_links: ClassVar[bool] = False
    # Who may use it at all; ``None``: the policy decides alone.
    roles: ClassVar[frozenset[Role] | None] = None
    group_chats: ClassVar[bool] = True  # offered in group chats (subject to the policy)
    # Where the tool comes from: "" for built-in tools, an MCP server's name for its tools.
    # Tools with a source may be held back behind find_tools when there are many.
    source: ClassVar[str] = ""
    # Rarely used: its schema waits behind find_tools (named in its description), so the
    # tokens of every model call go to the tools most turns use.
    rarely_used: ClassVar[bool] = False
    # Another tool whose work this one does under the hood (a skill's script is a command,
    # like exec): the person's policy refuses this one wherever it refuses that one.
    runs_as: ClassVar[str] = ""

    @property
    def side_effects(self) -> bool:
        """Side-effecting calls are recorded in the idempotency ledger before they run."""
        return self.effect is not Effect.READ

    def available(self) -> bool:
        """Whether the tool has anything to work with now (``get_skill`` without skills has
        not); one that has not is left out of the turn's tools, costing no tokens."""
        return True

    def changes_state(self, args: dict[str, Any]) -> bool:
        """Whether this call may change what other calls read: once it ran, earlier results
        of the turn may be stale and a repeated call runs again (see agent.guards.dedupe)."""
        return self.side_effects and args.get("action") not in self.read_actions

    async def approval_refusal(self, args: dict[str, Any], ctx: ToolContext) -> Refusal | None:
        """A refusal of this call that the owner could waive, found before it runs (a
        recipient a member typed, a member's cross-chat send, an event someone else
        organises: the calendar asks its server, a browser click that sends a form), so the
        turn can wait for approval before anything starts. ``run`` still enforces it unless
        ``ctx.approved``."""
        return None

    async def reach(self, args: dict[str, Any], ctx: ToolContext) -> Reach:
        """What approvers are shown of this call besides its arguments; nothing when the
        arguments say it all."""
        return Reach()

    def guarded_action(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        """What this call does that outside content could have asked for, in our own words
        for the approver ("runs a command"), or ``None`` when it does nothing of the kind (a
        read, a reply in this chat). In a turn that has read outside content such a call
        runs only with an approval (agent.policy). Every side effect is guarded unless its
        tool says otherwise."""
        if not self.changes_state(args):
            return None
        return self.does or _DOES[self.effect]

    def read_from(self, args: dict[str, Any]) -> Outside:
        """What outside content a call with ``args`` reads, when its result is marked so."""
        return Outside(f"what {self.name} returned")

    async def refused_anyway(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        """Why this call would be refused whatever an approver decided (a protected file,
        arguments it cannot run with, an event that is not on the calendar server), so that
        nobody is asked to approve it; ``None`` when an approval would let it run."""
        return None

    @abstractmethod
    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...


_DOES = {
    Effect.READ: "reads",
    Effect.WRITE: "changes files or memory",
    Effect.EXEC: "runs a program",
    Effect.SEND: "sends something to someone",
    Effect.SCHEDULE: "creates work for later",
    Effect.REMOTE: "acts on another system",
}


def schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A compact object schema that rejects unknown arguments."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def asked_for(texts: Iterable[str], words: Iterable[str]) -> bool:
    """Whether the user's own words seem to ask for an action: any of ``words`` as a whole
    word or phrase (plural and -ed/-ing forms count), so "address" does not count as "add".
    A hint for an approver, never an authorisation: "tell me what this page says" holds
    "tell" and asks for no message."""
    said = " ".join(texts).lower()
    return any(_word_pattern(word).search(said) for word in words)


def _word_pattern(word: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(word.lower())}(?:s|es|d|ed|ing)?(?!\w)")
