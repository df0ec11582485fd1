"""Signed inbound webhooks: ``POST /hooks/<name>`` starts a turn, like a chat message.

A delivery is checked in this order, and nothing is journaled unless it passes all of it:
the body is within ``max_bytes``; its signature is valid (:mod:`channels.hooks.signature`:
401 otherwise; a timestamped one within five minutes of now); the hook's rate
(``max_per_minute``) allows it (429). Bad signatures are not throttled per address: a
secret of 16 or more random characters cannot be guessed through HMAC digests, and behind a
reverse proxy every sender shares one address, so a flood of forged deliveries would
otherwise lock the real sender out. Then its body is claimed for its delivery id
(gateway/store/webhook_bodies.py): a body that already came under another id is a
duplicate (200) whatever the id says, since most signatures do not cover the id. Then it
becomes an :class:`InboundMessage` on the internal ``hook`` channel (chat: the hook's name;
platform id: the delivery id, so a redelivery is a duplicate) and is journaled before the
202 answers.

Which agent answers, as whom (the hook's ``role``), where the answer goes (``deliver_to``,
or the owner's home chat) and that the turn is tainted (the payload is outside content) are
decided by the runtime's routing (gateway/runtime/programs.py). A message that still reaches
this channel (a failure notice) is forwarded to the hook's chat the same way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence

from aiohttp import web

from channels.buckets import Rate, TokenBucket
from channels.hooks import payload as payloads
from channels.hooks.signature import LEGACY, SIGNATURE, TOLERANCE, Verdict, verify
from gateway.config.connect import HookSettings
from gateway.core.addressing import HOOK_CHANNEL
from gateway.core.bus import Accepted, InboundSink
from gateway.core.channel import ChannelHealth, StartContext
from gateway.core.errors import ChannelPermanentError, StorageFullError
from gateway.core.messages import ChatRef, ChatType, InboundMessage, OutboundMessage
from gateway.core.system.bodies import read_capped
from gateway.core.webhost import CredentialThrottle
from gateway.store import WebhookBodies

log = logging.getLogger(__name__)

NAME = HOOK_CHANNEL
PREFIX = "/hooks/"

Forward = Callable[[Sequence[OutboundMessage]], Awaitable[None]]
TargetOf = Callable[[str], Awaitable[ChatRef | None]]


class HookChannel:
    name = NAME
    program_prefix = PREFIX
    receives_on_every_node = True  # signed requests: any node of a cluster journals them

    def __init__(
        self,
        hooks: Mapping[str, HookSettings],
        *,
        forward: Forward,
        target_of: TargetOf,
        bodies: WebhookBodies,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._hooks = dict(hooks)
        self._forward = forward  # queues a message for another channel (the outbox)
        self._target_of = target_of  # where a hook's answers go
        self._bodies = bodies  # the bodies already delivered, by hook
        self._clock = clock
        self._warned_legacy: set[str] = set()  # hooks told once that their senders must move
        self._sink: InboundSink | None = None
        self._buckets = {
            name: TokenBucket(Rate.per_minute(h.max_per_minute, burst=h.max_per_minute), 0.0)
            for name, h in self._hooks.items()
        }
        self.deliveries: Counter[tuple[str, str]] = Counter()  # (hook, outcome) -> count
        self._last_delivery: float | None = None
        self._last_error: str | None = None

    # -- Channel ----------------------------------------------------------------------------

    async def start(self, context: StartContext) -> None:
        self._sink = context.sink

    async def stop(self) -> None:
        self._sink = None

    async def send(self, message: OutboundMessage) -> str | None:
        """A message for a hook's own chat (a failure notice): to the hook's chat."""
        target = await self._target_of(message.chat_id)
        if target is None:
            raise ChannelPermanentError(
                f"webhook {message.chat_id!r} has no chat to answer in: set "
                f"hooks.{message.chat_id}.deliver_to, or talk to the bot once as its owner"
            )
        forwarded = message.forwarded(
            target, f"[webhook {message.chat_id}] {message.text}", via="hook"
        )
        await self._forward([forwarded])
        return f"forwarded to {target.session_key}"

    def counts(self) -> Mapping[tuple[str, str], int]:
        return dict(self.deliveries)

    def health(self) -> ChannelHealth:
        accepted = sum(n for (_, outcome), n in self.deliveries.items() if outcome == "accepted")
        return ChannelHealth(
            connected=self._sink is not None,
            last_error=self._last_error,
            last_message_at=self._last_delivery,
            detail=f"{len(self._hooks)} hook(s) at {PREFIX}<name>; {accepted} delivery(ies) accepted",
        )

    # -- web --------------------------------------------------------------------------------

    def program_routes(self, throttle: CredentialThrottle) -> Sequence[web.RouteDef]:
        """``POST /hooks/<name>``; ``throttle`` is not used (see the module docstring)."""
        return [web.post(PREFIX + "{name}", self._deliver)]

    def program_error(self, request: web.Request, error: web.HTTPException) -> web.Response:
        """As the hooks' own errors: ``{"error": why}`` (a sender logs what it got back)."""
        if error.status == 404:
            reason = f"no webhook at {request.path} (POST /hooks/<name>)"
        elif error.status == 405:
            reason = f"{request.method} is not allowed: a webhook is delivered with POST"
        else:
            reason = error.text or error.reason
        response = _error(error.status, reason)
        for header in ("Allow", "Retry-After"):
            if header in error.headers:
                response.headers[header] = error.headers[header]
        return response

    async def close_web(self) -> None:
        return None

    async def _deliver(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        hook = self._hooks.get(name)
        if hook is None:
            return _error(404, f"no webhook named {name!r}")
        body = await _body(request, hook.max_bytes)
        if body is None:
            return self._refused(name, "too_large", 413, f"the body is over {hook.max_bytes} bytes")
        verdict = verify(hook.secret.get_secret_value(), body, request.headers, now=self._clock())
        if not verdict.ok:
            log.warning("webhook %s: refused a delivery: %s", name, verdict.reason)
            return self._refused(name, "bad_signature", 401, verdict.reason)
        if verdict.scheme == LEGACY and name not in self._warned_legacy:
            self._warned_legacy.add(name)
            log.warning(
                "webhook %s: a delivery is signed in the old format (%s: sha256=<HMAC of the "
                "body>), which the next release refuses: sign t=<unix seconds>,v1=<HMAC of "
                '"<t>.<delivery id>.<body>"> with X-Switchboard-Delivery (docs/connect.md)',
                name,
                SIGNATURE,
            )
        bucket = self._buckets[name]
        now = time.monotonic()
        wait = bucket.delay(now)
        if wait > 0:
            response = self._refused(name, "rate_limited", 429, "too many deliveries; slow down")
            response.headers["Retry-After"] = str(max(1, round(wait)))
            return response
        bucket.take(now)
        return await self._accept(name, hook, request, body, verdict)

    async def _accept(
        self, name: str, hook: HookSettings, request: web.Request, body: bytes, verdict: Verdict
    ) -> web.Response:
        data = payloads.parse(body, request.content_type)
        delivery = payloads.delivery_id(request.headers, data, body)
        text = payloads.message_text(
            name,
            hook.prompt,
            payloads.shown(data, hook.max_payload_chars),
            payloads.event_of(request.headers, data),
        )
        msg = InboundMessage(
            channel=NAME,
            chat_id=name,
            sender_id=name,
            sender_name=f"webhook {name}",
            text=text,
            platform_message_id=f"{name}:{delivery}",
            chat_type=ChatType.DM,
            mentioned=True,
            agent=hook.agent,
            own_turn=True,
        )
        if self._sink is None:
            return _error(503, "the gateway is not running")
        try:
            # a timed signature can be replayed until its time is up; an untimed one at any
            # time (held then for as long as the journal remembers deliveries)
            until = None if verdict.signed_at is None else verdict.signed_at + TOLERANCE
            first = await self._bodies.claim(
                name, payloads.body_digest(body), delivery, until=until
            )
            if first != delivery:
                log.warning(
                    "webhook %s: delivery %s repeats the body of delivery %s: not run again",
                    name,
                    delivery,
                    first,
                )
                self.deliveries[(name, "duplicate")] += 1
                return _received(200, "duplicate", delivery)
            accepted = await self._sink.publish_inbound(msg)  # durable before we answer
        except StorageFullError:
            self._last_error = "the disk is full: deliveries are refused"
            return self._refused(name, "storage_full", 507, "the gateway's disk is full")
        self._last_delivery = self._clock()
        if accepted is Accepted.DUPLICATE:
            self.deliveries[(name, "duplicate")] += 1
            return _received(200, "duplicate", delivery)
        self.deliveries[(name, "accepted")] += 1
        log.info("webhook %s: delivery %s accepted", name, delivery)
        return _received(202, "accepted", delivery)

    def _refused(self, name: str, outcome: str, status: int, reason: str) -> web.Response:
        self.deliveries[(name, outcome)] += 1
        return _error(status, reason)


async def _body(request: web.Request, limit: int) -> bytes | None:
    """The raw body, or ``None`` when it is over ``limit`` bytes (read no further)."""
    if request.content_length is not None and request.content_length > limit:
        return None
    async with asyncio.timeout(60):
        return await read_capped(request.content, limit)


def _error(status: int, reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=status)


def _received(status: int, state: str, delivery: str) -> web.Response:
    return web.json_response({"status": state, "delivery": delivery}, status=status)
