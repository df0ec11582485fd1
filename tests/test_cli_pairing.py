"""``switchboard pairing`` in this process, beside a gateway running on the same home: what
an approval, a denial and a revocation do to who may talk to the bot, and what each says."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from gateway.cli.main import main
from gateway.config.settings import load_settings
from gateway.runtime.app import Gateway
from gateway.store import Store
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.test_live_settings import write_home


def home() -> Path:
    return Path(os.environ["SWITCHBOARD_HOME"])  # the test's own (tests/conftest.py)


async def requested(sender: str) -> str:
    """A pairing code ``sender`` got on Telegram, as the gateway gives one."""
    async with Store(home() / "data" / "switchboard.db") as store:
        made = await store.pairings.request(
            channel="telegram", sender_id=sender, sender_name="Mal", chat_id=sender
        )
    assert made.request is not None
    return made.request.code


async def test_a_revoked_owner_can_no_longer_act_as_one_nor_talk_to_the_bot(
    fake_llm: FakeLLM, tg: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    """`approve --owner` puts the address into telegram.owners; `revoke` took only the
    pairing away and said "Revoked", and the owner went on talking with every right."""
    telegram = {"token": tg.token, "base_url": tg.base_url, "poll_timeout_seconds": 1}
    write_home(home(), fake_llm, telegram=telegram)
    code = await requested("555")
    assert await asyncio.to_thread(main, ["pairing", "approve", code, "--owner"]) == 0
    async with Gateway(load_settings(home=home())):
        await tg.say("/model", chat_id=555, user_id=555)
        await tg.wait_sent(2, chat_id=555)  # the welcome, and the answer
        assert any(text.startswith("Models: ") for text in tg.texts(555))  # an owner's command
        capsys.readouterr()
        revoked = await asyncio.to_thread(main, ["pairing", "revoke", "telegram", "555"])
        out = capsys.readouterr().out
        await tg.say("still here", chat_id=555, user_id=555)
        *_, refused = await tg.wait_sent(3, chat_id=555)
    assert revoked == 0
    assert (
        "Revoked telegram user 555: their pairing, their place in telegram.owners (config.toml)."
        in out
    )
    assert "telegram.owners = []" in out and "applied by the running gateway" in out, out
    assert "pairing code" in refused.params["text"]  # a stranger again: a code, nothing else
    assert fake_llm.requests == []  # "still here" reached no model
    assert 'owners = ["555"]' not in (home() / "config.toml").read_text()


async def test_revoking_an_owner_the_environment_names_says_where_they_still_are(
    fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_home(home(), fake_llm)
    monkeypatch.setenv("SWITCHBOARD_TELEGRAM__OWNERS", "555")
    assert await asyncio.to_thread(main, ["pairing", "revoke", "telegram", "555"]) == 1
    assert capsys.readouterr().err == (
        "switchboard: not revoked: 555 is in telegram.owners, set by environment variable "
        "SWITCHBOARD_TELEGRAM__OWNERS: take it out there\n"
    )


async def test_revoking_an_address_of_a_person_says_their_other_address_still_lets_them_in(
    fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    write_home(
        home(),
        fake_llm,
        telegram={"allow_from": ["555"]},
        slack={"owners": ["U1"]},
        people={"ann": {"ids": ["slack:U1", "telegram:555"]}},
    )
    assert await asyncio.to_thread(main, ["pairing", "revoke", "telegram", "555"]) == 0
    out = capsys.readouterr().out
    assert "Revoked telegram user 555: their place in telegram.allow_from (config.toml)." in out
    assert (
        "note: telegram:555 is one person with slack:U1, who is owner: while one of those "
        "addresses may talk to the bot, so may this one, with that role; take it apart in "
        "people.ann.ids in config.toml"
    ) in out


async def test_deny_says_denied_and_approve_owner_without_a_gateway_saves_the_owner(
    fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pairing deny` said "Denyd"; `approve --owner` with no gateway running ended in a
    traceback (asyncio.run inside the command's own event loop) after writing the file."""
    write_home(home(), fake_llm)
    assert await asyncio.to_thread(main, ["pairing", "deny", await requested("556")]) == 0
    assert capsys.readouterr().out == "Denied telegram user 556 (Mal).\n"
    code = await requested("557")
    assert await asyncio.to_thread(main, ["pairing", "approve", code, "--owner"]) == 0
    out = capsys.readouterr().out
    assert out.startswith('Approved telegram user 557 (Mal).\ntelegram.owners = ["557"]')
    assert "no gateway is running: it takes effect when one starts" in out


async def test_nothing_to_revoke_and_an_unknown_channel_are_refused(
    fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    write_home(home(), fake_llm)
    assert await asyncio.to_thread(main, ["pairing", "revoke", "telegram", "1"]) == 1
    assert "telegram user 1 is not paired and not in telegram.owners" in capsys.readouterr().err
    assert await asyncio.to_thread(main, ["pairing", "clear", "nochan"]) == 1
    assert capsys.readouterr().err.startswith("switchboard: unknown channel 'nochan'")
