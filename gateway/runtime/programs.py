"""Other programs on the gateway: webhooks, the OpenAI-compatible API and the task API.

Each is a channel of its own (``hook``, ``api``, ``task``), so what they send takes the
path of every chat message: access gate, journal before the HTTP answer, deduplication by
the delivery or request id, one turn, the answer through the outbox. What differs is
decided here, in :meth:`ProgramRoutes.route`, from the configuration (never from the
request):

* a webhook's turn acts as ``webhook <name>`` with the hook's ``role`` (member by default),
  is tainted (its payload is outside content), is authorised only by the owner's ``prompt``,
  and answers in ``deliver_to`` (else the owner's home chat), where the answer is also
  written into that chat's history so a reply there has its context;
* an API turn acts as the token's name with the token's role, in a session of its own per
  token and ``user`` (gateway/core/addressing), and answers the waiting request.

docs/connect.md describes them for users; docs/security.md what they may do.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.config.settings import Settings
from gateway.core.addressing import HOOK_CHANNEL, qualify
from gateway.core.channel import Channel
from gateway.core.messages import ChatRef, ChatType, InboundMessage
from gateway.core.principal import Principal, Role
from gateway.runtime.agents.subagents import Subagents, TaskQueue
from gateway.runtime.agents.task_board import TaskBoard, TaskChannel
from gateway.runtime.bus import Bus
from gateway.runtime.people.budget import UserBudget
from gateway.runtime.schedule.heartbeat import OwnersChat
from gateway.runtime.turns.routes import Route
from gateway.store import Store


class ProgramRoutes:
    """Where a program's turn answers and as whom it acts (see the module docstring);
    :class:`gateway.runtime.turns.routes.Routes` asks it about every message."""

    def __init__(self, settings: Settings, owners_chat: OwnersChat) -> None:
        self._settings = settings
        self._owners_chat = owners_chat

    async def route(self, msg: InboundMessage, agent: str) -> Route:
        """The route of a message on a program's channel (``PROGRAM_CHANNELS``)."""
        if msg.channel == HOOK_CHANNEL:
            return await self._hook(msg, agent)
        return self._api(msg)

    def principal(self, msg: InboundMessage) -> Principal:
        """As whom a program's message acts: the hook's ``role``, or the API token's (a hook
        or token removed since: a member). Its turns and its controls (``/status``) alike."""
        if msg.channel == HOOK_CHANNEL:
            hook = self._settings.hooks.get(msg.chat_id)
            role = hook.role if hook is not None else Role.MEMBER
        else:
            token = self._settings.api.token_named(msg.sender_id)
            role = token.role if token is not None else Role.MEMBER
        return Principal(msg.channel, msg.sender_id, msg.sender_name, role, ChatType.DM)

    async def _hook(self, msg: InboundMessage, agent: str) -> Route:
        from channels.hooks.payload import owner_words  # noqa: PLC0415 - aiohttp, when used

        hook = self._settings.hooks.get(msg.chat_id)
        principal = self.principal(msg)
        target = await self.target_of(msg.chat_id)
        words = owner_words(hook.prompt) if hook is not None else ""
        said = (words,) if words else ()  # the owner's prompt; never the payload
        if target is None:  # answered in its own chat, which says there is nowhere to go
            return Route(msg.chat, principal, authorising_texts=said, tainted=True)
        return Route(target, principal, qualify(agent, target.session_key), said, tainted=True)

    def _api(self, msg: InboundMessage) -> Route:
        return Route(msg.chat, self.principal(msg))

    async def target_of(self, hook_name: str) -> ChatRef | None:
        """Where a hook's answers go: its ``deliver_to``, else the heartbeat's chat
        (``heartbeat.target``, or the owner's home chat)."""
        hook = self._settings.hooks.get(hook_name)
        if hook is not None and hook.target is not None:
            return hook.target
        home = await self._owners_chat.get()
        return None if home is None else home.chat


def program_channels(
    settings: Settings,
    *,
    store: Store,
    bus: Bus,
    routes: ProgramRoutes,
    queue: TaskQueue,
    subagents: Subagents,
    budget: UserBudget,
    agents: Sequence[str],
    chats: Sequence[str],
) -> list[Channel]:
    """The channels other programs use, as configured (none by default; their modules and
    aiohttp are loaded only then). The API's tasks deliver their notes and answers through
    the internal task channel, or to a chat of the channels ``chats`` (those configured)."""
    channels: list[Channel] = []
    if settings.hooks:
        from channels.hooks import HookChannel  # noqa: PLC0415

        channels.append(
            HookChannel(
                settings.hooks,
                forward=bus.publish_outbound,
                target_of=routes.target_of,
                bodies=store.webhook_bodies,
            )
        )
    if settings.api.enabled:
        from channels.api import ApiChannel  # noqa: PLC0415

        async def allowance(principal: Principal) -> str | None:
            """The limit reached, each time (a chat's notice, said once in a while, is
            vaguer: "more requests than I can take on right now")."""
            refusal = await budget.check(principal)
            return None if refusal is None else f"over the allowance: {refusal.reason}"

        board = TaskBoard(store.tasks, queue, subagents, bus=bus)
        channels.append(TaskChannel(board))
        channels.append(
            ApiChannel(
                settings.api,
                recent=store.api_requests,
                agents=agents,
                chats=chats,
                tasks=board,
                allowance=allowance,
            )
        )
    return channels
