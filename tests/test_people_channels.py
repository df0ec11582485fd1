"""One person on every channel: Ann's Telegram and Slack are one person, and with
``session.scope = "person"`` one conversation; ``/link`` codes link addresses once, within
ten minutes (the gateway's clock), only between chats behind the access gate, and never
raise anyone's role without the owner's word. Real python-telegram-bot and slack-bolt
against tests/fakes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from channels.memory import MemoryChannel
from channels.slack.adapter import SlackChannel
from gateway.config.settings import Settings
from gateway.runtime.app import Gateway
from gateway.runtime.intake.pairing import PairingDesk
from tests.conftest import SettingsFactory
from tests.fakes.clock import FakeClock
from tests.fakes.llm import FakeLLM, Recorded, Step, calls, echo, text
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, FakeSlack, dm_event, event_body
from tests.fakes.telegram import FakeTelegram, fast_channel, section
from tests.test_approvals import COMMAND, runs
from tests.test_web_server import message_form, owner, serving

ANN_TG, ANN_SLACK, ANN_DM = 111, "U0ANN", "D0ANN"
FACT = "my locker code is 4521"
QUESTION = "what is my locker code?"
_CODE = re.compile(r"link code is ([A-Z0-9]{8})")


def slack_section(fake: FakeSlack, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "bot_token": BOT_TOKEN,
        "app_token": APP_TOKEN,
        "base_url": fake.api_url,
        "streaming": False,
    }
    return {**values, **overrides}


@asynccontextmanager
async def running(settings: Settings, clock: FakeClock | None = None) -> AsyncIterator[Gateway]:
    channels = [
        fast_channel(settings),
        SlackChannel(settings.slack, settings.channel_context(), ping_interval=1.0),
    ]
    async with Gateway(settings, channels=channels, clock=clock) as gateway:
        yield gateway


class Talk:
    """Messages in Ann's (and others') direct chats on both platforms, each waited for."""

    def __init__(self, gateway: Gateway, tg: FakeTelegram, slack: FakeSlack) -> None:
        self._gateway, self._tg, self._slack = gateway, tg, slack
        self._ts = 100

    async def telegram(self, words: str, user: int = ANN_TG) -> str:
        before = len(self._tg.visible(user))
        await self._tg.say(words, user_id=user, chat_id=user, first_name="Ann")
        await self._tg.wait_for(lambda: len(self._tg.visible(user)) > before)
        await asyncio.wait_for(self._gateway.wait_idle(), 10)
        return self._tg.visible(user)[-1]

    async def slack(self, words: str, user: str = ANN_SLACK, dm: str = ANN_DM) -> str:
        before = len(self._slack.visible(dm))
        self._ts += 1
        event = dm_event(words, user=user, ts=f"{self._ts}.000001", channel=dm)
        await self._slack.wait_ack(await self._slack.push(event_body(event)))
        await self._slack.until(lambda: len(self._slack.visible(dm)) > before, 10)
        await asyncio.wait_for(self._gateway.wait_idle(), 10)
        return self._slack.visible(dm)[-1]


def ann(
    make_settings: SettingsFactory, tg: FakeTelegram, slack: FakeSlack, **extra: Any
) -> Settings:
    """Ann may talk on both; config says both addresses are hers."""
    return make_settings(
        telegram=section(tg, allow_from=[str(ANN_TG)]),
        slack=slack_section(slack, allow_from=[ANN_SLACK]),
        people={"ann": {"ids": [f"telegram:{ANN_TG}", f"slack:{ANN_SLACK}"]}},
        **extra,
    )


def remembers(request: Recorded) -> Step:
    """Answers the question from what the request holds, as a model would."""
    if request.last_user_text.endswith(QUESTION):
        known = any(FACT in said for said in request.user_texts)
        return text("It is 4521." if known else "I don't know your locker code.")
    return echo(request)


# -- one conversation across channels ---------------------------------------------------------


async def test_ann_asks_on_slack_about_what_she_said_on_telegram_and_is_answered_on_slack_once(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram, fake_slack: FakeSlack
) -> None:
    fake_llm.responder = remembers
    settings = ann(make_settings, tg, fake_slack, session={"scope": "person"})
    async with running(settings) as gateway:
        talk = Talk(gateway, tg, fake_slack)
        on_telegram = await talk.telegram(FACT)
        on_slack = await talk.slack(QUESTION)
    told, asked = fake_llm.requests
    assert on_telegram == f"echo: {FACT}"
    assert on_slack == "It is 4521."
    assert asked.user_texts == [FACT, QUESTION]  # the Telegram turn, in the Slack turn's request
    said, question = asked.raw_user_texts  # each says where it was written
    assert re.match(rf"\[\d\d:\d\d on telegram\] {FACT}", said)
    assert re.match(rf"\[\d\d:\d\d on slack\] {QUESTION}", question)
    assert "this answer goes to slack" in asked.system_text
    assert told.user_texts == [FACT]
    assert fake_slack.visible(ANN_DM) == ["It is 4521."]  # on Slack, once
    assert fake_slack.count("chat.postMessage", ANN_DM) == 1
    assert tg.visible(ANN_TG) == [f"echo: {FACT}"]  # nothing more on Telegram


async def test_without_the_setting_each_chat_is_its_own_conversation(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram, fake_slack: FakeSlack
) -> None:
    fake_llm.responder = remembers
    settings = ann(make_settings, tg, fake_slack)  # session.scope stays "chat"
    async with running(settings) as gateway:
        talk = Talk(gateway, tg, fake_slack)
        await talk.telegram(FACT)
        on_slack = await talk.slack(QUESTION)
        usage = await gateway.store.usage.since(3_600, by="person")
    _, asked = fake_llm.requests
    assert on_slack == "I don't know your locker code."
    assert asked.user_texts == [QUESTION]
    assert " on slack]" not in asked.raw_user_texts[-1]
    # still one person: both turns count as Ann's (her key is her first address)
    assert {u.key: u.turns for u in usage} == {f"telegram:{ANN_TG}": 2}


async def test_a_person_alone_on_one_setting_has_one_conversation_and_groups_stay_their_own(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram, fake_slack: FakeSlack
) -> None:
    fake_llm.responder = remembers
    settings = make_settings(
        telegram=section(tg, allow_from=[str(ANN_TG)], group_allow_from=["-100777"]),
        slack=slack_section(fake_slack, allow_from=[ANN_SLACK]),
        people={
            "ann": {
                "ids": [f"telegram:{ANN_TG}", f"slack:{ANN_SLACK}"],
                "session": "person",
            }
        },
    )
    async with running(settings) as gateway:
        talk = Talk(gateway, tg, fake_slack)
        await talk.telegram(FACT)
        await tg.say(
            f"@{tg.username} {QUESTION}", user_id=ANN_TG, chat_id=-100777, chat_type="supergroup"
        )
        await tg.wait_for(lambda: bool(tg.visible(-100777)))
        await asyncio.wait_for(gateway.wait_idle(), 10)
        on_slack = await talk.slack(QUESTION)
    assert tg.visible(-100777) == ["I don't know your locker code."]  # the group's own
    assert on_slack == "It is 4521."


@pytest.mark.parametrize("home", [None, f"telegram:{ANN_TG}"])
async def test_a_reminder_goes_to_the_chat_ann_used_last_or_her_home(
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    tg: FakeTelegram,
    fake_slack: FakeSlack,
    home: str | None,
) -> None:
    """Set on Telegram, due after Ann moved to Slack: it reaches her on Slack (or at her
    ``home``), once, and the one conversation records it."""
    clock = FakeClock(datetime(2026, 11, 20, 9, 0, tzinfo=UTC))
    ids = [f"telegram:{ANN_TG}", f"slack:{ANN_SLACK}"]
    settings = make_settings(
        telegram=section(tg, allow_from=[str(ANN_TG)]),
        slack=slack_section(fake_slack, allow_from=[ANN_SLACK]),
        people={"ann": {"ids": ids, **({"home": home} if home else {})}},
        session={"scope": "person"},
    )
    stretch = {"action": "add", "schedule": "in 20 minutes", "message": "Stretch your legs!"}
    fake_llm.queue(calls(("cron", stretch)), text("I'll remind you in 20 minutes."))
    async with running(settings, clock) as gateway:
        talk = Talk(gateway, tg, fake_slack)
        await talk.telegram("remind me in 20 minutes to stretch")
        await talk.slack("back at my desk")
        await clock.advance(minutes=21)
        where = (
            (lambda: len(tg.visible(ANN_TG)) == 2)
            if home
            else (lambda: len(fake_slack.visible(ANN_DM)) == 2)
        )
        await (tg.wait_for(where) if home else fake_slack.until(where, 10))
        await asyncio.wait_for(gateway.wait_idle(), 10)
        _, history = await gateway.store.history.load(f"person:telegram:{ANN_TG}", limit=10)
    on_telegram, on_slack = tg.visible(ANN_TG), fake_slack.visible(ANN_DM)
    if home:
        assert on_telegram == ["I'll remind you in 20 minutes.", "Stretch your legs!"]
        assert on_slack == ["echo: back at my desk"]
    else:
        assert on_telegram == ["I'll remind you in 20 minutes."]
        assert on_slack == ["echo: back at my desk", "Stretch your legs!"]
    assert history[-1].body["content"] == "Stretch your legs!"


def test_an_address_belongs_to_one_person_and_a_named_person_lists_theirs(
    make_settings: SettingsFactory,
) -> None:
    with pytest.raises(ValidationError, match=r"people\.bob\.ids.*already people\.ann"):
        make_settings(people={"ann": {"ids": ["telegram:1"]}, "bob": {"ids": ["telegram:1"]}})
    with pytest.raises(ValidationError, match=r"people\.ann\.ids"):
        make_settings(people={"ann": {"timezone": "Europe/Berlin"}})
    with pytest.raises(ValidationError, match=r"people\.ann\.home"):
        make_settings(people={"ann": {"ids": ["telegram:1"], "home": "slack:D1"}})


# -- /link --------------------------------------------------------------------------------


async def test_a_link_code_links_once_within_ten_minutes_and_only_behind_the_gate(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram, fake_slack: FakeSlack
) -> None:
    fake_llm.responder = remembers
    clock = FakeClock(datetime(2026, 11, 20, 9, 0, tzinfo=UTC))
    settings = make_settings(
        telegram=section(tg, allow_from=[str(ANN_TG)]),
        slack=slack_section(fake_slack, allow_from=[ANN_SLACK, "U0BEN"]),
        session={"scope": "person"},
    )
    async with running(settings, clock) as gateway:
        talk = Talk(gateway, tg, fake_slack)
        code = _code(await talk.telegram("/link"))
        stranger = await talk.slack(f"/link {code}", user="U0EVE", dm="D0EVE")
        linked = await talk.slack(f"/link {code}")
        again = await talk.slack(f"/link {code}", user="U0BEN", dm="D0BEN")
        later = _code(await talk.telegram("/link"))
        await clock.advance(minutes=10, seconds=1)
        expired = await talk.slack(f"/link {later}", user="U0BEN", dm="D0BEN")
        await talk.telegram(FACT)
        answer = await talk.slack(QUESTION)
        eve = await gateway.store.links.person_of("slack:U0EVE")
        ben = await gateway.store.links.person_of("slack:U0BEN")
        audit = [e.kind for e in await gateway.store.audit.recent(50)]
    assert "pairing code" in stranger  # a stranger is asked to pair: the code is not looked at
    assert eve is None
    assert linked.startswith(f"Linked: slack:{ANN_SLACK} is one person with telegram:{ANN_TG}")
    assert again.startswith(f"No open link code {code}")  # used once
    assert expired.startswith(f"No open link code {later}")  # ten minutes passed
    assert ben is None
    assert answer == "It is 4521."  # linked: one conversation
    assert audit.count("person-linked") == 1 and audit.count("link-code") == 2
    assert audit.count("refused") == 2  # the replayed and the lapsed code


@pytest.mark.parametrize("scope", ["person", "chat"])
async def test_linked_chats_go_on_with_the_conversation_of_the_chat_that_asked(
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    tg: FakeTelegram,
    fake_slack: FakeSlack,
    scope: str,
) -> None:
    """Ann told the assistant her locker code on Telegram, then linked her Slack: with one
    conversation across her chats, her question on Slack is answered from it (and on
    Telegram as well); with a conversation per chat, Slack's is its own."""
    fake_llm.responder = remembers
    settings = make_settings(
        telegram=section(tg, allow_from=[str(ANN_TG)]),
        slack=slack_section(fake_slack, allow_from=[ANN_SLACK]),
        session={"scope": scope},
    )
    async with running(settings) as gateway:
        talk = Talk(gateway, tg, fake_slack)
        await talk.telegram(FACT)
        code = _code(await talk.telegram("/link"))
        linked = await talk.slack(f"/link {code}")
        on_slack = await talk.slack(QUESTION)
        on_telegram = await talk.telegram(QUESTION)
        leftover = await gateway.store.kv.get(f"link-asked-in:{code}")
    assert linked.startswith(f"Linked: slack:{ANN_SLACK} is one person with telegram:{ANN_TG}")
    if scope == "person":
        assert linked.endswith(
            f"Our conversation from telegram:{ANN_TG} goes on in all of these chats."
        )
        assert on_slack == "It is 4521."
        assert on_telegram == "It is 4521."
        asked = fake_llm.requests[-1]  # the Telegram question, after the Slack one: once each
        assert asked.user_texts.count(FACT) == 1 and asked.user_texts.count(QUESTION) == 2
        # what was carried over says where it was written, as what follows does
        assert re.match(rf"\[\d\d:\d\d on telegram\] {FACT}\b", asked.raw_user_texts[0])
    else:
        assert linked.endswith("(/unlink undoes it).")
        assert on_slack == "I don't know your locker code."
        assert on_telegram == "It is 4521."  # Telegram's own conversation
    assert leftover is None  # nothing kept of the code


