"""A message whose turn kills the process on every attempt is set aside, never a wedged chat.

``switchboard run`` is killed (SIGKILL) each time its turn for the message reaches the model,
as a tool or an answer that crashes the process would: after ``agent.max_resume_attempts``
resumptions the next start closes the turn with one notice to the person and one to the
owner, the chat answers its next message, and later restarts never run it again
(gateway/runtime/turns/set_aside.py).
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM, Recorded, Step, echo, held
from tests.fakes.telegram import FakeTelegram
from tests.faults.test_crash_mid_send import gateway, settled
from tests.nodes import telegram_env
from tests.test_cli import switchboard

pytestmark = pytest.mark.slow

OWNER, MEMBER = 42, 77


def attempts(fake_llm: FakeLLM) -> int:
    """How often a turn for the poisoned message reached the model."""
    return sum(r.last_user_text == "poison" for r in fake_llm.requests)


async def reached_model(fake_llm: FakeLLM, count: int) -> None:
    async with fake_llm.arrived, asyncio.timeout(30):
        await fake_llm.arrived.wait_for(lambda: attempts(fake_llm) >= count)


@pytest.mark.timeout(240)
async def test_a_message_that_kills_the_process_every_time_is_set_aside_once(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    never = asyncio.Event()

    def answers(request: Recorded) -> Step:  # the poisoned turn never gets an answer
        return held(never) if request.last_user_text == "poison" else echo(request)

    fake_llm.responder = answers
    home = tmp_path / "home"
    env = telegram_env(
        home,
        fake_llm,
        tg,
        SWITCHBOARD_TELEGRAM__OWNERS=str(OWNER),
        SWITCHBOARD_AGENT__MAX_RESUME_ATTEMPTS="1",  # one resumption: two attempts in all
    )
    await switchboard("onboard", env=env)

    for attempt in (1, 2):
        async with gateway(env) as process:
            if attempt == 1:  # the owner's chat is where the owner hears of it
                await tg.say("hello", chat_id=OWNER, user_id=OWNER)
                await tg.wait_for(lambda: tg.visible(OWNER) == ["echo: hello"], 30)
                await tg.say("poison", chat_id=MEMBER, user_id=MEMBER, first_name="Sam")
            await reached_model(fake_llm, attempt)
            process.send_signal(signal.SIGKILL)  # the turn takes the process down
            await process.wait()

    async with gateway(env):  # the third start sets it aside
        await tg.wait_for(lambda: len(tg.visible(MEMBER)) == 1, 30)
        await tg.say("are you there?", chat_id=MEMBER, user_id=MEMBER, first_name="Sam")
        await tg.wait_for(lambda: len(tg.visible(MEMBER)) == 2, 30)
        await settled(home)
    [aside, answer] = tg.visible(MEMBER)
    assert "set it aside" in aside
    assert answer == "echo: are you there?"
    hello, told = tg.visible(OWNER)  # one notice for the owner, in the owner's chat
    assert hello == "echo: hello"
    assert "A message from Sam in telegram:77 was set aside" in told
    assert "“poison”" in told

    async with gateway(env):  # another restart: nothing of it runs again
        await tg.say("still there?", chat_id=MEMBER, user_id=MEMBER, first_name="Sam")
        await tg.wait_for(lambda: len(tg.visible(MEMBER)) == 3, 30)
        await settled(home)
    assert tg.visible(MEMBER)[2] == "echo: still there?"
    assert attempts(fake_llm) == 2
    assert len(tg.visible(OWNER)) == 2
