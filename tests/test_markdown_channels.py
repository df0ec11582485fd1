"""What a person reads when the model answers in markdown: every word the model wrote (what
looks like HTML, arithmetic, Python's dunder names), read by the same rules on every channel
that formats answers (channels/_markdown.py), so it does not depend on the app. Through the
gateway, each channel's real client and its fake platform (Synapse for Matrix, the web
server and its socket for the web chat): what the chat shows."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from html.parser import HTMLParser
from typing import Any, Protocol, TypeVar

import aiohttp
import pytest

from channels.matrix.plugin import create as matrix_channel
from channels.signal.plugin import create as signal_channel
from channels.webchat import create as web_chat
from channels.webchat.render import render_markdown
from channels.whatsapp.adapter import WhatsAppChannel
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes import whatsapp
from tests.fakes.llm import FakeLLM, text
from tests.fakes.signal_cli import ACCOUNT, FakeSignal
from tests.fakes.synapse import Homeserver
from tests.fakes.telegram import FakeTelegram, fast_channel, random_token, section, utf16_slice
from tests.test_matrix import Person, until
from tests.test_web_server import message_form, next_event, owner

# -- Telegram in detail, and the web chat showing the same words -------------------------------

# (what the model wrote, what the person sees, what is formatted: (entity, the text it covers))
CORPUS: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("use Vec<String> or the <br> tag", "use Vec<String> or the <br> tag", []),
    ("Type <your-name> here", "Type <your-name> here", []),
    ("parse::<Vec<String>>()", "parse::<Vec<String>>()", []),
    ("f<T>(x)", "f<T>(x)", []),
    ("a <b>bold</b> tag", "a <b>bold</b> tag", []),
    ("salt & pepper, <html> & more", "salt & pepper, <html> & more", []),
    ("- [ ] book flights\n- [x] pick city", "☐ book flights\n☑ pick city", []),
    ("2*3*4 = 24, and x**2**y", "2*3*4 = 24, and x**2**y", []),
    ("Call __init__ before __main__.py runs", "Call __init__ before __main__.py runs", []),
    ("snake_case_names and _emphasis_", "snake_case_names and emphasis", [("italic", "emphasis")]),
    ("**Bold** claim with `code`", "Bold claim with code", [("bold", "Bold"), ("code", "code")]),
    ("这是**重要**的", "这是重要的", [("bold", "重要")]),
    ("- milk\n- eggs\n\n1) flour\n2) sugar", "• milk\n• eggs\n\n1) flour\n2) sugar", []),
    (
        "# Plan\n\nSee [the docs](https://example.org/a_(b)).",
        "Plan\n\nSee the docs.",
        [("bold", "Plan"), ("text_link", "the docs")],
    ),
    (
        "```python\nif a < b and c > d:\n    pass\n```",
        "if a < b and c > d:\n    pass",
        [("pre", "if a < b and c > d:\n    pass")],
    ),
]


def web_chat_shows(markdown: str) -> str:
    """What the web chat shows for ``markdown`` (its HTML without the tags), spaces aside."""
    return "".join(html.unescape(re.sub(r"<[^>]+>", "", render_markdown(markdown))).split())


async def test_an_answer_shows_every_character_the_model_wrote_as_the_web_chat_does(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    people = [100 + number for number in range(len(CORPUS))]  # one chat per answer
    fake_llm.responder = lambda asked: text(CORPUS[int(asked.last_user_text.split()[-1])][0])
    # only the answers: no model call checks what they claim (a reply not in English is asked)
    settings = make_settings(
        telegram=section(tg, allow_from=[str(p) for p in people]),
        agent={"verify_claims": "rules"},
    )
    async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
        for number, person in enumerate(people):
            await tg.say(f"question {number}", chat_id=person, user_id=person)
        await tg.wait_sent(len(CORPUS))
        await gateway.wait_idle()
    for (answer, expected, formatting), person in zip(CORPUS, people, strict=True):
        [(seen, spans)] = tg.formatted(person)
        assert (seen, spans) == (expected, formatting), answer
        unmarked = re.sub(r"(?m)^\s*(•|\d+[.)]) ", "", seen)  # the page draws list markers
        assert "".join(unmarked.split()) == web_chat_shows(answer), answer


# -- the same rules on all five channels ------------------------------------------------------

# (what the model wrote, what the person reads) on every channel that formats answers; nothing
# in these is formatted. A link reads "label (address)" here however the channel shows it (a
# link a person can follow, or the address written after the label where the app links
# nothing), and an image would read "[image address]".
RULES: list[tuple[str, str]] = [
    ("use Vec<String> here", "use Vec<String> here"),
    ("a <b>tag</b>", "a <b>tag</b>"),
    ("2*3*4 = 24", "2*3*4 = 24"),
    ("Call __init__ before __main__.py runs", "Call __init__ before __main__.py runs"),
    ("- [ ] todo\n- [x] done", "☐ todo\n☑ done"),  # the box; where the text has bullets, none
    ("![x](http://evil/)", "!x (http://evil/)"),  # no image to fetch: a link, as on the page
    ("[a](javascript:alert(1))", "[a](javascript:alert(1))"),  # no link
]

Read = tuple[str, list[Any]]  # what a person reads, and what is formatted (the app's terms)
Asks = Callable[[pytest.FixtureRequest, SettingsFactory, int], Awaitable[list[Read]]]
AGENT = {"verify_claims": "rules"}  # only the answers: no model call checks what they claim


class Fake(Protocol):
    async def start(self) -> Any: ...
    async def stop(self) -> None: ...


F = TypeVar("F", bound=Fake)


@asynccontextmanager
async def running(fake: F) -> AsyncIterator[F]:
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


class Page(HTMLParser):
    """What a browser or a Matrix client shows of an answer's HTML (list markers are drawn by
    the app): the text, a link as "label (address)", an image as "[image address]", and the
    formatting tags with the text they cover."""

    FORMATS = frozenset({"strong", "b", "em", "i", "s", "del", "code", "pre", "h1", "h2", "h3"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.opened: list[tuple[str, int, str]] = []
        self.formatted: list[tuple[str, str]] = []

    @classmethod
    def read(cls, markup: str) -> Read:
        page = cls()
        page.feed(markup)
        page.close()
        lines = (line.strip() for line in "".join(page.out).splitlines())
        return "\n".join(line for line in lines if line), page.formatted

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.out.append(f"[image {dict(attrs).get('src')}]")
        elif tag == "br":
            self.out.append("\n")
        elif tag == "a" or tag in self.FORMATS:
            self.opened.append((tag, len("".join(self.out)), str(dict(attrs).get("href"))))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("p", "li", "tr"):
            self.out.append("\n")
        if not self.opened or self.opened[-1][0] != tag:
            return
        _, start, href = self.opened.pop()
        label = "".join(self.out)[start:]
        if tag != "a":
            self.formatted.append((tag, label))
        elif label != href.removeprefix("mailto:"):
            self.out.append(f" ({href})")

    def handle_data(self, data: str) -> None:
        self.out.append(data)


def telegram_reads(shown: str, entities: list[dict[str, Any]]) -> Read:
    """A Telegram message as read: each ``text_link``'s address after its label."""
    formatted = []
    for entity in sorted(entities, key=lambda e: -int(e["offset"])):
        covered = utf16_slice(shown, entity["offset"], entity["length"])
        if entity["type"] != "text_link":
            formatted.insert(0, (entity["type"], covered))
            continue
        end = len(utf16_slice(shown, 0, entity["offset"] + entity["length"]))
        shown = f"{shown[:end]} ({entity['url']}){shown[end:]}"
    return shown, formatted


