"""The owner's control center over HTTP (issue 46): every route is the owner's alone, and
every action goes through the code the chats and the command line use, audited.

These drive the real gateway (web chat, in-memory platform channels, the fake LLM) with an
aiohttp client signed in by a one-time link; test_control_people.py has the People page's
(people, revoking, links, approvals), test_control_browser.py what a person sees and does on
the pages.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import aiohttp
import pytest

from agent.memory import OWNER_SCOPE, append_note
from channels.memory import MemoryChannel
from channels.terminal import TerminalChannel
from channels.webchat import create
from gateway.core.messages import ChatRef, ChatType, OutboundKind
from gateway.core.principal import Principal, Role
from gateway.core.schedule_spec import parse_schedule
from gateway.runtime.app import Gateway
from gateway.runtime.control import STARTED_FRESH
from gateway.store import Job, NewMessage, UsageRecord
from gateway.web.control.names import Names
from gateway.web.control.routes import ControlRoutes
from gateway.web.pages import SECTIONS
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, calls, held, text
from tests.test_web_server import client, owner, serving

API_TOKEN = "member-api-token-0123456789"
OWNER, MEMBER = "1", "3"


def origin(url: str) -> dict[str, str]:
    return {"Origin": url.rstrip("/")}


def pages() -> list[str]:
    return ["/", *(f"/{s.name}" for s in SECTIONS)]


def reads() -> list[str]:
    return [
        "/api/events",
        "/api/conversations",
        "/api/conversations/transcript?session=webchat:owner",
        "/api/conversations/search?q=hello",
        "/api/people",
        "/api/approvals",
        "/api/memory",
        "/api/workspace/MEMORY.md",
        "/api/jobs",
        "/api/usage",
        "/api/health",
    ]


def changes() -> list[tuple[str, dict[str, str]]]:
    return [
        ("/api/conversations/stop", {"session": "webchat:owner"}),
        ("/api/conversations/new", {"session": "webchat:owner"}),
        ("/api/people/revoke", {"channel": "telegram", "sender_id": "42"}),
        ("/api/people/link", {"address": "telegram:42", "to": "telegram:1"}),
        ("/api/people/unlink", {"address": "telegram:42"}),
        ("/api/people/confirm", {"code": "ABCDEFGH"}),
        ("/api/pairing/ABCDEFGH/approve", {}),
        ("/api/approvals/ABCDEFGH/approve", {}),
        ("/api/memory/diff", {"name": "MEMORY.md", "text": "x"}),
        ("/api/memory/save", {"name": "MEMORY.md", "text": "x", "base": "0"}),
        ("/api/jobs/job1/pause", {}),
        ("/api/heartbeat/run", {}),
    ]


def job(job_id: str, *, when: str = "every day at 09:00") -> Job:
    now = datetime.now(UTC)
    spec = parse_schedule(when, now=now, timezone="UTC")
    return Job(
        id=job_id,
        spec=spec,
        prompt=None,
        message="water the plants",
        chat=ChatRef("webchat", "owner"),
        owner=Principal("webchat", "owner", "web user", Role.OWNER).record(),
        next_run=spec.next_after(None, now),
    )


# -- who gets in --------------------------------------------------------------------------


async def test_every_route_is_refused_without_the_owners_session(
    make_settings: SettingsFactory,
) -> None:
    settings = make_settings(
        web={"port": 0},
        api={"enabled": True, "tokens": [{"name": "ann", "token": API_TOKEN, "role": "member"}]},
    )
    async with serving(settings) as (gateway, url, _chat), client() as http:
        base = url.rstrip("/")
        member = {"Authorization": f"Bearer {API_TOKEN}"}
        as_member: list[int] = []  # a wrong credential counts: after 10, 429 for everything
        for path in pages():
            async with http.get(
                base + path, headers={"Accept": "text/html"}, allow_redirects=False
            ) as response:
                assert response.status == 303, path
                assert response.headers["Location"].startswith("/login"), path
        for path in reads():
            async with http.get(base + path) as response:
                assert response.status == 401, path
            async with http.get(base + path, headers=member) as response:
                as_member.append(response.status)  # an API token opens nothing here
        for path, body in changes():
            async with http.post(base + path, json=body, headers=origin(url)) as response:
                assert response.status == 401, path
            async with http.post(base + path, json=body, headers=member) as response:
                as_member.append(response.status)
        assert await gateway.store.audit.recent(kind="workspace-edited") == []
    assert as_member[:10] == [401] * 10
    assert set(as_member) <= {401, 429}


async def test_the_owners_changes_must_come_from_the_owners_pages(
    make_settings: SettingsFactory,
) -> None:
    settings = make_settings(web={"port": 0})
    async with serving(settings) as (gateway, url, _chat), owner(gateway) as http:
        base = url.rstrip("/")
        for path, body in changes():
            async with http.post(
                base + path, json=body, headers={"Origin": "http://evil.example"}
            ) as response:
                assert response.status == 403, path
            async with http.post(base + path, json=body) as response:  # no Origin at all
                assert response.status == 403, path
        for path in pages():
            async with http.get(base + path) as response:
                assert response.status == 200, path
                assert "script-src 'self'" in response.headers["Content-Security-Policy"]
                page = await response.text()
                assert '<a href="/">Chat</a>' in page or 'aria-current="page">Chat' in page
                assert "style=" not in page and "<script>" not in page  # nothing inline
        async with http.get(base + "/status", allow_redirects=False) as response:
            assert response.status == 303 and response.headers["Location"] == "/health"


# -- conversations --------------------------------------------------------------------------


async def test_conversations_are_listed_by_name_searched_and_read_with_their_tool_calls(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(web={"port": 0}, telegram={"token": "1:a", "owners": ["42"]})
    telegram = MemoryChannel("telegram")
    fake_llm.queue(calls(("read_file", {"path": "AGENTS.md"})), text("The marmalade is ready."))
    async with serving(settings, telegram) as (gateway, url, _chat), owner(gateway) as http:
        await telegram.push(  # "look up" adds research guidance to what the model reads
            "look up: is the marmalade ready?", sender_id="42", chat_id="42", sender_name="Ann Lee"
        )
        await telegram.wait_for(1)
        await gateway.wait_idle()
        async with http.get(url + "api/conversations") as response:
            [row] = (await response.json())["conversations"]
        async with http.get(url + "api/conversations/search?q=marmalade") as response:
            found = (await response.json())["results"]
        async with http.get(
            url + "api/conversations/transcript", params={"session": "telegram:42"}
        ) as response:
            shown = await response.json()
        async with http.get(  # a mistyped link: not an empty conversation that looks real
            url + "api/conversations/transcript", params={"session": "nope:nobody"}
        ) as response:
            unknown = response.status, await response.json()
    assert unknown == (404, {"error": "there is no conversation nope:nobody"})
    assert row["title"] == "Ann Lee (telegram)"
    assert row["session"] == "telegram:42" and row["state"] == "idle"
    assert row["last_text"] == "The marmalade is ready." and row["last_role"] == "assistant"
    assert {r["role"] for r in found} == {"user", "assistant"}
    assert all(r["title"] == "Ann Lee (telegram)" for r in found)
    assert any({"text": "marmalade", "hit": True} in r["snippet"] for r in found)
    roles = [m["role"] for m in shown["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    # Ann Lee is the owner here: her own words are "You" to her
    assert [m["who"] for m in shown["messages"]] == [
        "You",
        "Switchboard",
        "Tool result",
        "Switchboard",
    ]
    assert {(r["role"], r["who"]) for r in found} == {("user", "You"), ("assistant", "Switchboard")}
    assert "[guidance for this request]" in fake_llm.requests[0].raw_user_texts[-1]
    said = shown["messages"][0]["text"]  # the person's words, not the guidance after them
    assert said.endswith("look up: is the marmalade ready?") and "guidance" not in said
    assert shown["messages"][1]["calls"] == [
        {"name": "read_file", "arguments": '{"path": "AGENTS.md"}'}
    ]
    assert shown["messages"][2]["tool"] == "read_file"
    assert shown["messages"][0]["turn"] == shown["messages"][3]["turn"]  # one trace


async def test_messages_kept_before_senders_were_recorded_are_named_by_their_chat(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """History written before each person's message recorded who wrote it: a direct chat's
    words are its person's, the local chats' the owner's, a job's its own."""
    settings = make_settings(web={"port": 0}, telegram={"token": "1:a", "allow_from": ["43"]})
    telegram = MemoryChannel("telegram")
    sessions = ("telegram:43", "webchat:owner", "cron:ab12cd34")
    async with serving(settings, telegram) as (gateway, url, _chat), owner(gateway) as http:
        await telegram.push("hello", sender_id="43", chat_id="43", sender_name="Ann Lee")
        await telegram.wait_for(1)
        await gateway.wait_idle()
        store = gateway.store
        for number, session in enumerate(sessions):
            turn = f"old-{number}"
            await store.journal.start_turn(turn, session, "chat", [])
            old = {"role": "user", "content": "said long ago"}
            await store.history.add_checkpoints(session, turn, [NewMessage("user", old)])
            await store.commit_turn(turn_id=turn, session_key=session, replies=[])
        who = []
        for session in sessions:
            async with http.get(
                url + "api/conversations/transcript", params={"session": session}
            ) as response:
                who.append((await response.json())["messages"][-1]["who"])
    assert who == ["Ann Lee", "You", "Scheduled job ab12cd34"]


async def test_stopping_a_turn_from_the_page_tells_its_chat_and_start_fresh_empties_it(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(web={"port": 0}, telegram={"token": "1:a", "allow_from": ["42"]})
    telegram = MemoryChannel("telegram")
    gate = asyncio.Event()
    fake_llm.queue(text("first answer"), held(gate, "never shown"))
    async with serving(settings, telegram) as (gateway, url, _chat), owner(gateway) as http:
        await telegram.push("hello", sender_id="42", chat_id="42", sender_name="Ann")
        await telegram.wait_for(1)
        await telegram.push("write me an essay", sender_id="42", chat_id="42", sender_name="Ann")
        await fake_llm.wait_for_requests(2)
        async with http.get(url + "api/conversations") as response:
            [row] = (await response.json())["conversations"]
        async with http.post(
            url + "api/conversations/stop", json={"session": "telegram:42"}, headers=origin(url)
        ) as response:
            stopping = (await response.json())["message"]
        [_, stopped] = await telegram.wait_for(2)
        await gateway.wait_idle()
        async with http.post(
            url + "api/conversations/stop", json={"session": "telegram:42"}, headers=origin(url)
        ) as response:
            nothing = (await response.json())["message"]
        async with http.post(
            url + "api/conversations/new", json={"session": "telegram:42"}, headers=origin(url)
        ) as response:
            fresh = (await response.json())["message"]
        told = (await telegram.wait_for(3))[2]
        gate.set()
        await gateway.wait_idle()
        sent = [m.text for m in telegram.sent]
        audit = [e.kind for e in await gateway.store.audit.recent(10)]
        left = await gateway.store.history.message_count("telegram:42")
    assert row["state"] == "running"
    assert stopping.startswith("Stopping")
    assert stopped.text.startswith("Stopped.")
    assert nothing == "Nothing is running in this conversation right now."
    assert fresh.startswith("Started a fresh conversation") and fresh.endswith(
        "The chat is told so."
    )
    # Ann is told, once, that the assistant forgot: she would go on as if it remembered
    assert told.text == STARTED_FRESH and told.chat_id == "42"
    assert told.kind is OutboundKind.NOTICE
    assert sent == ["first answer", stopped.text, STARTED_FRESH]
    assert left == 0
    assert audit[:3] == ["control-new", "control-stop", "control-stop"]


async def test_start_fresh_tells_a_quiet_groups_thread_and_no_chat_of_a_job(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """A conversation quiet for longer than the journal keeps its messages is found again
    (a thread of a group, whose chat id and thread the session's key alone does not tell
    apart); a job's conversation has nobody to tell."""
    settings = make_settings(
        web={"port": 0},
        telegram={"token": "1:a", "allow_from": ["42"], "group_allow_from": ["-100"]},
    )
    telegram = MemoryChannel("telegram")
    fake_llm.queue(text("Hello, group."))
    async with serving(settings, telegram) as (gateway, url, _chat), owner(gateway) as http:
        await telegram.push(
            "@bot hello", sender_id="42", chat_id="-100", thread_id="7", chat_type=ChatType.GROUP
        )
        await telegram.wait_for(1)
        await gateway.wait_idle()
        await gateway.store.journal.prune(0, now=datetime.now().timestamp() + 60)  # a week on
        await gateway.store.jobs.add(job("ab12cd34"))
        answers = []
        for session in ("telegram:-100:7", "cron:ab12cd34"):
            async with http.post(
                url + "api/conversations/new", json={"session": session}, headers=origin(url)
            ) as response:
                answers.append((await response.json())["message"])
        [_, told] = await telegram.wait_for(2)
        await gateway.wait_idle()
        sent = len(telegram.sent)
    assert (told.text, told.chat_id, told.thread_id) == (STARTED_FRESH, "-100", "7")
    assert answers[0].endswith("The chat is told so.")
    assert not answers[1].endswith("The chat is told so.") and sent == 2


