"""A channel from outside Switchboard, as a third-party package would add it.

``tests/test_channel_plugin.py`` copies this package into a directory of its own with the
``*.dist-info`` an installer writes (the entry point ``fakechannel = fakechannel:PLUGIN`` in
the group ``switchboard.channels``) and puts that on a gateway's ``PYTHONPATH``. It uses only
what any plug-in may: the kernel's types, ``ChannelSection`` and ``ChannelPlugin``.

The platform is an HTTP server on the section's ``port``: ``POST /say`` with ``{"token",
"from", "text", "id"}`` hands a message in, and the response is the answer to it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from pydantic import SecretStr

from gateway.config.channels import ChannelSection
from gateway.config.plugins import ChannelPlugin
from gateway.core.bus import InboundSink
from gateway.core.channel import Channel, ChannelContext, StartContext
from gateway.core.errors import ChannelPermanentError
from gateway.core.messages import InboundMessage, OutboundMessage

ANSWER_TIMEOUT = 30.0


class FakeChannelSettings(ChannelSection):
    """A test's own chat platform: messages are POSTed to its port."""

    token: SecretStr | None = None  # what each POST must carry; the channel is on when set
    port: int = 0  # the port it listens on

    @property
    def enabled(self) -> bool:
        return self.token is not None

    def listen_ports(self) -> tuple[int, ...]:
        return (self.port,)


class FakeChannel:
    name = "fakechannel"

    def __init__(self, section: FakeChannelSettings, context: ChannelContext) -> None:
        assert section.token is not None
        self._token = section.token.get_secret_value()
        self._port = section.port
        self._sink: InboundSink | None = None
        self._runner: web.AppRunner | None = None
        self._answers: dict[str, asyncio.Future[str]] = {}
        self._sent = 0

    async def start(self, context: StartContext) -> None:
        self._sink = context.sink
        app = web.Application()
        app.router.add_post("/say", self._say)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self._port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        self._sink = None

    async def send(self, message: OutboundMessage) -> str | None:
        waiting = self._answers.pop(message.chat_id, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(message.text)
        self._sent += 1
        return f"fake-{self._sent}"

    async def probe(self) -> str:
        if len(self._token) < 8:
            raise ChannelPermanentError("the token is too short (SWITCHBOARD_FAKECHANNEL__TOKEN)")
        return f"listening on 127.0.0.1:{self._port}"

    async def _say(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        if body.get("token") != self._token or self._sink is None:
            return web.json_response({"error": "refused"}, status=403)
        person = str(body["from"])
        answer = asyncio.get_running_loop().create_future()
        self._answers[person] = answer
        message = InboundMessage(
            channel=self.name,
            chat_id=person,
            sender_id=person,
            sender_name=person,
            text=str(body["text"]),
            platform_message_id=str(body["id"]),
        )
        accepted = await self._sink.publish_inbound(message)
        text = await asyncio.wait_for(answer, ANSWER_TIMEOUT)
        return web.json_response({"accepted": accepted.value, "answer": text})


def create(section: FakeChannelSettings, context: ChannelContext) -> Channel:
    return FakeChannel(section, context)


PLUGIN = ChannelPlugin(
    name="fakechannel", title="a fake chat", settings=FakeChannelSettings, create=create
)
