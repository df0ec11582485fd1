"""The control center's People page over HTTP: people shown by name, role, zone and usage;
revoking someone (the one revoke the command line and ``/pair revoke`` run too); linking and
unlinking addresses; approving a member's command from the page. The rest of the control
center: test_control_center.py, whose helpers these share.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from channels.memory import MemoryChannel
from gateway.config.settings import load_settings
from gateway.runtime.app import Gateway
from gateway.runtime.intake.pairing import WELCOME
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, calls, text
from tests.fakes.telegram import FakeTelegram
from tests.test_approvals import COMMAND, request_id, runs
from tests.test_control_center import MEMBER, OWNER, origin
from tests.test_live_settings import write_home
from tests.test_web_server import owner, serving

# -- people, pairing, approvals ---------------------------------------------------------------


async def test_a_name_that_would_reverse_or_break_the_list_is_shown_escaped(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """A right-to-left override in a stranger's name would reverse what the page shows
    after it (the code, the address); a newline would break the row."""
    settings = make_settings(web={"port": 0}, telegram={"token": "1:a", "owners": ["1"]})
    telegram = MemoryChannel("telegram")
    async with serving(settings, telegram) as (gateway, url, _chat), owner(gateway) as http:
        name = "Eve\u202e1 resu\nOwner"
        await telegram.push("let me in", sender_id="77", chat_id="77", sender_name=name)
        await telegram.wait_for(1)
        async with http.get(url + "api/people") as response:
            [pending] = (await response.json())["pending"]
    assert pending["sender_name"] == "Eve\\u202e1 resu\\nOwner"


async def test_people_are_shown_by_name_with_role_zone_and_usage_and_can_be_revoked(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(
        web={"port": 0},
        telegram={"token": "1:a", "owners": ["1"], "dm_policy": "pairing"},
        people={"telegram:1": {"timezone": "Europe/Berlin"}},
    )
    telegram = MemoryChannel("telegram")
    async with serving(settings, telegram) as (gateway, url, _chat), owner(gateway) as http:
        await telegram.push("hi", sender_id="1", chat_id="1", sender_name="Olga Owner")
        await telegram.push("let me in", sender_id="77", chat_id="77", sender_name="Newcomer")
        await telegram.wait_for(2)
        await gateway.wait_idle()
        async with http.get(url + "api/people") as response:
            before = await response.json()
        [pending] = before["pending"]
        async with http.post(
            url + f"api/pairing/{pending['code']}/approve", headers=origin(url)
        ) as response:
            assert response.status == 200
        welcome = (await telegram.wait_for(3))[2]
        async with http.get(url + "api/people") as response:
            after = {p["person"]: p for p in (await response.json())["people"]}
        async with http.post(
            url + "api/people/revoke",
            json={"channel": "telegram", "sender_id": "77"},
            headers=origin(url),
        ) as response:
            assert response.status == 200
        async with http.post(
            url + "api/people/revoke",
            json={"channel": "telegram", "sender_id": "77"},
            headers=origin(url),
        ) as response:
            again = response.status
        revoked = not await gateway.store.pairings.is_approved("telegram", "77")
        audit = {e.kind: e for e in await gateway.store.audit.recent(20)}
    assert pending["sender_name"] == "Newcomer" and pending["sender_id"] == "77"
    assert welcome.text == WELCOME and welcome.chat_id == "77"
    owner_row = after["telegram:1"]
    assert owner_row["name"] == "Olga Owner" and owner_row["role"] == "owner"
    assert owner_row["how"] == ["owners"]
    assert owner_row["timezone"] == "Europe/Berlin"
    assert owner_row["timezone_from"] == "[people] config"
    assert owner_row["turns"] == 1 and owner_row["tokens"] > 0
    assert owner_row["chats"] == ["Olga Owner (telegram)"]
    newcomer = after["telegram:77"]
    assert newcomer["name"] == "Newcomer" and newcomer["role"] == "member"
    assert newcomer["paired"] is True
    assert revoked and again == 404
    assert audit["pairing-approved"].detail["by"] == "web:owner"
    assert audit["pairing-revoked"].detail["by"] == "web:owner"


async def test_thats_me_makes_the_owners_own_new_account_an_owner(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    """The owner wrote to the bot from their phone, got a pairing code like anyone, and
    takes it on the People page with "That's me" (as `pairing approve --owner`): the
    running gateway, built from config.toml as `switchboard run` builds it, takes them as
    the owner at once."""
    home = tmp_path / "home"
    write_home(
        home,
        fake_llm,
        web={"enabled": True, "port": 0},
        telegram={"token": tg.token, "base_url": tg.base_url, "poll_timeout_seconds": 1},
    )
    async with Gateway(load_settings(home=home)) as gateway, owner(gateway) as http:
        assert gateway.web is not None
        url = gateway.web.url
        await tg.say("it's me, on my phone")
        await tg.wait_sent(1)  # the pairing code
        async with http.get(url + "api/people") as response:
            [pending] = (await response.json())["pending"]
        async with http.post(
            url + f"api/pairing/{pending['code']}/owner", headers=origin(url)
        ) as response:
            assert response.status == 200, await response.text()
        async with http.get(url + "api/people") as response:
            people = {p["person"]: p for p in (await response.json())["people"]}
        await tg.say("/model")
        *_, answer = await tg.wait_sent(3)  # the welcome, then the answer
    assert people["telegram:42"]["role"] == "owner"
    assert answer.params["text"].startswith("Models: "), answer.params  # not refused
    assert load_settings(home=home).telegram.owners == ("42",)  # kept across a restart


@asynccontextmanager
async def telegram_home(
    home: Path, fake_llm: FakeLLM, tg: FakeTelegram, **telegram: Any
) -> AsyncIterator[tuple[Gateway, aiohttp.ClientSession, str]]:
    """A gateway built from config.toml as `switchboard run` builds it (its Telegram on the
    fake Bot API, ``telegram`` besides), with the owner's browser signed in."""
    connect = {"token": tg.token, "base_url": tg.base_url, "poll_timeout_seconds": 1}
    write_home(home, fake_llm, web={"enabled": True, "port": 0}, telegram=connect | telegram)
    async with Gateway(load_settings(home=home)) as gateway, owner(gateway) as http:
        assert gateway.web is not None
        yield gateway, http, gateway.web.url


