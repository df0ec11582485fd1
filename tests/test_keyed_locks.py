"""The per-chat lock the Discord, Slack and WhatsApp channels journal through
(channels/keyed.py): a chat's messages one at a time in arrival order, other chats not held
up, and nothing kept for a chat nobody is writing in."""

from __future__ import annotations

import asyncio

import pytest

from channels.keyed import KeyedLocks


async def test_one_chat_in_arrival_order_while_another_chat_goes_on() -> None:
    locks = KeyedLocks()
    first_in = asyncio.Event()
    let_first_go = asyncio.Event()
    journaled: list[str] = []

    async def journal(chat: str, text: str, hold: bool = False) -> None:
        async with locks(chat):
            if hold:
                first_in.set()
                await let_first_go.wait()
            journaled.append(text)

    first = asyncio.create_task(journal("dana", "1", hold=True))
    await first_in.wait()
    later = [asyncio.create_task(journal("dana", str(n))) for n in (2, 3, 4)]
    await journal("lee", "other chat")  # not held up by Dana's slow first message
    assert journaled == ["other chat"]
    assert len(locks) == 1  # Dana's: held, with three waiting
    let_first_go.set()
    await asyncio.gather(first, *later)
    assert journaled == ["other chat", "1", "2", "3", "4"]
    assert len(locks) == 0  # nobody writes: nothing kept


async def test_a_failure_releases_the_chat_and_forgets_it() -> None:
    locks = KeyedLocks()
    with pytest.raises(RuntimeError):
        async with locks("dana"):
            raise RuntimeError("journal refused")
    assert len(locks) == 0
    async with asyncio.timeout(1), locks("dana"):  # not left locked
        pass
