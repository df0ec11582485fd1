"""A chat completion waiting for its turn: what the turn streams and sends, in order.

The turn is bound to the request when it starts (the turn's activity names the platform
ids of the messages it answers). Then its streamed text, its tool steps and the messages
the outbox delivers for it arrive here as :class:`Piece`; a reply or failure notice ends
it, as does the turn's end without an answer; a failed turn's notice is no answer, but
the reason for an error. The outbox's messages are the answer; what
was streamed is a preview of it, completed at the end (:meth:`StreamText.message`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

from gateway.config.connect import ApiToken
from gateway.core.messages import new_id


class AlreadyAnswered(Exception):
    """The request repeats one received before (its Idempotency-Key) whose answer this
    process no longer has (it is in the session's history); ``other``: the key came with
    another question (a client's bug, never to be answered with the first one's answer)."""

    def __init__(self, *, other: bool = False) -> None:
        super().__init__("this request was received before")
        self.other = other


@dataclass(frozen=True, slots=True)
class Ask:
    """One chat completion: who asks, in which session, what, of which agent."""

    token: ApiToken
    agent: str
    text: str
    session: str | None = None
    key: str | None = None  # the client's Idempotency-Key
    body: str = ""  # a digest of the request's body, as sent
    retry: bool = False  # the client sends it again on its own (the SDK's retry count)


@dataclass(frozen=True, slots=True)
class Piece:
    kind: Literal["text", "tool", "message", "failed", "end"]
    text: str = ""


@dataclass(slots=True)
class PendingAnswer:
    """A request's answer as it comes. It outlives the HTTP request that asked: a client
    that leaves (a dropped stream, a timeout) and asks again (the same Idempotency-Key, or
    the SDK's retry) is answered from here, and never starts the work again."""

    chat_key: str
    message_id: str  # the platform id of the request's message
    asked: str = ""  # a digest of the question: a repeat with another one is refused
    control: bool = False  # a control (/status, /stop, ...): answered by no turn of its own
    turn_id: str | None = None
    attached: bool = True  # a request waits on it now (else what streams is not kept)
    # delivered for this turn, in order, by their outbox key: a message the store gave
    # (after a restart) and the outbox delivers too is one message
    delivered: dict[str, str] = field(default_factory=dict)
    failure: str | None = None  # the turn failed: its notice, which is no answer
    pieces: asyncio.Queue[Piece] = field(default_factory=asyncio.Queue)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    mid_text: bool = False  # asked again while the turn wrote: its text shows from the next step
    # the completion's id, its own (a repeat of the request gets it again)
    completion_id: str = field(default_factory=lambda: f"chatcmpl-{new_id()}")

    def stream(self, delta: str) -> None:
        if not self.mid_text:
            self._put(Piece("text", delta))

    def tool(self, name: str) -> None:
        self.mid_text = False
        self._put(Piece("tool", name))

    def deliver(self, text: str, *, final: bool, key: str = "") -> None:
        """A message of the answer (``key``: the outbox's idempotency key, which makes it
        once); ``final``: the answer is complete."""
        self.mid_text = False
        if not key or key not in self.delivered:
            self.delivered[key or f"#{len(self.delivered)}"] = text
            self._put(Piece("message", text))
        if final:
            self.finish()

    def fail(self, notice: str) -> None:
        """The turn failed: ``notice`` says why (answered as an error, not as the answer)."""
        self.failure = notice
        self._put(Piece("failed", notice))
        self.finish()

    def finish(self) -> None:
        if not self.finished.is_set():
            self.finished.set()
            self._put(Piece("end"))

    def detach(self) -> None:
        """Its request is gone: nobody reads what streams now (a repeat is given the
        messages, whole)."""
        self.attached = False
        self.pieces = asyncio.Queue()

    def rejoin(self) -> None:
        """A repeat of the request waits on it now: what came so far is given again (the
        messages, whole), then what comes."""
        self.attached = True
        for text in self.messages:
            self._put(Piece("message", text))
        if self.failure is not None:
            self._put(Piece("failed", self.failure))
        if self.finished.is_set():
            self._put(Piece("end"))
        else:
            self.mid_text = True

    def _put(self, piece: Piece) -> None:
        if self.attached:
            self.pieces.put_nowait(piece)

    @property
    def messages(self) -> list[str]:
        return list(self.delivered.values())

    @property
    def text(self) -> str:
        return "\n\n".join(m for m in self.messages if m)


@dataclass(slots=True)
class StreamText:
    """What a streamed answer has shown, so the outbox's messages complete it rather than
    repeat it."""

    shown: bool = False
    segment: str = ""  # streamed since the last tool step or message
    gap: bool = False  # a tool ran after some text: the next text starts a paragraph

    def text(self, delta: str) -> str:
        out = ("\n\n" if self.gap else "") + delta
        self.gap = False
        self.segment += delta
        self.shown = self.shown or bool(out)
        return out

    def tool(self) -> None:
        if self.segment:
            self.gap = True
        self.segment = ""

    def message(self, text: str) -> str:
        """What to write for a delivered message: the rest of what was streamed of it, or
        all of it (after a paragraph break) when the stream showed something else."""
        streamed, self.segment = self.segment, ""
        self.gap = False
        if streamed and text.startswith(streamed):
            rest = text[len(streamed) :]
        elif streamed and streamed.rstrip().endswith(text.strip()):
            rest = ""  # the stream ended with exactly this (an earlier draft came before it)
        else:
            rest = ("\n\n" if self.shown else "") + text
        self.shown = self.shown or bool(rest)
        return rest