async def on_telegram(
    request: pytest.FixtureRequest, make_settings: SettingsFactory, questions: int
) -> list[Read]:
    async with running(FakeTelegram(random_token())) as tg:
        settings = make_settings(telegram=section(tg), agent=AGENT)
        async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
            for number in range(questions):
                await tg.say(f"question {number}", chat_id=42, user_id=42)
                await tg.wait_sent(number + 1)
            await gateway.wait_idle()
        return [
            telegram_reads(shown, entities)
            for shown, entities in zip(tg.visible(42), tg.visible_entities(42), strict=True)
        ]


async def on_signal(
    request: pytest.FixtureRequest, make_settings: SettingsFactory, questions: int
) -> list[Read]:
    dana = "+4915112345678"
    async with running(FakeSignal()) as daemon:
        daemon.person(dana, "Dana")
        settings = make_settings(
            signal={"rpc_url": daemon.url, "account": ACCOUNT, "allow_from": [dana]}, agent=AGENT
        )
        channel = signal_channel(settings.signal, settings.channel_context())
        async with Gateway(settings, channels=[channel]) as gateway:
            await daemon.wait_for(lambda: daemon.connections > 0)
            for number in range(questions):
                await daemon.say(dana, f"question {number}")
                await daemon.wait_for(lambda n=number: len(daemon.shown(dana)) > n)
            await gateway.wait_idle()
        return [(made.text, made.params.get("textStyle", [])) for made in daemon.made]


