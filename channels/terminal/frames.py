"""What travels between the terminal channel and a chat window: one JSON object per line.

The same frames reach the in-process chat (as objects) and an attached ``switchboard chat``
(over the gateway's local socket, see :mod:`channels.terminal.server`); parsing goes
through pydantic, so a malformed line is refused whole.

Window to gateway: ``submit`` (a message; answered by ``accepted`` once it is journaled, or
``error``), ``ack`` (a delivered message is on screen), ``wait_idle`` (answered by ``idle``
once nothing of the terminal chat is waiting, running or unsent).
Gateway to window: ``hello`` on connect, then ``started``, ``tool``, ``delta``, ``ended``
(live and not durable) and ``message`` (from the durable outbox; acknowledged with ``ack``).
"""

from __future__ import annotations

from typing import Annotated, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

MAX_TEXT = 100_000  # characters of one message from the window
ID_PATTERN = r"^[A-Za-z0-9_-]{8,64}$"


class _Frame(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def line(self) -> bytes:
        return self.model_dump_json().encode() + b"\n"


# -- window to gateway ----------------------------------------------------------------------


class Submit(_Frame):
    type: Literal["submit"] = "submit"
    id: str = Field(pattern=ID_PATTERN)  # chosen by the window; a resend is a duplicate
    text: str = Field(min_length=1, max_length=MAX_TEXT)


class Ack(_Frame):
    type: Literal["ack"] = "ack"
    id: str


class WaitIdle(_Frame):
    type: Literal["wait_idle"] = "wait_idle"


# -- gateway to window ----------------------------------------------------------------------


class Running(_Frame):
    turn: str
    question: str


class Hello(_Frame):
    type: Literal["hello"] = "hello"
    version: str
    agent: str
    model: str
    user: str
    running: tuple[Running, ...] = ()  # turns of the terminal chat already under way
    # What runs the gateway: `switchboard run`, or a `switchboard chat` that closes with its
    # window (a window attached to it carries on without it, see gateway/cli/chat/command.py).
    host: Literal["run", "chat"] = "run"


class Accepted(_Frame):
    type: Literal["accepted"] = "accepted"
    id: str
    status: Literal["new", "duplicate", "refused", "ignored"]  # gateway.core.bus.Accepted


class Error(_Frame):
    type: Literal["error"] = "error"
    id: str | None = None
    message: str


class Idle(_Frame):
    type: Literal["idle"] = "idle"


class Started(_Frame):
    type: Literal["started"] = "started"
    turn: str
    question: str
    resumed: bool = False
    ids: tuple[str, ...] = ()  # the messages it answers (as submitted)


class Tool(_Frame):
    type: Literal["tool"] = "tool"
    turn: str
    name: str


class Delta(_Frame):
    type: Literal["delta"] = "delta"
    turn: str
    text: str


class Ended(_Frame):
    type: Literal["ended"] = "ended"
    turn: str
    answered: bool


class Message(_Frame):
    type: Literal["message"] = "message"
    id: str  # the outbox's idempotency key
    kind: str  # gateway.core.messages.OutboundKind's value
    text: str
    turn: str | None = None
    files: tuple[str, ...] = ()


LiveFrame = Started | Tool | Delta | Ended
FromWindow = Annotated[Submit | Ack | WaitIdle, Field(discriminator="type")]
ToWindow = Annotated[
    Hello | Accepted | Error | Idle | Started | Tool | Delta | Ended | Message,
    Field(discriminator="type"),
]
from_window: TypeAdapter[Submit | Ack | WaitIdle] = TypeAdapter(FromWindow)
to_window: TypeAdapter[Hello | Accepted | Error | Idle | LiveFrame | Message] = TypeAdapter(
    ToWindow
)


class Viewer(Protocol):
    """A chat window showing the terminal chat: the in-process one, or an attached one."""

    def show(self, frame: LiveFrame) -> None:
        """Show live progress (started, tool, delta, ended); not durable."""

    async def deliver(self, message: Message) -> bool:
        """Show a message from the outbox; True once it is on screen, False if the window
        went away first."""
