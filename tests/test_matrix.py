"""Matrix against a real homeserver (Synapse, started by tests/fakes/synapse.py): the bot and
people are real accounts; people act through the client-server API as any client would."""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from channels.matrix.convert import Room, convert
from channels.matrix.plugin import create
from gateway.cli.onboard.channel import onboard_channel
from gateway.config.settings import Settings, load_settings
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes import llm
from tests.fakes.llm import FakeLLM
from tests.fakes.synapse import Account, Homeserver
from tests.test_cli import cli_env
from tests.test_onboard import onboarding

pytestmark = pytest.mark.timeout(120)


class Person:
    """A real user of the homeserver, acting through the client-server API."""

    def __init__(self, server: Homeserver, account: Account, http: aiohttp.ClientSession) -> None:
        self.server = server
        self.account = account
        self.id = account.user_id
        self._http = http

    async def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        headers = {"Authorization": f"Bearer {self.account.access_token}"}
        async with self._http.request(
            method, self.server.url + path, json=body, headers=headers
        ) as response:
            data = await response.json()
            assert response.status < 400, data
            return data

    async def room(self, *invite: str, direct: bool = False, encrypted: bool = False) -> str:
        body: dict[str, Any] = {
            "invite": list(invite),
            "is_direct": direct,
            "preset": "trusted_private_chat" if direct else "private_chat",
        }
        if encrypted:
            body["initial_state"] = [
                {
                    "type": "m.room.encryption",
                    "state_key": "",
                    "content": {"algorithm": "m.megolm.v1.aes-sha2"},
                }
            ]
        return str((await self.call("POST", "/_matrix/client/v3/createRoom", body))["room_id"])

    async def say(
        self,
        room: str,
        text: str,
        *,
        mention: str | None = None,
        kind: str = "m.room.message",
        content: dict[str, Any] | None = None,
    ) -> str:
        body = content or {"msgtype": "m.text", "body": text}
        if mention:
            body["m.mentions"] = {"user_ids": [mention]}
        path = f"/_matrix/client/v3/rooms/{quote(room)}/send/{kind}/{uuid.uuid4().hex}"
        return str((await self.call("PUT", path, body))["event_id"])

    async def events(self, room: str) -> list[dict[str, Any]]:
        path = f"/_matrix/client/v3/rooms/{quote(room)}/messages?dir=b&limit=200"
        return list(reversed((await self.call("GET", path))["chunk"]))

    async def members(self, room: str) -> set[str]:
        data = await self.call("GET", f"/_matrix/client/v3/rooms/{quote(room)}/joined_members")
        return set(data["joined"])


def shown(events: list[dict[str, Any]], sender: str) -> list[str]:
    """What a client shows of ``sender``'s messages: edits applied, redactions gone."""
    edits: dict[str, str] = {}
    originals: list[dict[str, Any]] = []
    for event in events:
        if event.get("sender") != sender or event.get("type") != "m.room.message":
            continue
        content = event.get("content") or {}
        if not content:  # redacted
            continue
        relation = content.get("m.relates_to") or {}
        if relation.get("rel_type") == "m.replace":
            edits[relation["event_id"]] = content["m.new_content"]["body"]
        else:
            originals.append(event)
    return [edits.get(e["event_id"], e["content"].get("body", "")) for e in originals]


def edits_of(events: list[dict[str, Any]], sender: str) -> int:
    return sum(
        1
        for e in events
        if e.get("sender") == sender
        and ((e.get("content") or {}).get("m.relates_to") or {}).get("rel_type") == "m.replace"
    )