async def revoke(http: aiohttp.ClientSession, url: str, sender_id: str) -> tuple[int, Any]:
    """The People page's Revoke of a Telegram user."""
    body = {"channel": "telegram", "sender_id": sender_id}
    async with http.post(url + "api/people/revoke", json=body, headers=origin(url)) as response:
        return response.status, await response.json()


async def test_an_owner_only_config_lists_revoked_on_the_page_is_refused_at_once(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    """An owner config.toml lists (as `approve --owner` adds them) and nothing pairs: the
    page's Revoke answered 404 "not a paired person", and they stayed the owner."""
    home = tmp_path / "home"
    async with telegram_home(home, fake_llm, tg, owners=["42"]) as (gateway, http, url):
        await tg.say("/model")
        [models] = await tg.wait_sent(1)
        status, answer = await revoke(http, url, "42")
        await tg.say("/model")  # at once: no restart, no reload to wait for
        *_, refused = await tg.wait_sent(2)
        audit = await gateway.store.audit.recent(kind="access-revoked")
    assert models.params["text"].startswith("Models: ")  # the owner's command
    assert status == 200, answer
    assert answer["message"] == (
        "Revoked telegram user 42: their place in telegram.owners (config.toml)."
    )
    assert answer["still"] == []
    assert "pairing code" in refused.params["text"]  # a stranger now: a code, nothing else
    assert fake_llm.requests == []
    assert load_settings(home=home).telegram.owners == ()  # gone from config.toml too
    [audited] = audit
    assert audited.sender_id == "42" and audited.detail["by"] == "web:owner"
    assert audited.detail["lists"] == ["telegram.owners"]


async def test_a_paired_person_config_also_allows_is_refused_once_revoked_on_the_page(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    """Approved by their code, and in telegram.allow_from as well: the page's Revoke took
    the pairing, said "Revoked", and allow_from let them talk on."""
    home = tmp_path / "home"
    async with telegram_home(home, fake_llm, tg, allow_from=["42", "7"]) as (gateway, http, url):
        request = await gateway.store.pairings.request(
            channel="telegram", sender_id="42", sender_name="Dana", chat_id="42"
        )
        assert request.request is not None
        await gateway.decide_pairing(request.request.code, approve=True, by="web:owner")
        await tg.wait_sent(1)  # the welcome
        status, answer = await revoke(http, url, "42")
        await tg.say("are you still there?")
        *_, refused = await tg.wait_sent(2)
        paired = await gateway.store.pairings.is_approved("telegram", "42")
    assert status == 200, answer
    assert answer["message"] == (
        "Revoked telegram user 42: their pairing, their place in telegram.allow_from (config.toml)."
    )
    assert "pairing code" in refused.params["text"]
    assert fake_llm.requests == []
    assert not paired
    assert load_settings(home=home).telegram.allow_from == ("7",)


async def test_the_pages_answer_names_what_still_lets_a_revoked_owner_in(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    """Everyone may write (allow_from has "*"): revoked, the owner is a member, let in as
    anyone is, and the answer says so rather than 404 "not a paired person"."""
    home = tmp_path / "home"
    listed = {"owners": ["42"], "allow_from": ["*"]}
    async with telegram_home(home, fake_llm, tg, **listed) as (_gateway, http, url):
        status, answer = await revoke(http, url, "42")
        await tg.say("/model")
        [refused] = await tg.wait_sent(1)
        again, nothing = await revoke(http, url, "42")
    assert status == 200, answer
    still = 'telegram.allow_from has "*": anyone may still write to the bot there'
    assert answer["still"] == [still]
    assert answer["message"] == (
        f"Revoked telegram user 42: their place in telegram.owners (config.toml).\nNote: {still}."
    )
    assert refused.params["text"] == "Only the owner or an admin can switch the model."
    assert again == 404  # nothing left to revoke
    assert nothing["error"] == (
        "Telegram user 42 is not paired and not in telegram.owners, admins, allow_from: "
        "nothing to revoke."
    )


async def test_an_owner_only_the_environment_names_is_not_revoked_and_told_where(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing the page can take away lets them in, but something does: not "not a paired
    person" (404), but where to take it out (409), and they stay the owner."""
    monkeypatch.setenv("SWITCHBOARD_TELEGRAM__OWNERS", "42")
    async with telegram_home(tmp_path / "home", fake_llm, tg) as (_gateway, http, url):
        status, answer = await revoke(http, url, "42")
        await tg.say("/model")
        [models] = await tg.wait_sent(1)
    assert status == 409
    assert answer["error"] == (
        "Not revoked: 42 is in telegram.owners, set by environment variable "
        "SWITCHBOARD_TELEGRAM__OWNERS: take it out there."
    )
    assert models.params["text"].startswith("Models: ")


async def test_the_owner_sees_each_person_with_their_addresses_and_links_and_unlinks_them(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(
        web={"port": 0},
        telegram={"token": "1:a", "owners": ["1"], "allow_from": ["5", "6"]},
        people={"ann": {"ids": ["telegram:5", "email:ann@example.com"]}},
    )
    telegram = MemoryChannel("telegram")
    async with serving(settings, telegram) as (gateway, url, _chat), owner(gateway) as http:
        await telegram.push("hi", sender_id="6", chat_id="6", sender_name="Ben")
        await telegram.wait_for(1)

        async def post(path: str, body: dict[str, str]) -> tuple[int, dict[str, Any]]:
            async with http.post(url + path, json=body, headers=origin(url)) as response:
                return response.status, await response.json()

        async def listed() -> dict[str, Any]:
            async with http.get(url + "api/people") as response:
                return dict(await response.json())

        before = await listed()
        linked = await post("api/people/link", {"address": "telegram:6", "to": "telegram:5"})
        after = await listed()
        bad = await post("api/people/link", {"address": "six", "to": "telegram:5"})
        in_config = await post("api/people/unlink", {"address": "email:ann@example.com"})
        unlinked = await post("api/people/unlink", {"address": "telegram:6"})
        again = await listed()
        audit = await gateway.store.audit.recent(20, kind="person-linked")
    [ann] = before["linked"]
    assert ann["name"] == "ann" and ann["addresses"] == ["telegram:5", "email:ann@example.com"]
    assert ann["listed"] == ann["addresses"] and ann["role"] == "member"
    assert linked[0] == 200 and linked[1]["message"].startswith("Linked: telegram:6")
    [ann] = after["linked"]
    assert ann["addresses"] == ["telegram:5", "email:ann@example.com", "telegram:6"]
    # one row a person: Ann's, with the address linked and what it used before the link
    rows = {p["person"]: p for p in after["people"]}
    assert "telegram:6" not in rows
    assert rows["telegram:5"]["linked_with"] == ["email:ann@example.com", "telegram:6"]
    assert rows["telegram:5"]["turns"] == 1 and rows["telegram:5"]["tokens"] > 0
    assert bad[0] == 400
    assert in_config[0] == 409 and "[people.ann] ids" in in_config[1]["error"]
    assert unlinked[0] == 200
    assert [p["addresses"] for p in again["linked"]] == [["telegram:5", "email:ann@example.com"]]
    assert audit[0].detail["by"] == "web:owner"


async def test_the_owner_approves_a_members_command_from_the_page_and_it_runs_once(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(
        web={"port": 0},
        telegram={"owners": [OWNER], "allow_from": [OWNER, MEMBER]},
        tools={"approvals": "ask", "exec": {"sandbox": "off"}},
    )
    channel = MemoryChannel("telegram")
    fake_llm.queue(calls(("exec", {"command": COMMAND})), text("Done, it ran."))
    async with serving(settings, channel) as (gateway, url, _chat), owner(gateway) as http:
        await channel.push("please run the echo command", sender_id=MEMBER, chat_id=MEMBER)
        [request] = await channel.wait_for(1, chat_id=OWNER)
        code = request_id(request)
        async with http.get(url + "api/approvals") as response:
            [waiting] = (await response.json())["waiting"]
        async with http.post(
            url + f"api/approvals/{code}/approve", headers=origin(url)
        ) as response:
            decided = (await response.json())["message"]
        answer = (await channel.wait_for(2, chat_id=MEMBER))[1]
        async with http.post(
            url + f"api/approvals/{code}/approve", headers=origin(url)
        ) as response:
            again = (await response.json())["message"]
        await gateway.wait_idle()
        approved = await gateway.store.audit.recent(kind="approval-approved")
        async with http.get(url + "api/approvals") as response:
            listed = await response.json()
    assert waiting["id"] == code and waiting["tool"] == "exec"
    assert waiting["arguments"] == [{"name": "command", "value": COMMAND}]
    assert waiting["requester"]  # a name, not an empty label
    assert decided.startswith(f"Approved {code}")
    assert answer.text == "Done, it ran."
    assert again == f"Request {code} was already approved; nothing changed."
    assert runs(settings) == 1
    assert approved[0].channel == "web" and approved[0].sender_id == "owner"
    assert listed["waiting"] == [] and listed["decided"][0]["decided_by"] == "web:owner"