@pytest.mark.parametrize("scope", ["person", "chat"])
async def test_what_was_kept_of_the_chat_that_joins_follows_the_person(
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    tg: FakeTelegram,
    fake_slack: FakeSlack,
    scope: str,
) -> None:
    """Ann's Slack had notes and a past conversation of its own before she linked it to her
    Telegram: afterwards both are hers on Telegram, her memory and memory search."""
    settings = make_settings(
        telegram=section(tg, allow_from=[str(ANN_TG)]),
        slack=slack_section(fake_slack, allow_from=[ANN_SLACK]),
        session={"scope": scope},
    )
    fake_llm.queue(
        calls(("memory_append", {"content": "Locker code: 4521", "to": "memory"})),
        text("Noted."),
        text("Good to know."),
    )
    async with running(settings) as gateway:
        talk = Talk(gateway, tg, fake_slack)
        await talk.slack("note my locker code: 4521")
        await talk.slack("I parked at level 3, parking spot 42")
        workspace = gateway.settings.workspace_dir
        before = workspace / "memory" / "people" / f"slack-{ANN_SLACK}" / "MEMORY.md"
        assert "Locker code: 4521" in before.read_text()
        code = _code(await talk.telegram("/link"))
        assert (await talk.slack(f"/link {code}")).startswith("Linked: ")
        fake_llm.queue(calls(("memory_search", {"query": "parking spot"})), text("Level 3."))
        await talk.telegram("where did I park?")
        asked, searched = fake_llm.requests[-2:]
        await talk.telegram("research the best bike lock and compare prices")
        fake_llm.queue(calls(("memory_search", {"query": "bike lock"})), text("A U-lock."))
        await talk.telegram("which lock did I ask about?")
    assert "Locker code: 4521" in asked.system_text  # her notes from Slack are hers here
    assert f"From slack:{ANN_SLACK}" in asked.system_text
    assert not before.parent.exists()  # moved, not copied
    assert "[parking] [spot] 42" in searched.tool_results[0]
    found = fake_llm.requests[-1].tool_results[-1]
    where = "in our conversation across your chats" if scope == "person" else "on telegram"
    assert f"you said {where}" in found and "[bike] [lock]" in found
    assert "guidance" not in found  # what she said, not what the model was advised


