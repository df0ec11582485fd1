"""Group context: what was said before the bot was addressed, and what a message quotes.

What a person in a group notices: "@bot what do you think of that?" is answered knowing what
"that" was (the messages since the bot last spoke, the message replied to), even after
/new; other people's words never end up in anyone's memory; chatter never costs a turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, calls, text
from tests.fakes.telegram import FakeTelegram, fast_channel, section

GROUP = -100777
DANA, ALICE, BOB = 42, 77, 78


def _memory_text(workspace: Path) -> str:
    return "\n".join(
        p.read_text(encoding="utf-8") for p in (workspace / "memory").rglob("*.md") if p.is_file()
    )


async def test_earlier_and_quoted_messages_reach_the_model_but_never_memory(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    settings = make_settings(
        telegram=section(
            tg, allow_from=[str(DANA), str(ALICE), str(BOB)], group_allow_from=[str(GROUP)]
        ),
        agent={"reflection": True},  # on: it must still not write others' words anywhere
    )
    in_group: dict[str, Any] = {"chat_id": GROUP, "chat_type": "supergroup"}

    async def say(text: str, user: int, name: str, **kwargs: Any) -> dict[str, Any]:
        update = await tg.say(text, user_id=user, first_name=name, **in_group, **kwargs)
        await tg.wait_confirmed(int(update["update_id"]) + 1)
        await gateway.wait_idle()
        message: dict[str, Any] = update["message"]
        return message

    fake_llm.queue(
        text("Hello!"),
        # The model tries to keep what others said: refused in a group, and no reflection.
        calls(("memory_append", {"content": "Bob: the rent goes up 5% in January"})),
        text("A 5% rise with the lease ending in May: worth negotiating now."),
        text("Bob said the rent goes up 5% in January."),
    )
    async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
        await say("before anyone asked the bot", STRANGER := 79, "Eve")  # not allowed: not kept
        await say("an old remark from before the greeting", ALICE, "Alice")
        await say(f"@{tg.username} hello", DANA, "Dana")
        rent = await say("the rent goes up 5% in January " + "(details) " * 30, BOB, "Bob")
        await say("and our lease ends in May", ALICE, "Alice")
        assert len(fake_llm.requests) == 1  # the chatter started no turn
        await say(f"@{tg.username} what do you think of that?", DANA, "Dana", reply_to=rent)
        await say(f"/new@{tg.username}", DANA, "Dana")
        await say(f"@{tg.username} remind me what he said?", DANA, "Dana", reply_to=rent)
    first, asked, answered, after_new = fake_llm.requests
    assert "an old remark from before the greeting" in first.last_user_text
    said = asked.last_user_text
    assert "what do you think of that?" in said
    assert "Bob: the rent goes up 5% in January" in said  # labelled with who said it
    assert "Alice: and our lease ends in May" in said
    assert "[replying to a message by Bob" in said and "> the rent goes up 5%" in said
    [refused] = [m for m in answered.body["messages"] if m["role"] == "tool"]
    assert "never written to memory" in refused["content"]  # told to the model
    assert "an old remark" not in said  # shown once, with the greeting
    assert "before anyone asked the bot" not in json.dumps([r.body for r in fake_llm.requests])
    # After /new the conversation is gone, but the quoted message still comes with the reply.
    assert "> the rent goes up 5%" in after_new.last_user_text
    assert "lease ends in May" not in after_new.last_user_text
    assert len(fake_llm.requests) == 4  # greeting, two calls, the reply after /new: no reflection
    memory = _memory_text(settings.workspace_dir)
    assert "rent" not in memory and "lease" not in memory
    assert STRANGER  # named above for readability