async def on_whatsapp(
    request: pytest.FixtureRequest, make_settings: SettingsFactory, questions: int
) -> list[Read]:
    dana = "4915112345678"
    async with running(whatsapp.FakeGraph()) as graph:
        section = {
            "access_token": whatsapp.TOKEN,
            "phone_number_id": whatsapp.PHONE_NUMBER_ID,
            "app_secret": whatsapp.APP_SECRET,
            "verify_token": whatsapp.VERIFY_TOKEN,
            "base_url": graph.base_url,
            "allow_from": [dana],
        }
        settings = make_settings(whatsapp=section, web={"port": 0}, agent=AGENT)
        channel = WhatsAppChannel(settings.whatsapp, settings.channel_context())
        async with Gateway(settings, channels=[channel]) as gateway:
            assert gateway.web is not None
            url = f"{gateway.web.url}whatsapp/webhook"
            for number in range(questions):
                sent = whatsapp.message(dana, text=f"question {number}")
                await whatsapp.post_signed(url, whatsapp.body(sent))
                await graph.wait_sent(number + 1)
            await gateway.wait_idle()
        return [(shown, []) for shown in graph.visible(dana)]


async def on_matrix(
    request: pytest.FixtureRequest, make_settings: SettingsFactory, questions: int
) -> list[Read]:
    homeserver: Homeserver = request.getfixturevalue("homeserver")
    bot, dana = homeserver.register("bot"), homeserver.register("dana")
    section = {
        "homeserver": homeserver.url,
        "user_id": bot.user_id,
        "access_token": bot.access_token,
        "sync_timeout_seconds": 1,
        "allow_from": [dana.user_id],
        "streaming": False,
    }
    settings = make_settings(matrix=section, agent=AGENT)
    channel = matrix_channel(settings.matrix, settings.channel_context())
    async with aiohttp.ClientSession() as http, Gateway(settings, channels=[channel]) as gateway:
        person = Person(homeserver, dana, http)
        room = await person.room(bot.user_id, direct=True)

        async def answers() -> list[dict[str, Any]]:
            return [
                e["content"]
                for e in await person.events(room)
                if e["sender"] == bot.user_id and e["type"] == "m.room.message"
            ]

        async def joined() -> bool:
            return bot.user_id in await person.members(room)

        await until(joined)
        for number in range(questions):
            await person.say(room, f"question {number}")
            await until(lambda n=number: _more_than(answers(), n))
        await gateway.wait_idle()
        return [Page.read(content["formatted_body"]) for content in await answers()]


async def _more_than(items: Awaitable[list[Any]], count: int) -> bool:
    return len(await items) > count


async def on_the_web_chat(
    request: pytest.FixtureRequest, make_settings: SettingsFactory, questions: int
) -> list[Read]:
    settings = make_settings(web={"port": 0}, agent=AGENT)
    read = []
    async with Gateway(settings, channels=[web_chat(settings)]) as gateway, owner(gateway) as http:
        assert gateway.web is not None
        origin = gateway.web.url.rstrip("/")
        async with http.ws_connect(gateway.web.url + "api/chat/socket", origin=origin) as ws:
            await ws.receive_json()
            for number in range(questions):
                form = message_form(f"question {number}", f"question-{number:04d}")
                url = gateway.web.url + "api/chat/messages"
                async with http.post(url, data=form, headers={"Origin": origin}) as response:
                    assert response.status == 200
                event = await next_event(ws, "message", "assistant")
                read.append(Page.read(event["entry"]["html"]))
        await gateway.wait_idle()
    return read


CHANNELS: dict[str, Asks] = {
    "webchat": on_the_web_chat,
    "telegram": on_telegram,
    "matrix": on_matrix,
    "signal": on_signal,
    "whatsapp": on_whatsapp,
}


@pytest.mark.timeout(120)  # Matrix's first test starts Synapse
@pytest.mark.parametrize("channel", list(CHANNELS))
async def test_every_channel_shows_an_answer_by_the_same_rules(
    channel: str, request: pytest.FixtureRequest, make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = lambda asked: text(RULES[int(asked.last_user_text.split()[-1])][0])
    read = await CHANNELS[channel](request, make_settings, len(RULES))
    misread = [
        (answer, seen)
        for (answer, shown), seen in zip(RULES, read, strict=True)
        if seen != (shown, [])
    ]
    assert misread == []  # (what the model wrote, what the person read instead)
