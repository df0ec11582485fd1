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
    ``tools.approvals = "ask"`` the turn then waits for their decision (agent.approval)."""

    reason: str
    askable: bool = False
    authority: Role = Role.ADMIN  # ADMIN: the owner or the channel's admins; OWNER: the owner


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
    meter: TurnUsage = field(default_factory=TurnUsage)  # every model call the turn caused
    # Tools this turn may call whose schemas are not sent until find_tools surfaces them
    # (past the prompt budget for MCP tools), and the names it surfaced so far.
    deferred: dict[str, ToolSpec] = field(default_factory=dict)
    found: list[str] = field(default_factory=list)
    files: list[Attachment] = field(default_factory=list)  # go out with the turn's answer
    # The skills the turn loaded, and the tools, hosts and paths they leave it (narrowed
    # by each one: agent.tools.bounds).
    bounds: Bounds = field(default_factory=Bounds)


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
    # Words that, in the user's own message, authorise this side effect in a turn that has
    # read untrusted content (see agent.policy). Empty: not guarded by taint.
    intent: ClassVar[tuple[str, ...]] = ()
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

    def refused_anyway(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        """Why this call would be refused whatever an approver decided (a protected file),
        so that nobody is asked to approve it; ``None`` when an approval would let it run."""
        return None

    @abstractmethod
    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...


def schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A compact object schema that rejects unknown arguments."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def asked_for(texts: Iterable[str], words: Iterable[str]) -> bool:
    """Whether the user's own words ask for an action: any of ``words`` as a whole word or
    phrase (plural and -ed/-ing forms count), so "address" does not count as "add"."""
    said = " ".join(texts).lower()
    return any(_word_pattern(word).search(said) for word in words)


def _word_pattern(word: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(word.lower())}(?:s|es|d|ed|ing)?(?!\w)")
