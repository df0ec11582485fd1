"""The v19 tables on both engines: group context kept once and bounded, people's zones,
chat names and the chats a person has sent to."""

from __future__ import annotations

from gateway.store.group_context import KEEP_PER_CHAT
from tests.backends import StoreFactory


async def test_group_context_is_kept_once_per_message_and_bounded_per_chat(
    make_store: StoreFactory,
) -> None:
    async with make_store() as store:
        heard = store.group_context
        for n in range(KEEP_PER_CHAT + 5):
            await heard.keep(
                channel="t", chat_key="t:g", platform_id=f"g:{n}", author="Ann", text=f"m{n}", at=n
            )
        await heard.keep(
            channel="t", chat_key="t:g", platform_id="g:7", author="x", text="again", at=1
        )
        await heard.keep(
            channel="t", chat_key="t:h", platform_id="h:1", author="Bo", text="other", at=1
        )
        newest = await heard.recent("t:g", 3)
        oldest_left = (await heard.recent("t:g", 10_000))[0]
        await heard.forget("t:g", newest[-1].id)
        after = await heard.recent("t:g", 10)
        other = await heard.recent("t:h", 10)
    assert [h.text for h in newest] == [f"m{KEEP_PER_CHAT + n}" for n in (2, 3, 4)]
    assert oldest_left.text == "m5"  # the oldest beyond the cap went
    assert after == [] and [h.text for h in other] == ["other"]


async def test_zones_chat_names_and_chats_sent_to(make_store: StoreFactory) -> None:
    async with make_store() as store:
        people = store.people
        before = await people.zone("telegram:1")
        await people.set_zone("telegram:1", "Europe/Lisbon")
        await people.set_zone("telegram:1", "America/New_York")
        await people.name_chat("telegram", "-100", "Family", "group")
        await people.name_chat("telegram", "-100", "Family 🏡", "group")
        await people.sent_to("telegram:1", "slack", "C1")
        await people.sent_to("telegram:1", "slack", "C1")
        zone = await people.zone("telegram:1")
        chats = await people.known_chats("telegram")
        sent = await people.has_sent_to("telegram:1", "slack", "C1")
        elsewhere = await people.has_sent_to("telegram:1", "slack", "C2")
    assert (before, zone) == (None, "America/New_York")
    assert [(c.chat_id, c.name) for c in chats] == [("-100", "Family 🏡")]
    assert sent and not elsewhere