async def test_a_second_link_goes_on_with_the_conversation_already_shared(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """Ann's Telegram and Slack are one conversation; then her Discord asks for a code and
    Telegram sends it: the three go on with what Telegram and Slack shared, not with the
    Discord chat's one message."""
    fake_llm.responder = remembers
    allowed = {"allow_from": ["ann"]}
    settings = make_settings(
        telegram=allowed, slack=allowed, discord=allowed, session={"scope": "person"}
    )
    chats = {name: MemoryChannel(name) for name in ("telegram", "slack", "discord")}
    async with Gateway(settings, channels=list(chats.values())) as gateway:

        async def say(name: str, words: str) -> str:
            channel = chats[name]
            await channel.push(words, chat_id="ann", sender_id="ann")
            [*_, answer] = await channel.wait_for(len(channel.sent) + 1)
            await asyncio.wait_for(gateway.wait_idle(), 10)
            return answer.text

        await say("telegram", FACT)
        await say("slack", f"/link {_code(await say('telegram', '/link'))}")
        await say("discord", "hi there")
        linked = await say("telegram", f"/link {_code(await say('discord', '/link'))}")
        on_discord = await say("discord", QUESTION)
    assert linked.endswith(
        "Our conversation from telegram:ann, slack:ann goes on in all of these chats."
    )
    assert on_discord == "It is 4521."


async def test_after_ten_refused_codes_a_chat_cannot_link_even_with_the_right_one(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram, fake_slack: FakeSlack
) -> None:
    settings = make_settings(
        telegram=section(tg, allow_from=[str(ANN_TG)]),
        slack=slack_section(fake_slack, allow_from=[ANN_SLACK, "U0BEN"]),
    )
    async with running(settings) as gateway:
        talk = Talk(gateway, tg, fake_slack)
        code = _code(await talk.telegram("/link"))
        for guess in range(10):
            wrong = await talk.slack(f"/link ZZZZZZ{guess:02}", user="U0BEN", dm="D0BEN")
            assert wrong.startswith("No open link code")
        stopped = await talk.slack(f"/link {code}", user="U0BEN", dm="D0BEN")
        ben = await gateway.store.links.person_of("slack:U0BEN")
        linked = await talk.slack(f"/link {code}")  # another chat is not held back
    assert stopped.startswith("Too many link codes from this chat were refused")
    assert ben is None
    assert linked.startswith(f"Linked: slack:{ANN_SLACK} is one person with telegram:{ANN_TG}")


async def test_a_member_cannot_link_to_the_owners_address_to_become_the_owner(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram, fake_slack: FakeSlack
) -> None:
    """The owner's code, sent by a member who saw it: nothing is linked until the owner
    confirms; until then the member has a member's tools and not the owner's memory."""
    settings = make_settings(
        telegram=section(tg, owners=[str(ANN_TG)]),
        slack=slack_section(fake_slack, allow_from=["U0MAL"]),
    )
    (settings.workspace_dir / "MEMORY.md").write_text("# Memory\n\nThe safe's code is 9876.\n")
    async with running(settings) as gateway:
        talk = Talk(gateway, tg, fake_slack)
        code = _code(await talk.telegram("/link"))
        tried = await talk.slack(f"/link {code}", user="U0MAL", dm="D0MAL")
        await talk.slack("hello", user="U0MAL", dm="D0MAL")
        asked_owner = tg.visible(ANN_TG)[-1]
        waiting = await gateway.store.links.person_of("slack:U0MAL")
        confirmed = await talk.telegram(f"/link confirm {code}")
        await talk.slack("hello again", user="U0MAL", dm="D0MAL")
        audit = [e.kind for e in await gateway.store.audit.recent(50)]
    as_member, as_linked = (r for r in fake_llm.requests if "hello" in r.last_user_text)
    assert "the owner has to confirm it first; nothing is linked" in tried
    assert waiting is None
    assert f"/link confirm {code}" in asked_owner and "slack:U0MAL" in asked_owner
    assert "9876" not in as_member.system_text  # not the owner's memory
    assert "exec" not in _tools(as_member)  # a member's tools
    assert confirmed.startswith(f"Linked: slack:U0MAL is one person with telegram:{ANN_TG}")
    assert "9876" in as_linked.system_text and "exec" in _tools(as_linked)  # the owner's word
    assert "link-waiting" in audit and "person-linked" in audit


async def test_unlink_makes_a_chat_its_own_again_and_config_links_stay(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram, fake_slack: FakeSlack
) -> None:
    fake_llm.responder = remembers
    settings = make_settings(
        telegram=section(tg, allow_from=[str(ANN_TG), "222"]),
        slack=slack_section(fake_slack, allow_from=[ANN_SLACK]),
        people={  # Ann's Telegram alone in config; she links her Slack herself
            "ann": {"ids": [f"telegram:{ANN_TG}"]},
            "bea": {"ids": ["telegram:222", "slack:U0BEA"]},
        },
        session={"scope": "person"},
    )
    async with running(settings) as gateway:
        talk = Talk(gateway, tg, fake_slack)
        code = _code(await talk.telegram("/link"))
        await talk.slack(f"/link {code}")
        unlinked = await talk.slack("/unlink")
        await talk.telegram(FACT)
        answer = await talk.slack(QUESTION)
        in_config = await talk.telegram("/unlink", user=222)
        audit = [e.kind for e in await gateway.store.audit.recent(50)]
    assert unlinked.startswith(f"Unlinked slack:{ANN_SLACK}")
    assert answer == "I don't know your locker code."
    assert "linked in the configuration ([people.bea] ids)" in in_config
    assert "person-unlinked" in audit


class Chats:
    """Ann's direct chats on Telegram and Slack (memory channels), each message waited for."""

    def __init__(self, gateway: Gateway, chats: dict[str, MemoryChannel], run: int = 1) -> None:
        self._gateway, self._chats, self._run = gateway, chats, run
        self._said = 0

    async def say(self, name: str, words: str) -> str:
        channel = self._chats[name]
        self._said += 1  # each message its own platform id, also after a restart
        await channel.push(
            words, chat_id="ann", sender_id="ann", message_id=f"{self._run}-{self._said}"
        )
        [*_, answer] = await channel.wait_for(len(channel.sent) + 1)
        await asyncio.wait_for(self._gateway.wait_idle(), 10)
        return answer.text

    async def link(self) -> None:
        code = _code(await self.say("telegram", "/link"))
        assert (await self.say("slack", f"/link {code}")).startswith("Linked: ")


def two_chats() -> dict[str, MemoryChannel]:
    return {name: MemoryChannel(name) for name in ("telegram", "slack")}


PORTO = "I am planning a trip to Porto in May"


@pytest.mark.parametrize("way", ["/unlink in the chat", "/unlink slack:ann", "control center"])
async def test_after_an_unlink_ann_keeps_the_conversation_and_the_chat_that_left_starts_afresh(
    make_settings: SettingsFactory, fake_llm: FakeLLM, way: str
) -> None:
    """Ann's Telegram and Slack share one conversation; her Slack leaves (however it is
    unlinked): Telegram, her first address, goes on with what she said minutes ago (not
    with its chat from before the link), and Slack starts afresh, as it is told."""
    allowed = {"allow_from": ["ann"]}
    settings = make_settings(telegram=allowed, slack=allowed, session={"scope": "person"})
    chats = two_chats()
    async with Gateway(settings, channels=list(chats.values())) as gateway:
        ann = Chats(gateway, chats)
        await ann.say("slack", "my old slack chat")  # before the link, each its own
        await ann.say("telegram", "my old telegram chat")
        await ann.link()
        await ann.say("slack", PORTO)
        await ann.say("telegram", "My favourite colour is teal")
        if way == "control center":
            unlinked = await gateway.unlink_address("slack:ann", by="web:owner")
        elif way == "/unlink slack:ann":
            unlinked = await ann.say("telegram", "/unlink slack:ann")
        else:
            unlinked = await ann.say("slack", "/unlink")
        await ann.say("telegram", "where am I going in May?")
        kept = fake_llm.requests[-1]
        await ann.say("slack", "hello again")
        fresh = fake_llm.requests[-1]
        await ann.say("telegram", "and my favourite colour?")
        after = fake_llm.requests[-1]
    assert PORTO in kept.user_texts and "My favourite colour is teal" in kept.user_texts
    assert fresh.user_texts == ["hello again"]  # nothing of before: not the old Slack chat
    assert "hello again" not in after.user_texts and PORTO in after.user_texts
    assert unlinked.startswith("Unlinked slack:ann from telegram:ann: each is its own again.")
    starts = "This chat starts" if way == "/unlink in the chat" else "slack:ann starts"
    assert f"{starts} a fresh conversation" in unlinked
    assert "ours goes on in telegram:ann's chats" in unlinked


async def test_relinking_goes_on_with_what_was_said_in_between(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    allowed = {"allow_from": ["ann"]}
    settings = make_settings(telegram=allowed, slack=allowed, session={"scope": "person"})
    chats = two_chats()
    async with Gateway(settings, channels=list(chats.values())) as gateway:
        ann = Chats(gateway, chats)
        await ann.link()
        await ann.say("telegram", PORTO)
        await ann.say("slack", "/unlink")
        await ann.say("telegram", "I booked the flight on Tuesday")  # alone, in between
        code = _code(await ann.say("telegram", "/link"))
        relinked = await ann.say("slack", f"/link {code}")
        await ann.say("slack", "when did I book?")
        asked = fake_llm.requests[-1]
    assert PORTO in asked.user_texts and "I booked the flight on Tuesday" in asked.user_texts
    assert relinked.endswith("Our conversation from telegram:ann goes on in all of these chats.")


async def test_the_person_scope_turned_on_goes_on_with_the_chat_ann_writes_from(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """Ann is one person on Telegram and Slack by config, each chat its own conversation;
    the owner turns ``session.scope = "person"`` on (a restart): her next message goes on
    with what she said on Telegram, not with an empty conversation."""
    fake_llm.responder = remembers
    allowed = {"allow_from": ["ann"]}
    people = {"ann": {"ids": ["telegram:ann", "slack:ann"]}}
    before = make_settings(telegram=allowed, slack=allowed, people=people)
    chats = two_chats()
    async with Gateway(before, channels=list(chats.values())) as gateway:
        await Chats(gateway, chats).say("telegram", FACT)
    after = make_settings(
        telegram=allowed, slack=allowed, people=people, session={"scope": "person"}
    )
    chats = two_chats()
    async with Gateway(after, channels=list(chats.values())) as gateway:
        ann = Chats(gateway, chats, run=2)
        on_telegram = await ann.say("telegram", QUESTION)
        on_slack = await ann.say("slack", QUESTION)
    assert on_telegram == "It is 4521."
    assert on_slack == "It is 4521."  # one conversation now
    assert fake_llm.requests[-1].user_texts == [FACT, QUESTION, QUESTION]
    assert re.match(rf"\[\d\d:\d\d on telegram\] {FACT}\b", fake_llm.requests[-1].raw_user_texts[0])


# -- everything per person follows the person ------------------------------------------------


async def test_pairing_and_time_zone_follow_the_person_to_their_other_address(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram, fake_slack: FakeSlack
) -> None:
    """Ann paired on Telegram is let in on Slack, whose policy would ask her to pair, and
    her zone in config is hers on both."""
    settings = make_settings(
        telegram=section(tg, allow_from=[], dm_policy="pairing"),
        slack=slack_section(fake_slack, dm_policy="pairing"),
        people={
            "ann": {"ids": [f"telegram:{ANN_TG}", f"slack:{ANN_SLACK}"], "timezone": "Asia/Tokyo"}
        },
    )
    async with running(settings) as gateway:
        talk = Talk(gateway, tg, fake_slack)
        asked = await talk.telegram("hello")
        found = re.search(r"pairing code is ([A-Z0-9]{8})", asked)
        assert found is not None, asked
        await PairingDesk.of(gateway.store).decide(found.group(1), approve=True, by="test")
        await tg.wait_for(lambda: len(tg.visible(ANN_TG)) == 2)  # the welcome
        on_slack = await talk.slack("good morning")
        on_telegram = await talk.telegram("and here?")
    assert on_slack == "echo: good morning" and on_telegram == "echo: and here?"
    assert all("time zone JST" in r.system_text for r in fake_llm.requests)


async def test_the_owner_approves_from_their_other_address(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram, fake_slack: FakeSlack
) -> None:
    """A member's command waits for the owner, asked on Telegram; the owner, on Slack
    (an address config gives her, listed nowhere in [slack]), approves it there."""
    settings = make_settings(
        telegram=section(tg, owners=[str(ANN_TG)], allow_from=["333"]),
        slack=slack_section(fake_slack),
        people={"olga": {"ids": [f"telegram:{ANN_TG}", f"slack:{ANN_SLACK}"]}},
        tools={"approvals": "ask", "exec": {"sandbox": "off"}},
    )
    fake_llm.queue(calls(("exec", {"command": COMMAND})), text("Done, it ran."))
    async with running(settings) as gateway:
        talk = Talk(gateway, tg, fake_slack)
        await tg.say("run it", user_id=333, chat_id=333, first_name="Max")
        await tg.wait_for(lambda: bool(tg.visible(ANN_TG)))
        request = tg.visible(ANN_TG)[-1]
        found = re.search(r"/approve ([A-Z0-9]{8})", request)
        assert found is not None, request
        decided = await talk.slack(f"/approve {found.group(1)}")
        await tg.wait_for(lambda: "Done, it ran." in tg.visible(333))
        await asyncio.wait_for(gateway.wait_idle(), 10)
    assert "Approved" in decided
    assert runs(settings) == 1


def _code(reply: str) -> str:
    found = _CODE.search(reply)
    assert found is not None, reply
    return found.group(1)


def _tools(request: Recorded) -> set[str]:
    return {
        (tool.get("function") or tool).get("name", "") for tool in request.body.get("tools", [])
    }


async def test_the_web_chat_continues_the_owners_conversation_from_telegram(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """The owner is a person too: their Telegram and the web chat, listed together, are one
    conversation (links the web chat honours like any channel)."""
    fake_llm.responder = remembers
    settings = make_settings(
        web={"port": 0},
        telegram={"token": "1:a", "owners": ["1"]},
        people={"me": {"ids": ["telegram:1", "webchat:owner"]}},
        session={"scope": "person"},
    )
    telegram = MemoryChannel("telegram")
    async with serving(settings, telegram) as (gateway, url, _chat), owner(gateway) as http:
        await telegram.push(FACT, sender_id="1", chat_id="1")
        await telegram.wait_for(1)
        await gateway.wait_idle()
        async with http.post(
            url + "api/chat/messages",
            data=message_form(QUESTION),
            headers={"Origin": url.rstrip("/")},
        ) as response:
            assert response.status == 200
        await gateway.wait_idle()
    asked = fake_llm.requests[-1]
    assert asked.user_texts == [FACT, QUESTION]
    assert "this answer goes to webchat" in asked.system_text
    assert telegram.texts() == [f"echo: {FACT}"]  # the answer went to the web chat


@pytest.mark.slow
async def test_one_persons_chats_are_one_conversation_on_a_cluster(
    tmp_path: Path, make_settings: SettingsFactory, fake_llm: FakeLLM, pg_url: str
) -> None:
    """Two nodes on one database: the person's session is the same whichever chat a message
    came from and whichever node runs its turn, and each answer goes back where it was
    asked, once."""
    fake_llm.responder = remembers

    def node(name: str) -> Settings:
        return make_settings(
            home=tmp_path / name,
            storage={"url": pg_url},
            node={"name": name},
            session={"scope": "person"},
            people={"ann": {"ids": ["telegram:ann", "slack:ann"]}},
            telegram={"allow_from": ["ann"]},
            slack={"allow_from": ["ann"]},
        )

    telegram, slack = MemoryChannel("telegram"), MemoryChannel("slack")
    async with Gateway(node("a"), channels=[telegram, slack]) as a:
        b = Gateway(node("b"), channels=[MemoryChannel("telegram"), MemoryChannel("slack")])
        joining = asyncio.create_task(b.start())  # a standby runs turns, a's channels receive
        try:
            await asyncio.wait_for(b.guard.standby.wait(), 10)
            await telegram.push(FACT, chat_id="ann", sender_id="ann")
            await telegram.wait_for(1)
            await slack.push(QUESTION, chat_id="ann", sender_id="ann")
            [answer] = await slack.wait_for(1)
            await asyncio.wait_for(a.wait_idle(), 10)
        finally:
            joining.cancel()
            await asyncio.gather(joining, return_exceptions=True)
            await b.stop()
    assert answer.text == "It is 4521."
    assert [m.text for m in telegram.sent] == [f"echo: {FACT}"]
    assert [m.text for m in slack.sent] == ["It is 4521."]
    assert len(fake_llm.requests) == 2
