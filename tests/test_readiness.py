"""``/readyz`` over HTTP: not ready until a channel is connected (``/healthz`` stays up), and
the web server tells the command line where it listens."""

from __future__ import annotations

import json

import aiohttp

from channels.memory import MemoryChannel
from channels.terminal import TerminalChannel
from channels.webchat import create
from gateway.core.channel import ChannelHealth
from gateway.runtime.app import Gateway
from gateway.web.endpoint import ENDPOINT_FILE
from tests.conftest import SettingsFactory


class SlowToConnect(MemoryChannel):
    """A platform channel whose connection comes up (or drops) after start, like Telegram
    polling or the Discord gateway."""

    def __init__(self) -> None:
        super().__init__("platform")
        self.connected = False

    def health(self) -> ChannelHealth:
        return ChannelHealth(connected=self.connected, last_error=None if self.connected else "x")


async def get(url: str) -> tuple[int, dict[str, object]]:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status, await response.json()


async def test_not_ready_until_a_channel_connects(make_settings: SettingsFactory) -> None:
    settings = make_settings(web={"port": 0, "token": "a-token-long-enough-1234"})
    platform = SlowToConnect()
    terminal = TerminalChannel(agent_name="Bot", model="m")  # `switchboard run` always has it
    local = [create(settings), terminal]
    async with Gateway(settings, channels=[*local, platform]) as gateway:
        assert gateway.web is not None
        url = gateway.web.url
        status, body = await get(url + "readyz")  # public, like /healthz: no token needed
        assert status == 503
        assert body == {
            "ready": False,
            "store": True,
            "channels": {"webchat": True, "terminal": True, "platform": False},
        }
        assert (await get(url + "healthz"))[0] == 200  # alive all the same
        platform.connected = True
        status, body = await get(url + "readyz")
        assert (status, body["ready"]) == (200, True)


async def test_the_web_chat_alone_is_ready_once_it_serves(make_settings: SettingsFactory) -> None:
    settings = make_settings(web={"port": 0})
    async with Gateway(settings, channels=[create(settings)]) as gateway:
        assert gateway.web is not None
        endpoint = json.loads((settings.data_dir / ENDPOINT_FILE).read_text())
        assert endpoint["url"] == gateway.web.url
        status, body = await get(gateway.web.url + "readyz")
        assert (status, body["ready"]) == (200, True)
    assert not (settings.data_dir / ENDPOINT_FILE).exists()  # gone with the server
