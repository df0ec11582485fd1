"""The API channel: other programs talk to the agent over HTTP (``/v1``, docs/connect.md).

A chat completion is a message on the internal ``api`` channel: chat = the token's name,
thread = the session (``X-Switchboard-Session``, the ``user`` field, or Open WebUI's chat
id), so every client and end user has a session of its own, with the history, memory scope,
approvals and budget of a chat member (or of the token's role). The message is journaled
before anything is answered; its turn's answer comes back through the outbox to
:meth:`ApiChannel.send` and is handed to the request waiting for it (streamed fragments
through :meth:`stream`). One request per session runs at a time; the next waits its turn.
Controls (``/stop``, ``/status``, ``/new``, ``/help``) wait for nothing: answered beside the
queue as in a chat, they reach a running request's turn (``/stop`` stops it).
A request's ``Idempotency-Key`` is its session's: the same key from another session of the
token is another request, never an answer from someone else's conversation. The official
SDKs retry on their own, without a key: a retry (``x-stainless-retry-count`` above 0) with
the body of a request the session sent within :data:`RETRY_WINDOW` is that request, so it
gets that request's answer and never starts a turn of its own. What matches a retry to
its first try is in the store (gateway/store/api_requests.py), and a repeated request this
process never saw (its first try came before a restart) gets the answer of the turn that
took it from the store (:meth:`ApiChannel._recover`): what most often cuts a request's
connection, making its client try again, is the gateway restarting.

A message for a session nobody is waiting on (a background task's result, a scheduled job,
an answer that waited for an approval) cannot be pushed to an HTTP client: it is already in
the session's history, where the next request finds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import re
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence

from aiohttp import web

from channels.api.answers import AlreadyAnswered, Ask, PendingAnswer
from channels.api.routes import routes, server_error
from channels.api.tasks import TaskBackend
from gateway.config.connect import ApiSettings, ApiToken
from gateway.core.addressing import API_CHANNEL
from gateway.core.bus import Accepted, ChannelRecords, InboundSink
from gateway.core.channel import ChannelHealth, StartContext, TurnActivity
from gateway.core.commands import CONTROL_COMMANDS
from gateway.core.credentials import as_bytes
from gateway.core.errors import ChannelTransientError
from gateway.core.messages import (
    ChatRef,
    ChatType,
    InboundMessage,
    OutboundKind,
    OutboundMessage,
    new_id,
)
from gateway.core.principal import Principal
from gateway.core.webhost import CredentialThrottle
from gateway.store import ApiRequests

log = logging.getLogger(__name__)

NAME = API_CHANNEL
PREFIX = "/v1/"
MAX_REMEMBERED = 256  # answers kept for a repeated request (same Idempotency-Key)
MAX_LEFT = 256  # requests whose client left before the answer, kept for a repeat of them
RETRY_WINDOW = 900.0  # seconds a request without a key is known to an SDK's retry of it
FINAL = (OutboundKind.REPLY, OutboundKind.NOTICE)  # the kinds of message that end an answer
_SESSION = re.compile(r"[A-Za-z0-9._@-]{1,128}")

# The person's allowance (gateway/runtime/people/budget.py): None, or why a turn is refused.
Allowance = Callable[[Principal], Awaitable[str | None]]


def session_thread(session: str | None) -> str | None:
    """The thread a session name becomes: itself when plain, else a digest of it."""
    if not session:
        return None
    if _SESSION.fullmatch(session):
        return session
    return "h-" + hashlib.sha256(as_bytes(session)).hexdigest()[:32]


class ApiChannel:
    name = NAME
    program_prefix = PREFIX

    def __init__(
        self,
        settings: ApiSettings,
        *,
        recent: ApiRequests,
        agents: Sequence[str],
        chats: Sequence[str] = (),
        tasks: TaskBackend | None = None,
        allowance: Allowance | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._recent = recent  # requests without a key, for the SDKs' retries of them
        self.agents = tuple(agents)
        self.chats = tuple(chats)  # the channels configured here: where a task may answer
        self.tasks = tasks
        self._allowance = allowance
        self._clock = clock
        self.started_at = int(clock())
        self._sink: InboundSink | None = None
        self._records: ChannelRecords | None = None
        # by request (message) id: answers to come (also after their client left) ...
        self._waiting: dict[str, PendingAnswer] = {}
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}  # per session, with its users
        # ... and answered, for a repeat of the request
        self._answered: OrderedDict[str, PendingAnswer] = OrderedDict()
        self._streams: set[asyncio.Task[object]] = set()
        self.requests: Counter[tuple[str, str]] = Counter()  # (endpoint, outcome) -> count
        self._last_request: float | None = None

    # -- Channel ----------------------------------------------------------------------------

    async def start(self, context: StartContext) -> None:
        self._sink = context.sink
        self._records = context.records

    async def stop(self) -> None:
        self._sink = None

    async def send(self, message: OutboundMessage) -> str | None:
        answering = await self._answering(message)
        if not answering:
            return "kept in the session's history"  # no request waits for it
        final = message.kind in FINAL
        failed = await self._failed(message)
        for pending in answering:
            if failed:
                pending.fail(message.text)
            else:
                pending.deliver(_with_files(message), final=final, key=message.idempotency_key)
            if final:
                self._answer(pending)
        return "answered " + ", ".join(p.message_id for p in answering)

    async def stream(self, chat: ChatRef, turn_id: str, delta: str) -> None:
        for pending in self._turn(chat, turn_id):
            pending.stream(delta)

    async def activity(self, chat: ChatRef, turn_id: str, activity: TurnActivity) -> None:
        if activity.kind == "started":
            for pending in self._session(chat.session_key):
                if pending.message_id in activity.message_ids:
                    pending.turn_id = turn_id  # this turn answers the waiting request
        else:
            for pending in self._turn(chat, turn_id):
                pending.tool(activity.detail)

    async def turn_ended(self, chat: ChatRef, turn_id: str, *, answered: bool) -> None:
        if not answered:
            for pending in self._turn(chat, turn_id):
                pending.finish()  # nothing more comes (an answer already sent, or none)
                self._answer(pending)

    def counts(self) -> Mapping[tuple[str, str], int]:
        return dict(self.requests)

    def health(self) -> ChannelHealth:
        done = sum(n for (_, outcome), n in self.requests.items() if outcome == "ok")
        return ChannelHealth(
            connected=self._sink is not None,
            last_message_at=self._last_request,
            detail=f"{len(self.settings.tokens)} token(s) at {PREFIX}; {done} request(s) answered",
        )

    # -- requests ---------------------------------------------------------------------------

    async def check_allowance(self, principal: Principal) -> str | None:
        """Why ``principal`` may not start a turn now (its budget), or ``None``."""
        return None if self._allowance is None else await self._allowance(principal)

    def principal(self, token: ApiToken) -> Principal:
        return Principal(NAME, token.name, token.name, token.role, ChatType.DM)

    def authenticate(self, request: web.Request) -> ApiToken | None:
        """The token named by ``Authorization: Bearer <token>`` (compared in constant time
        with every configured token), or ``None``."""
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return None
        candidate = as_bytes(given.strip())
        found = None
        for token in self.settings.tokens:
            if hmac.compare_digest(candidate, token.token.get_secret_value().encode()):
                found = token
        return found

    @contextlib.asynccontextmanager
    async def conversation(self, ask: Ask) -> AsyncIterator[PendingAnswer]:
        """Journal ``ask`` as a message of its session and yield what answers it; one at a
        time per session, but a control (``/stop``, ``/status``, ...) is answered beside
        the queue, as in a chat, so a client can stop its own running request. Raises
        :class:`AlreadyAnswered` for a repeated request."""
        chat = ChatRef(NAME, ask.token.name, session_thread(ask.session))
        message_id = await self._request_id(ask, chat)
        msg = _message(ask, chat, message_id)
        if msg.command in CONTROL_COMMANDS:
            async with self._asking(msg, ask, control=True) as pending:
                yield pending
            return
        key = chat.session_key
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock, self._asking(msg, ask) as pending:
                yield pending
        finally:
            lock, users = self._locks[key]
            if users > 1:
                self._locks[key] = (lock, users - 1)
            else:  # nobody else waits for this session: forget its lock
                del self._locks[key]

    @contextlib.asynccontextmanager
    async def _asking(
        self, msg: InboundMessage, ask: Ask, *, control: bool = False
    ) -> AsyncIterator[PendingAnswer]:
        """The request's answer: journaled and waited for; or, for a repeat of a request
        (asked again after its client left, or answered; or journaled before this process
        started), that request's."""
        message_id = msg.platform_message_id
        asked = _digest(ask.text)
        pending = self._waiting.get(message_id) or self._answered.get(message_id)
        if pending is not None:
            if pending.asked != asked:
                raise AlreadyAnswered(other=True)
            pending.rejoin()
        else:
            # a control is answered by a turn of its own, which no "started" names: its
            # reply's turn is found in the journal (as is a turn another node of a cluster ran)
            pending = PendingAnswer(msg.chat.session_key, message_id, asked, control=control)
            self._waiting[message_id] = pending
            try:
                if not await self._publish(msg):
                    await self._recover(pending)
            except BaseException:
                self._waiting.pop(message_id, None)  # not taken: nothing will answer it here
                raise
        try:
            yield pending
        finally:
            pending.detach()
            self._forget_left()

    def _answer(self, pending: PendingAnswer) -> None:
        """``pending`` has its whole answer: kept for a repeat of its request."""
        if self._waiting.pop(pending.message_id, None) is None:
            return
        self._answered[pending.message_id] = pending
        while len(self._answered) > MAX_REMEMBERED:
            self._answered.popitem(last=False)

    def _forget_left(self) -> None:
        """Past :data:`MAX_LEFT` requests whose client left before their answer (a turn
        that never answers), the oldest are forgotten: their answers stay in the history."""
        left = [key for key, p in self._waiting.items() if not p.attached]
        for key in left[: max(0, len(left) - MAX_LEFT)]:
            del self._waiting[key]

    async def _publish(self, msg: InboundMessage) -> bool:
        """Journal ``msg``; whether it is new (``False``: journaled before, by a process
        that is gone or by another node)."""
        if self._sink is None:
            raise ChannelTransientError("the gateway is not running")
        accepted = await self._sink.publish_inbound(msg)  # durable before we answer
        self._last_request = time.time()
        if accepted is Accepted.DUPLICATE:
            return False
        if accepted is not Accepted.NEW:  # the access gate has no say over this channel
            raise ChannelTransientError(f"the message was not taken ({accepted.value})")
        return True

    async def _recover(self, pending: PendingAnswer) -> None:
        """``pending`` repeats a request journaled before this process knew of it (its first
        try came before a restart): its answer is the one of the turn that took it in,
        from the store as far as that turn got, then as the turn goes on. What the outbox
        delivers meanwhile is kept and merged (once each, by its key). Raises
        :class:`AlreadyAnswered` when the store has no answer any more (it is in the
        session's history), or the journaled request asked another question."""
        pending.detach()  # what comes while the store is read is kept, not streamed yet
        found = None
        if self._records is not None:
            found = await self._records.answer_of(NAME, pending.message_id)
        if found is None:
            raise AlreadyAnswered()
        if _digest(found.question) != pending.asked:
            raise AlreadyAnswered(other=True)
        if found.ended and not found.messages and not pending.finished.is_set():
            raise AlreadyAnswered()  # answered long ago: its messages were pruned
        pending.turn_id = pending.turn_id or found.turn_id
        live, pending.delivered = pending.delivered, {}
        for message in found.messages:
            final = message.kind in FINAL
            if final and found.failed and message.kind is OutboundKind.NOTICE:
                pending.fail(message.text)
            else:
                pending.deliver(_with_files(message), final=final, key=message.idempotency_key)
            if final:
                break
        for key, text in live.items():  # delivered while the store was read
            pending.delivered.setdefault(key, text)
        if found.ended:
            pending.finish()
        if pending.finished.is_set():
            self._answer(pending)
        pending.rejoin()  # its request waits on it now: given what came, then what comes

    def _session(self, key: str) -> list[PendingAnswer]:
        """The session's requests that wait for their answer, in order."""
        return [p for p in self._waiting.values() if p.chat_key == key and not p.finished.is_set()]

    def _turn(self, chat: ChatRef, turn_id: str) -> list[PendingAnswer]:
        """The requests ``turn_id`` answers (a turn may take in several messages)."""
        return [p for p in self._session(chat.session_key) if p.turn_id == turn_id]

    async def _answering(self, message: OutboundMessage) -> list[PendingAnswer]:
        """The requests an outbox message answers: those of its turn; for a message
        without a turn (an approval request), those of the turn that runs."""
        waiting = self._session(message.chat.session_key)
        if message.turn_id is None:
            return [p for p in waiting if p.turn_id is not None and not p.control]
        answering = [p for p in waiting if p.turn_id == message.turn_id]
        if answering or self._records is None:
            return answering
        for pending in waiting:  # a turn whose start was not seen here
            if pending.turn_id is None:
                turn = await self._records.turn_of(NAME, pending.message_id)
                if turn == message.turn_id:
                    pending.turn_id = turn
                    answering.append(pending)
        return answering

    async def _failed(self, message: OutboundMessage) -> bool:
        """Whether ``message`` is the notice of a failed turn (a model that failed, a
        timeout): not an answer, so the request gets an error."""
        if message.kind is not OutboundKind.NOTICE or message.turn_id is None:
            return False
        return self._records is not None and await self._records.turn_failed(message.turn_id)

    async def _request_id(self, ask: Ask, chat: ChatRef) -> str:
        """The platform id of a request's message: with an Idempotency-Key, the token's, the
        session's and the key's (so a key another user of the token sent runs this user's
        own message; neither token nor thread names contain ``:``); an SDK's retry of a
        request of the session of the last :data:`RETRY_WINDOW` seconds with the same body,
        that request's (from the store: also after a restart); else a new one."""
        if ask.key:
            return f"{ask.token.name}:{chat.thread_id or ''}:{ask.key}"
        if ask.retry:
            known = await self._recent.find(chat.session_key, ask.body)
            if known is not None:
                return known
        message_id = new_id()
        await self._recent.remember(chat.session_key, ask.body, message_id, keep=RETRY_WINDOW)
        return message_id

    @contextlib.contextmanager
    def streaming(self) -> Iterator[None]:
        """Around a long response (an event stream, a wait for an answer): ended when the
        server stops, so a stop is not held up by requests whose answers come after the
        restart (sent again, they get them); and quietly when the client leaves (its
        answer stays in the session's history)."""
        task = asyncio.current_task()
        if task is not None:
            self._streams.add(task)
        try:
            yield None
        except ConnectionResetError:  # the client hung up: nobody to answer, nothing wrong
            log.info("an API client left its event stream before the end")
        finally:
            if task is not None:
                self._streams.discard(task)

    # -- web --------------------------------------------------------------------------------

    def program_routes(self, throttle: CredentialThrottle) -> Sequence[web.RouteDef]:
        return routes(self, throttle)

    def program_error(self, request: web.Request, error: web.HTTPException) -> web.Response:
        return server_error(request, error)

    async def close_web(self) -> None:
        for task in list(self._streams):
            task.cancel()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _message(ask: Ask, chat: ChatRef, message_id: str) -> InboundMessage:
    return InboundMessage(
        channel=NAME,
        chat_id=chat.chat_id,
        thread_id=chat.thread_id,
        sender_id=ask.token.name,
        sender_name=ask.token.name,
        text=ask.text,
        platform_message_id=message_id,
        chat_type=ChatType.DM,
        mentioned=True,
        agent=ask.agent,
    )


def _with_files(message: OutboundMessage) -> str:
    names = [a.filename or a.kind for a in message.attachments]
    if not names:
        return message.text
    return "\n".join([message.text, *(f"[file: {name}]" for name in names)]).strip()