async def until(check: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Poll the homeserver until ``check()`` returns something true (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.1)


@pytest.fixture
async def people(homeserver: Homeserver) -> AsyncIterator[Callable[[str], Person]]:
    async with aiohttp.ClientSession() as http:

        def make(name: str) -> Person:
            return Person(homeserver, homeserver.register(name), http)

        yield make


@pytest.fixture
def bot(homeserver: Homeserver) -> Account:
    return homeserver.register("bot")


def matrix_settings(
    make_settings: SettingsFactory, homeserver: Homeserver, bot: Account, **extra: Any
) -> Settings:
    section = {
        "homeserver": homeserver.url,
        "user_id": bot.user_id,
        "access_token": bot.access_token,
        "sync_timeout_seconds": 1,
        **extra,
    }
    return make_settings(matrix=section)


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[Gateway]:
    async with Gateway(
        settings, channels=[create(settings.matrix, settings.channel_context())]
    ) as gateway:
        yield gateway


async def test_a_direct_chat_is_joined_and_answered_once(
    make_settings: SettingsFactory,
    homeserver: Homeserver,
    bot: Account,
    people: Any,
    fake_llm: FakeLLM,
) -> None:
    dana = people("dana")
    settings = matrix_settings(
        make_settings, homeserver, bot, allow_from=[dana.id], streaming=False
    )
    fake_llm.queue(llm.text("Hello **Dana**"))
    async with running(settings) as gateway:
        room = await dana.room(bot.user_id, direct=True)
        await until(lambda: _has(dana.members(room), bot.user_id))
        await dana.say(room, "hi bot")
        answers = await until(lambda: _shown(dana, room, bot.user_id))
        await gateway.wait_idle()
    assert answers == ["Hello **Dana**"]
    [event] = [
        e
        for e in await dana.events(room)
        if e["sender"] == bot.user_id and e["type"] == "m.room.message"
    ]
    assert event["content"]["formatted_body"] == "<p>Hello <strong>Dana</strong></p>"
    assert event["content"]["m.mentions"] == {}
    assert "hi bot" in fake_llm.requests[0].last_user_text


async def test_a_reply_without_its_quoted_fallback_brings_the_answer_after_a_restart(
    make_settings: SettingsFactory,
    homeserver: Homeserver,
    bot: Account,
    people: Any,
    fake_llm: FakeLLM,
) -> None:
    """Newer clients send a reply without quoting it (the fallback is gone from the spec):
    the gateway finds the streamed answer it replies to in its store, not in memory."""
    dana = people("dana")
    settings = matrix_settings(make_settings, homeserver, bot, allow_from=[dana.id])
    fake_llm.queue(llm.text("The meeting is in room 4.12."), llm.text("You're welcome."))
    async with running(settings) as gateway:
        room = await dana.room(bot.user_id, direct=True)
        await until(lambda: _has(dana.members(room), bot.user_id))
        await dana.say(room, "where is the meeting?")
        await until(lambda: _shown(dana, room, bot.user_id))
        await gateway.wait_idle()
    [answer] = [
        e["event_id"]
        for e in await dana.events(room)
        if e["sender"] == bot.user_id
        and e["type"] == "m.room.message"
        and "m.relates_to" not in e["content"]
    ]
    reply = {
        "msgtype": "m.text",
        "body": "thanks",
        "m.relates_to": {"m.in_reply_to": {"event_id": answer}},
    }
    async with running(settings) as gateway:
        await dana.say(room, "thanks", content=reply)
        await until(lambda: _count_shown(dana, room, bot.user_id, 2))
        await gateway.wait_idle()
    said = fake_llm.requests[1].last_user_text
    assert "[replying to your earlier message]" in said and "room 4.12" in said


async def test_in_a_room_only_a_mention_is_answered_as_a_reply(
    make_settings: SettingsFactory,
    homeserver: Homeserver,
    bot: Account,
    people: Any,
    fake_llm: FakeLLM,
) -> None:
    dana, eve = people("dana"), people("eve")
    settings = matrix_settings(
        make_settings, homeserver, bot, allow_from=[dana.id, eve.id], group_policy="open"
    )
    fake_llm.queue(llm.text("Tuesday works."))
    async with running(settings) as gateway:
        room = await dana.room(bot.user_id, eve.id)
        await until(lambda: _has(dana.members(room), bot.user_id))
        await dana.say(room, "chatter between us")
        asked = await dana.say(room, "bot: which day?", mention=bot.user_id)
        answers = await until(lambda: _shown(dana, room, bot.user_id))
        await gateway.wait_idle()
    assert answers == ["Tuesday works."]
    assert len(fake_llm.requests) == 1 and "which day?" in fake_llm.requests[0].last_user_text
    said = fake_llm.requests[0].last_user_text
    # the chatter before is no turn of its own: it comes along as labelled group context
    assert "[earlier in this group" in said and said.index("which day?") < said.index("chatter")
    [event] = [
        e
        for e in await dana.events(room)
        if e["sender"] == bot.user_id and e["type"] == "m.room.message"
    ]
    assert event["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == asked


async def test_after_a_restart_a_room_is_still_a_group_and_only_a_mention_is_answered(
    make_settings: SettingsFactory,
    homeserver: Homeserver,
    bot: Account,
    people: Any,
    fake_llm: FakeLLM,
) -> None:
    """The sync goes on from its stored position after a restart: the rooms' members are
    asked for again, so a room of three is no direct chat (it was: every message answered,
    a group offered the tools of a direct chat)."""
    dana, eve = people("dana"), people("eve")
    settings = matrix_settings(
        make_settings, homeserver, bot, allow_from=[dana.id, eve.id], group_policy="open"
    )
    fake_llm.queue(llm.text("Tuesday works."))
    async with running(settings) as gateway:
        room = await dana.room(bot.user_id, eve.id)
        await until(lambda: _has(dana.members(room), bot.user_id))
        await dana.say(room, "before the restart")
        await gateway.wait_idle()
    async with running(settings) as gateway:
        await dana.say(room, "chatter after the restart")
        await dana.say(room, "bot: which day?", mention=bot.user_id)
        answers = await until(lambda: _shown(dana, room, bot.user_id))
        await gateway.wait_idle()
    assert answers == ["Tuesday works."]
    [asked] = fake_llm.requests  # the chatter was no turn of its own
    assert "which day?" in asked.last_user_text and "a direct chat" not in asked.system_text


async def test_what_was_said_in_a_room_before_the_bot_joined_gets_no_turn(
    make_settings: SettingsFactory,
    homeserver: Homeserver,
    bot: Account,
    people: Any,
    fake_llm: FakeLLM,
) -> None:
    dana, eve = people("dana"), people("eve")
    settings = matrix_settings(
        make_settings, homeserver, bot, allow_from=[dana.id, eve.id], group_policy="open"
    )
    fake_llm.queue(llm.text("Now I'm here."))
    async with running(settings) as gateway:
        room = await dana.room(eve.id)
        await dana.say(room, "bot: are you there yet?", mention=bot.user_id)
        await dana.call(
            "POST", f"/_matrix/client/v3/rooms/{quote(room)}/invite", {"user_id": bot.user_id}
        )
        await until(lambda: _has(dana.members(room), bot.user_id))
        await dana.say(room, "bot: and now?", mention=bot.user_id)
        answers = await until(lambda: _shown(dana, room, bot.user_id))
        await gateway.wait_idle()
    assert answers == ["Now I'm here."]
    [asked] = fake_llm.requests
    assert "and now?" in asked.last_user_text


async def test_invites_from_strangers_to_rooms_are_declined(
    make_settings: SettingsFactory,
    homeserver: Homeserver,
    bot: Account,
    people: Any,
    fake_llm: FakeLLM,
) -> None:
    dana, mallory = people("dana"), people("mallory")
    settings = matrix_settings(
        make_settings, homeserver, bot, allow_from=[dana.id], group_policy="open"
    )
    async with running(settings) as gateway:
        theirs = await mallory.room(bot.user_id)
        ours = await dana.room(bot.user_id)
        await until(lambda: _has(dana.members(ours), bot.user_id))
        await gateway.wait_idle()
        assert bot.user_id not in await mallory.members(theirs)


async def test_a_restart_in_the_middle_of_a_turn_answers_exactly_once(
    make_settings: SettingsFactory,
    homeserver: Homeserver,
    bot: Account,
    people: Any,
    fake_llm: FakeLLM,
) -> None:
    dana = people("dana")
    settings = matrix_settings(
        make_settings, homeserver, bot, allow_from=[dana.id], streaming=False
    )
    gate = asyncio.Event()
    fake_llm.queue(llm.held(gate, "cut off"), llm.text("The answer, once."))
    async with running(settings) as gateway:
        room = await dana.room(bot.user_id, direct=True)
        await until(lambda: _has(dana.members(room), bot.user_id))
        await dana.say(room, "a long question")
        await fake_llm.wait_for_requests(1)
        await gateway.stop(drain_timeout=0)  # the turn is cut mid-call
    gate.set()
    async with running(settings) as gateway:
        answers = await until(lambda: _shown(dana, room, bot.user_id))
        await gateway.wait_idle()
        await asyncio.sleep(0)
        answers = await _shown(dana, room, bot.user_id)
    assert answers == ["The answer, once."]
    assert sum("a long question" in r.last_user_text for r in fake_llm.requests) == 2


async def test_an_answer_is_streamed_into_one_message_by_edits(
    make_settings: SettingsFactory,
    homeserver: Homeserver,
    bot: Account,
    people: Any,
    fake_llm: FakeLLM,
) -> None:
    dana = people("dana")
    settings = matrix_settings(make_settings, homeserver, bot, allow_from=[dana.id])
    answer = "First words, then more words, then the **end** of it."
    fake_llm.queue(llm.streamed(answer, chunks=6, over=3.0))
    async with running(settings) as gateway:
        room = await dana.room(bot.user_id, direct=True)
        await until(lambda: _has(dana.members(room), bot.user_id))
        await dana.say(room, "stream please")
        await until(lambda: _edited(dana, room, bot.user_id))  # the draft grows
        await until(lambda: _shows(dana, room, bot.user_id, answer))
        await gateway.wait_idle()
    events = await dana.events(room)
    assert shown(events, bot.user_id) == [answer]  # one message, the whole answer
    assert edits_of(events, bot.user_id) >= 2  # drafts edited, then the final formatting
    final = [e for e in events if e["sender"] == bot.user_id and e["type"] == "m.room.message"][-1]
    assert "<strong>end</strong>" in final["content"]["m.new_content"]["formatted_body"]


SECRET = {  # what a client sends in an encrypted room (the bot cannot read it)
    "algorithm": "m.megolm.v1.aes-sha2",
    "ciphertext": "AwgA",
    "sender_key": "k",
    "session_id": "s",
    "device_id": "D",
}


async def test_an_encrypted_room_is_left_after_one_notice_and_a_new_invite_is_told_again(
    make_settings: SettingsFactory,
    homeserver: Homeserver,
    bot: Account,
    people: Any,
    fake_llm: FakeLLM,
) -> None:
    dana = people("dana")
    settings = matrix_settings(  # a second invitation is not marked direct: rooms are open
        make_settings, homeserver, bot, allow_from=[dana.id], group_policy="open"
    )
    fake_llm.queue(llm.text("Here I can read you."))
    async with running(settings) as gateway:
        room = await dana.room(bot.user_id, direct=True, encrypted=True)
        await until(lambda: _membership_is(dana, room, bot.user_id, "leave"))
        [notice] = await _shown(dana, room, bot.user_id)
        await dana.say(room, "", kind="m.room.encrypted", content=SECRET)
        await dana.say(room, "a plaintext message in the encrypted room")
        await dana.call(
            "POST", f"/_matrix/client/v3/rooms/{quote(room)}/invite", {"user_id": bot.user_id}
        )
        await until(lambda: _count_shown(dana, room, bot.user_id, 2))  # told again
        await until(lambda: _membership_is(dana, room, bot.user_id, "leave"))
        plain = await dana.room(bot.user_id, direct=True)  # later events: the bot got there
        await until(lambda: _has(dana.members(plain), bot.user_id))
        await dana.say(plain, "and here?")
        await until(lambda: _shown(dana, plain, bot.user_id))
        await gateway.wait_idle()
        shown_there = await _shown(dana, room, bot.user_id)
    assert "end-to-end encrypted" in notice and "turn encryption off" in notice.lower()
    assert "leaving" in notice
    assert shown_there == [notice, notice]  # once per invitation, never an answer
    assert [r.last_user_text for r in fake_llm.requests] == ["and here?"]  # nothing else read


async def test_encryption_turned_on_later_is_left_and_the_plaintext_after_it_gets_no_turn(
    make_settings: SettingsFactory,
    homeserver: Homeserver,
    bot: Account,
    people: Any,
    fake_llm: FakeLLM,
) -> None:
    dana = people("dana")
    settings = matrix_settings(make_settings, homeserver, bot, allow_from=[dana.id])
    fake_llm.queue(llm.text("Hello."))
    async with running(settings) as gateway:
        room = await dana.room(bot.user_id, direct=True)
        await until(lambda: _has(dana.members(room), bot.user_id))
        await dana.say(room, "hello")
        await until(lambda: _shown(dana, room, bot.user_id))
        await gateway.wait_idle()
    # While the gateway is down, so that one sync holds both: encryption, then plaintext.
    encryption = {"algorithm": "m.megolm.v1.aes-sha2"}
    await dana.call(
        "PUT", f"/_matrix/client/v3/rooms/{quote(room)}/state/m.room.encryption/", encryption
    )
    await dana.say(room, "a plaintext message after encryption was turned on")
    async with running(settings) as gateway:
        await until(lambda: _membership_is(dana, room, bot.user_id, "leave"))
        await gateway.wait_idle()
        [hello, notice] = await _shown(dana, room, bot.user_id)
    assert hello == "Hello." and "end-to-end encrypted" in notice
    assert [r.last_user_text for r in fake_llm.requests] == ["hello"]


async def test_an_encrypted_room_joined_before_the_stored_sync_position_is_left(
    make_settings: SettingsFactory,
    homeserver: Homeserver,
    bot: Account,
    people: Any,
    fake_llm: FakeLLM,
) -> None:
    """An earlier version stayed in encrypted rooms: its stored position lies after the
    encryption, so the syncs no longer carry it; a plaintext mention there gets no turn."""
    dana, eve = people("dana"), people("eve")
    settings = matrix_settings(
        make_settings, homeserver, bot, allow_from=[dana.id, eve.id], group_policy="open"
    )
    async with aiohttp.ClientSession() as http:
        earlier = Person(homeserver, bot, http)  # the bot's account, before this version
        room = await dana.room(bot.user_id, eve.id, encrypted=True)
        await earlier.call("POST", f"/_matrix/client/v3/join/{quote(room)}", {})
        position = (await earlier.call("GET", "/_matrix/client/v3/sync?timeout=0"))["next_batch"]
    async with Gateway(settings, channels=[]) as gateway:
        await gateway.records.save_cursor("matrix", position)
    await dana.say(room, "bot: are you there?", mention=bot.user_id)
    async with running(settings) as gateway:
        await until(lambda: _membership_is(dana, room, bot.user_id, "leave"))
        await gateway.wait_idle()
        [notice] = await _shown(dana, room, bot.user_id)
    assert "end-to-end encrypted" in notice
    assert fake_llm.requests == []


# -- switchboard onboard --channel matrix --------------------------------------------------


async def test_onboarding_with_the_password_saves_a_token_and_the_bot_answers_on_it(  # noqa: PLR0917 - fixtures
    make_settings: SettingsFactory,
    homeserver: Homeserver,
    bot: Account,
    people: Any,
    fake_llm: FakeLLM,
    tmp_path: Path,
) -> None:
    """At the terminal, the bot's password instead of a token: it logs in once, .env keeps
    the access token it got and nothing keeps the password; the gateway runs on that token
    and answers in the room of the test message."""
    dana = people("dana")
    home = tmp_path / "onboarded"
    env = cli_env(home, fake_llm)
    async with onboarding(env, "onboard", "--channel", "matrix") as (process, terminal):
        await terminal.expect("Homeserver URL [https://matrix.org]: ")
        terminal.type(homeserver.url)
        await terminal.expect("The bot's Matrix id (@name:server): ")
        terminal.type(bot.user_id)
        await terminal.expect("The bot's access token (empty: log in with its password) (hidden): ")
        terminal.type("")
        await terminal.expect("the access token it gets is saved) (hidden): ")
        terminal.type(bot.password)
        await terminal.expect("Your own Matrix id (@you:server): ")
        terminal.type(dana.id)
        await terminal.expect("  ok: signed in; saving access_token, device_id, not password")
        await terminal.expect(f"  sent a test message to {dana.id} (")
        room = (await terminal.expect(")")).strip()
        assert await asyncio.wait_for(process.wait(), 30) == 0
    dotenv, config = (home / ".env").read_text(), (home / "config.toml").read_text()
    assert bot.password not in dotenv + config
    saved = load_settings(home=home).matrix
    assert saved.password is None and saved.access_token is not None
    token = saved.access_token.get_secret_value()
    assert f"SWITCHBOARD_MATRIX__ACCESS_TOKEN='{token}'" in dotenv and token not in config
    assert f'device_id = "{saved.device_id}"' in config
    assert token != bot.access_token  # a login of its own, on a device of its own
    whoami = homeserver.call("GET", "/_matrix/client/v3/account/whoami", token=token)
    assert (whoami["user_id"], whoami["device_id"]) == (bot.user_id, saved.device_id)

    await dana.call("POST", f"/_matrix/client/v3/rooms/{quote(room)}/join", {})
    assert (await _shown(dana, room, bot.user_id))[0].startswith("Switchboard is set up")
    settings = matrix_settings(
        make_settings, homeserver, bot, access_token=token, device_id=saved.device_id,
        allow_from=[dana.id], streaming=False,
    )  # fmt: skip
    fake_llm.queue(llm.text("Hello Dana"))
    channel = create(settings.matrix, settings.channel_context())
    async with Gateway(settings, channels=[channel]) as gateway:
        await until(lambda: _connected(channel))
        await dana.say(room, "hi bot")
        await until(lambda: _count_shown(dana, room, bot.user_id, 2))
        await gateway.wait_idle()
    assert (await _shown(dana, room, bot.user_id))[1:] == ["Hello Dana"]


async def test_onboarding_refuses_a_wrong_password_takes_a_token_and_replaces_a_revoked_one(
    homeserver: Homeserver,
    bot: Account,
    people: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A token still works as before; the password is the way back once it was revoked (the
    old token in .env is not tried, the new login's replaces it)."""
    dana = people("dana")
    home = tmp_path / "onboarded"
    home.mkdir()

    def onboard(*answers: str) -> int:
        given = [f"homeserver={homeserver.url}", f"user_id={bot.user_id}", f"allow_from={dana.id}"]
        args = argparse.Namespace(
            channel="matrix", set=[*given, *answers], test_to=None, non_interactive=True
        )
        return onboard_channel(args, load_settings(home=home))

    # the command runs its own event loop, as from the command line: on a thread of its own
    wrong = await asyncio.to_thread(onboard, "password=not-the-password")
    refused = capsys.readouterr().err
    assert wrong == 1 and "refused the login" in refused and "Nothing saved." in refused
    assert not (home / ".env").exists() and not (home / "config.toml").exists()
    done = await asyncio.to_thread(onboard, f"access_token={bot.access_token}")
    out = capsys.readouterr().out
    assert done == 0 and f"  ok: {bot.user_id} (device {bot.device_id})" in out
    assert "signed in" not in out and f"sent a test message to {dana.id}" in out
    saved = load_settings(home=home).matrix
    assert saved.access_token is not None
    assert saved.access_token.get_secret_value() == bot.access_token

    homeserver.call("POST", "/_matrix/client/v3/logout", {}, token=bot.access_token)
    again = await asyncio.to_thread(onboard, f"password={bot.password}")
    assert again == 0 and f"sent a test message to {dana.id}" in capsys.readouterr().out
    renewed = load_settings(home=home).matrix.access_token
    assert renewed is not None and renewed.get_secret_value() != bot.access_token
    whoami = homeserver.call(
        "GET", "/_matrix/client/v3/account/whoami", token=renewed.get_secret_value()
    )
    assert whoami["user_id"] == bot.user_id
    assert bot.password not in (home / ".env").read_text() + (home / "config.toml").read_text()


async def _connected(channel: Any) -> bool:
    return bool(channel.health().connected)


async def _has(members: Any, user: str) -> bool:
    return user in await members


async def _shown(person: Person, room: str, sender: str) -> list[str]:
    return shown(await person.events(room), sender)


async def _count_shown(person: Person, room: str, sender: str, count: int) -> bool:
    return len(await _shown(person, room, sender)) >= count


async def _membership_is(person: Person, room: str, user: str, membership: str) -> bool:
    path = f"/_matrix/client/v3/rooms/{quote(room)}/state/m.room.member/{quote(user)}"
    return bool((await person.call("GET", path)).get("membership") == membership)


async def _edited(person: Person, room: str, sender: str) -> bool:
    return edits_of(await person.events(room), sender) >= 1


async def _shows(person: Person, room: str, sender: str, text: str) -> bool:
    return shown(await person.events(room), sender) == [text]


def test_the_bots_name_goes_from_the_start_only_as_a_whole_word() -> None:
    """The bot called Sam: ``Sam: /stop`` is the command; ``Samstag passt`` keeps its
    first word (it lost ``Sam`` before: ``stag passt``)."""
    room = Room("!room:example.org", direct=False, names={"@sam:example.org": "Sam"})

    def text_of(body: str) -> str:
        event = {
            "type": "m.room.message",
            "sender": "@dana:example.org",
            "event_id": f"${uuid.uuid4().hex}",
            "content": {"msgtype": "m.text", "body": body},
        }
        converted = convert(event, room, "@sam:example.org")
        assert converted is not None
        return converted.message.text

    assert text_of("Sam: /stop") == "/stop"
    assert text_of("@sam:example.org /stop") == "/stop"
    assert text_of("Samstag passt mir, Sam") == "Samstag passt mir, Sam"
