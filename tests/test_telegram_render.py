"""What a person reads on Telegram when the model answers in markdown: every word the model
wrote (what looks like HTML, arithmetic, Python's dunder names), formatted as the web chat
formats the same answer. Through the gateway, python-telegram-bot and the fake Bot API: the
text and the entities the chat shows."""

from __future__ import annotations

import html
import re

from channels.webchat.render import render_markdown
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, text
from tests.fakes.telegram import FakeTelegram, fast_channel, section

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