# -- memory and workspace ---------------------------------------------------------------------


async def test_a_workspace_edit_is_journaled_and_never_overwrites_a_change_made_meanwhile(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    settings = make_settings(web={"port": 0})
    memory = settings.workspace_dir / "MEMORY.md"
    secret = tmp_path / "secret.md"
    secret.write_text("top secret")
    (settings.workspace_dir / "memory").mkdir(exist_ok=True)
    (settings.workspace_dir / "memory" / "leak.md").symlink_to(secret)
    skill = settings.workspace_dir / "skills" / "jokes" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: jokes\ndescription: tell jokes\n---\nBe funny.\n")
    async with serving(settings) as (gateway, url, _chat), owner(gateway) as http:
        async with http.get(url + "api/memory") as response:
            kinds = {f["name"]: f["kind"] for f in (await response.json())["files"]}
        async with http.get(url + "api/workspace/MEMORY.md") as response:
            opened = await response.json()
        edited = opened["text"] + "\n- Ann likes marmalade\n"
        async with http.post(
            url + "api/memory/diff",
            json={"name": "MEMORY.md", "text": edited, "base": opened["digest"]},
            headers=origin(url),
        ) as response:
            diff = await response.json()
        memory.write_text(memory.read_text() + "- a note the assistant added meanwhile\n")
        async with http.post(
            url + "api/memory/save",
            json={"name": "MEMORY.md", "text": edited, "base": opened["digest"]},
            headers=origin(url),
        ) as response:
            conflict = (response.status, await response.json())
        unchanged = memory.read_text()
        async with http.post(
            url + "api/memory/save",
            json={"name": "MEMORY.md", "text": edited, "base": conflict[1]["current"]["digest"]},
            headers=origin(url),
        ) as response:
            saved = response.status
        refused = []
        for name in ("memory/leak.md", "notes.md", "../config.toml", "skills/jokes/SKILL.md"):
            async with http.post(
                url + "api/memory/save",
                json={"name": name, "text": "x", "base": "0"},
                headers=origin(url),
            ) as response:
                refused.append(response.status)
        [edit] = await gateway.store.audit.recent(kind="workspace-edited")
    assert kinds["MEMORY.md"] == "memory" and kinds["AGENTS.md"] == "bootstrap"
    assert kinds["skills/jokes/SKILL.md"] == "skill"
    assert "memory/leak.md" not in kinds
    assert "+- Ann likes marmalade\n" in diff["diff"] and diff["changed_since"] is False
    assert conflict[0] == 409 and "changed since you opened it" in conflict[1]["error"]
    assert "a note the assistant added meanwhile" in unchanged  # nothing was overwritten
    assert saved == 200 and memory.read_text() == edited
    assert refused == [404, 404, 404, 409]  # the skill is editable: its digest was stale
    assert edit.sender_id == "web:owner" and edit.detail["path"] == "MEMORY.md"


async def test_a_save_keeps_what_the_assistant_wrote_meanwhile_and_refuses_only_a_clash(
    make_settings: SettingsFactory,
) -> None:
    """The page sends the version its text was made from: what the assistant appended to the
    file since is merged in; a line both changed is refused with both versions, for the
    owner to decide; a base that is not that version merges nothing."""
    settings = make_settings(web={"port": 0})
    memory = settings.workspace_dir / "MEMORY.md"
    async with serving(settings) as (gateway, url, _chat), owner(gateway) as http:

        async def save(text: str, base_text: str) -> tuple[int, dict[str, Any]]:
            body = {"name": "MEMORY.md", "text": text, "base": opened["digest"]}
            async with http.post(
                url + "api/memory/save", json=body | {"base_text": base_text}, headers=origin(url)
            ) as response:
                return response.status, await response.json()

        async with http.get(url + "api/workspace/MEMORY.md") as response:
            opened = await response.json()
        mine = opened["text"].replace("# Long-term memory", "# Olga's memory", 1)
        now = datetime.now().astimezone()
        append_note(
            settings.workspace_dir, OWNER_SCOPE, ["Ann likes green tea."], to="memory", now=now
        )
        merged = await save(mine, opened["text"])
        after_merge = memory.read_text()
        clash = await save(
            opened["text"].replace("# Long-term memory", "# Memory", 1), opened["text"]
        )
        after_clash = memory.read_text()
        unknown = await save(mine + "- one more\n", "not what the editor opened")
        edits = await gateway.store.audit.recent(kind="workspace-edited")
    assert merged[0] == 200
    assert merged[1]["message"].endswith("with the changes made to it since you opened it kept.")
    assert after_merge == mine + "- Ann likes green tea.\n" == merged[1]["text"]
    assert clash[0] == 409
    [conflict] = [p for p in clash[1]["parts"] if "mine" in p]
    assert conflict == {
        "base": "# Long-term memory\n",
        "mine": "# Memory\n",
        "theirs": "# Olga's memory\n",
    }
    assert clash[1]["current"]["text"] == after_merge == after_clash  # nothing written
    assert unknown[0] == 409 and after_clash == memory.read_text()
    assert [e.detail["merged"] for e in edits] == [True]


# -- jobs, usage, health ------------------------------------------------------------------------


async def test_jobs_are_paused_resumed_run_and_deleted_as_the_cron_tool_does(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(web={"port": 0})
    async with serving(settings) as (gateway, url, chat), owner(gateway) as http:
        await gateway.store.jobs.add(job("job1"))

        async def act(action: str) -> int:
            async with http.post(url + f"api/jobs/job1/{action}", headers=origin(url)) as r:
                return r.status

        async def listed() -> dict[str, object]:
            async with http.get(url + "api/jobs") as response:
                [found] = (await response.json())["jobs"]
                return dict(found)

        first = await listed()
        paused = (await act("pause"), (await listed())["state"])
        run_while_paused = await act("run")
        resumed = (await act("resume"), (await listed())["state"])
        page, _ = await chat.subscribe("owner")
        assert await act("run") == 200
        async with asyncio.timeout(10):
            while (event := await page.queue.get()) is not None:
                if event["type"] == "message" and event["entry"]["text"] == "water the plants":
                    break
        await gateway.wait_idle()
        ran = await listed()
        deleted = await act("delete")
        async with http.get(url + "api/jobs") as response:
            after = (await response.json())["jobs"]
        kinds = [e.kind for e in await gateway.store.audit.recent(10)]
    assert first["state"] == "active" and first["what"] == "water the plants"
    assert first["target"] == "You, in the web chat" and first["last"] is None
    assert paused == (200, "paused")
    assert run_while_paused == 409
    assert resumed == (200, "active")
    assert ran["runs"] == 1 and ran["last"]["state"] == "done"
    assert deleted == 200 and after == []
    assert kinds[:5] == ["job-delete", "job-run", "job-resume", "job-run", "job-pause"]


async def test_the_jobs_page_says_where_the_heartbeat_goes_before_its_first_tick(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """The owner's home chat, as `switchboard status` says (it said "the owner's chat, once
    there is one" until the first check-in)."""
    settings = make_settings(web={"port": 0}, telegram={"token": "1:a", "owners": ["42"]})
    telegram = MemoryChannel("telegram")
    async with serving(settings, telegram) as (gateway, url, _chat), owner(gateway) as http:

        async def target() -> object:
            async with http.get(url + "api/jobs") as response:
                return (await response.json())["heartbeat"]["target"]

        before = await target()
        await telegram.push("hello", sender_id="42", chat_id="42")
        await telegram.wait_for(1)
        await gateway.wait_idle()
        after = await target()
    assert before is None
    assert after == "telegram:42"


async def test_usage_is_added_up_per_day_person_chat_and_model_with_its_cost(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(
        web={"port": 0},
        llm={"prices": {"fake-model": {"input": 1.0, "output": 2.0}}},
        telegram={"token": "1:a", "allow_from": ["42"]},
    )
    telegram = MemoryChannel("telegram")
    async with serving(settings, telegram) as (gateway, url, _chat), owner(gateway) as http:
        await telegram.push("hello there", sender_id="42", chat_id="42", sender_name="Ann")
        await telegram.wait_for(1)
        await gateway.wait_idle()
        async with http.get(url + "api/usage") as response:
            used = await response.json()
    [day] = used["by_day"]
    [person] = used["by_person"]
    [chat] = used["by_chat"]
    [model] = used["by_model"]
    assert used["priced"] is True
    assert person["label"] == "Ann" and chat["label"] == "Ann (telegram)"
    assert model["label"] == "fake-model"
    assert day["turns"] == person["turns"] == 1
    expected = (day["input_tokens"] * 1.0 + day["output_tokens"] * 2.0) / 1_000_000
    assert day["cost"] == pytest.approx(expected) and day["cost"] > 0
    assert person["cost"] == model["cost"] == day["cost"]


async def test_the_usage_pages_days_are_the_owners_not_the_servers(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """The owner lives on Kiritimati (UTC+14, user.timezone): a call at 00:30 their time
    and one an hour earlier are on two of their days (one day in UTC, the server's zone),
    and the chart of days ends on their today."""
    owners = ZoneInfo("Pacific/Kiritimati")
    settings = make_settings(web={"port": 0}, user={"timezone": "Pacific/Kiritimati"})
    yesterday = datetime.now(owners).date() - timedelta(days=1)
    after_midnight = datetime.combine(yesterday, time(0, 30), owners).timestamp()
    async with serving(settings) as (gateway, url, _chat), owner(gateway) as http:
        for number, at in enumerate((after_midnight - 3_600, after_midnight)):
            record = UsageRecord("telegram", "m", 10, 5, at=at, principal="telegram:42")
            await gateway.store.usage.record(f"turn-{number}", "telegram:42", record)
        before = f"{datetime.now(owners):%Y-%m-%d}"
        async with http.get(url + "api/usage") as response:
            used = await response.json()
        after = f"{datetime.now(owners):%Y-%m-%d}"
    assert [(d["key"], d["turns"]) for d in used["by_day"]] == [
        (f"{yesterday - timedelta(days=1)}", 1),
        (f"{yesterday}", 1),
    ]
    assert used["today"] in (before, after)


async def test_health_says_what_to_do_and_the_event_stream_reports_changes(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(web={"port": 0}, telegram={"token": "1:a", "dm_policy": "pairing"})
    telegram = MemoryChannel("telegram")
    async with serving(settings, telegram) as (gateway, url, _chat), owner(gateway) as http:
        async with http.get(url + "api/health") as response:
            health = await response.json()
        assert gateway.web is not None
        control: ControlRoutes = gateway.web.control
        async with http.get(url + "api/events") as stream:
            first = await _pulse(stream)
            assert control.streams == 1
            await telegram.push("let me in", sender_id="77", chat_id="77", sender_name="Newcomer")
            second = await _pulse(stream)
        async with asyncio.timeout(5):
            await control.unwatched.wait()  # the page went: nothing is computed for it
    assert [c["name"] for c in health["channels"]] == ["webchat", "telegram"]
    assert health["store"] == {"engine": "SQLite", "ok": True, "advice": None}
    assert health["work"]["running"] == 0
    assert first["pairing"] == 0 and second["pairing"] == 1
    assert second["topics"]["people"] != first["topics"]["people"]


async def _pulse(stream: aiohttp.ClientResponse) -> dict[str, object]:
    import json

    async with asyncio.timeout(10):
        while True:
            line = (await stream.content.readline()).decode()
            if line.startswith("data: "):
                data: dict[str, object] = json.loads(line[6:])
                return data


def test_sessions_are_named_for_what_they_are() -> None:
    names = Names(
        {"telegram:42": "Ann", "discord:7": "Bo"},
        {("telegram", "-100"): "Family"},
        {("telegram", "42"): ["telegram:42"], ("discord", "dm9"): ["discord:7"]},
    )
    assert names.session("telegram:42").title == "Ann (telegram)"
    assert names.session("discord:dm9").title == "Bo (discord)"
    assert names.session("telegram:-100:5").title == "Family (telegram group)"
    assert names.session("webchat:owner").title == "You, in the web chat"
    assert names.session("cron:ab12cd34").title == "Scheduled job ab12cd34"
    assert names.session("heartbeat:main").kind == "heartbeat"
    assert names.session("helper/telegram:42").title == "Ann (telegram) (helper)"
    assert names.session("slack:C1").title == "slack chat C1"
    assert names.person("telegram:9") == "telegram user 9"


async def test_health_knows_when_the_terminal_last_had_a_message(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """It said "Last message: never" after ten turns in the terminal (issue 54): the terminal
    channel did not report it."""
    settings = make_settings(web={"port": 0})
    terminal = TerminalChannel(agent_name="Bot", model="fake-model")
    async with (
        Gateway(settings, channels=[create(settings), terminal]) as gateway,
        owner(gateway) as http,
    ):
        assert gateway.web is not None
        async with http.get(gateway.web.url + "api/health") as response:
            before = {c["name"]: c for c in (await response.json())["channels"]}
        await terminal.submit("hello from the terminal")  # journaled when it returns
        async with http.get(gateway.web.url + "api/health") as response:
            after = {c["name"]: c for c in (await response.json())["channels"]}
    assert before["terminal"]["last_message_at"] is None
    assert after["terminal"]["last_message_at"] is not None
