"""The task API against the real web server: a task submitted, followed over server-sent
events to its answer, stopped while it runs, and one that survives a restart of the gateway
(its turn resumes from its checkpoint). Tokens see their own tasks; only owner and admin
tokens may send a task's answer to a chat.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import openai
from openai.pagination import AsyncCursorPage

from channels.memory import MemoryChannel
from channels.terminal.channel import TerminalChannel
from gateway.config.settings import MEMBER_DENY, Settings
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, Recorded, Step, calls, held, text
from tests.fakes.telegram import FakeTelegram, fast_channel, section
from tests.test_openai_api import MEMBER_TOKEN, OWNER_TOKEN, api_settings

OWNER = {"Authorization": f"Bearer {OWNER_TOKEN}"}
MEMBER = {"Authorization": f"Bearer {MEMBER_TOKEN}"}
task_settings = api_settings  # an owner token (ops) and a member token (script)
# the owner lets members use spawn (members' background tasks are refused by default)
MEMBERS_SPAWN = {"member_deny": [name for name in MEMBER_DENY if name != "spawn"]}


@asynccontextmanager
async def serving(
    settings: Settings, *channels: Any
) -> AsyncIterator[tuple[Gateway, str, aiohttp.ClientSession]]:
    async with (
        Gateway(settings, channels=list(channels) or [MemoryChannel()]) as gateway,
        aiohttp.ClientSession() as http,
    ):
        assert gateway.web is not None
        yield gateway, gateway.web.url + "v1/tasks", http


async def submit(
    http: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str] = OWNER
) -> tuple[int, dict[str, Any]]:
    async with http.post(url, json=body, headers=headers) as response:
        return response.status, await response.json()


async def follow(http: aiohttp.ClientSession, url: str, after: int = 0) -> list[dict[str, Any]]:
    """Every event of a task's stream until the server ends it (the task has ended)."""
    headers = {**OWNER, "Last-Event-ID": str(after)}
    async with asyncio.timeout(20), http.get(url + "/events", headers=headers) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        return [
            json.loads(line[6:]) async for line in response.content if line.startswith(b"data: ")
        ]


def worker(request: Recorded) -> Step:
    """A background task that reports progress once, then answers."""
    if not request.tool_results:
        return calls(("notify", {"content": "Reading the workspace now."}))
    return text("The workspace holds the bootstrap files and nothing else.")


async def test_a_task_is_submitted_and_followed_to_its_answer(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = worker
    async with serving(task_settings(make_settings)) as (gateway, url, http):
        status, task = await submit(http, url, {"text": "Survey the workspace.", "agent": "main"})
        assert status == 202 and task["state"] in ("queued", "running")
        events = await follow(http, f"{url}/{task['id']}")
        async with http.get(f"{url}/{task['id']}", headers=OWNER) as response:
            shown = await response.json()
        await gateway.wait_idle()
    kinds = [(e["kind"], e["text"]) for e in events]
    assert kinds == [
        ("state", "queued"),
        ("state", "running"),
        ("note", "Reading the workspace now."),
        ("answer", "The workspace holds the bootstrap files and nothing else."),
        ("state", "done"),
    ]
    assert [e["seq"] for e in events] == [1, 2, 3, 4, 5]
    assert shown["state"] == "done"
    assert shown["answer"] == "The workspace holds the bootstrap files and nothing else."
    assert [n["text"] for n in shown["notes"]] == ["Reading the workspace now."]
    assert "Survey the workspace." in fake_llm.requests[0].last_user_text


class ListedTask(openai.BaseModel):
    id: str
    object: str
    state: str
    text: str


async def test_tasks_are_listed_newest_first_a_page_at_a_time_each_token_its_own(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """There was no GET /v1/tasks (405: only POST): a client that lost a task's id could
    not find it again. It lists the token's tasks (an owner token's: everyone's) newest
    first, in OpenAI's list shape, so the SDK's cursor pages through them with ``after``."""
    fake_llm.responder = lambda request: text("Done.")
    settings = task_settings(make_settings, tools={"policy": MEMBERS_SPAWN})
    submitted: list[tuple[str, str]] = []  # (who, task id), oldest first
    async with serving(settings) as (gateway, url, http):
        for n, (who, headers) in enumerate(
            [("owner", OWNER), ("member", MEMBER), ("owner", OWNER), ("member", MEMBER)]
        ):
            status, task = await submit(http, url, {"text": f"Task {n}."}, headers)
            assert status == 202, task
            submitted.append((who, task["id"]))
        base = url.removesuffix("/tasks")
        listed = {}
        for who, token in (("owner", OWNER_TOKEN), ("member", MEMBER_TOKEN)):
            client = openai.AsyncOpenAI(base_url=base, api_key=token, max_retries=0)
            pages = client.get_api_list(
                "/tasks",
                model=ListedTask,
                page=AsyncCursorPage[ListedTask],
                options={"params": {"limit": 1}},
            )
            listed[who] = [(task.id, task.object, task.text) async for task in pages]
            await client.close()
        async with http.get(url, params={"limit": "3"}, headers=OWNER) as response:
            first_page = await response.json()
        owners_task = submitted[0][1]
        async with http.get(url, params={"after": owners_task}, headers=MEMBER) as response:
            others_cursor = response.status, await response.json()
        async with http.get(url, params={"limit": "0"}, headers=MEMBER) as response:
            no_page = response.status
        await gateway.wait_idle()
    newest_first = [task_id for _, task_id in reversed(submitted)]
    texts = {task_id: f"Task {n}." for n, (_, task_id) in enumerate(submitted)}
    assert listed["owner"] == [(i, "task", texts[i]) for i in newest_first]
    members = [task_id for who, task_id in reversed(submitted) if who == "member"]
    assert listed["member"] == [(i, "task", texts[i]) for i in members]
    assert first_page["object"] == "list" and first_page["has_more"] is True
    assert [t["id"] for t in first_page["data"]] == newest_first[:3]
    assert (first_page["first_id"], first_page["last_id"]) == (newest_first[0], newest_first[2])
    assert others_cursor[0] == 400 and others_cursor[1]["error"]["param"] == "after"
    assert no_page == 400


async def test_a_long_task_read_over_several_reads_is_taken_and_an_oversized_one_says_so(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = lambda request: text(f"{request.last_user_text.count('é')} of them")
    long_text = "é" * 99_000  # 6 bytes each as JSON: 594 kB, more than one read brings
    async with serving(task_settings(make_settings)) as (gateway, url, http):
        status, task = await submit(http, url, {"text": long_text})
        assert status == 202, task
        events = await follow(http, f"{url}/{task['id']}")
        over = {"text": "x", "padding": "y" * 1_100_000}  # over api.max_request_bytes
        status, refused = await submit(http, url, over)
        await gateway.wait_idle()
    assert ("answer", "99000 of them") in [(e["kind"], e["text"]) for e in events]
    assert status == 400 and "the body is over" in refused["error"]["message"]


async def test_a_running_task_is_stopped_and_never_answers(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "Too late: this answer must not be seen."))
    async with serving(task_settings(make_settings)) as (gateway, url, http):
        _, task = await submit(http, url, {"text": "A long job."})
        await fake_llm.wait_for_requests(1)  # it runs
        async with http.delete(f"{url}/{task['id']}", headers=MEMBER) as response:
            assert response.status == 404  # not the member's task
        async with http.delete(f"{url}/{task['id']}", headers=OWNER) as response:
            assert response.status == 200 and (await response.json())["state"] == "stopped"
        gate.set()
        events = await follow(http, f"{url}/{task['id']}")
        async with http.delete(f"{url}/{task['id']}", headers=OWNER) as response:
            assert response.status == 409  # ended already
        await gateway.wait_idle()
        record = await gateway.store.tasks.get(task["id"])
    assert [e["text"] for e in events if e["kind"] == "state"] == ["queued", "running", "stopped"]
    assert not any(e["kind"] == "answer" for e in events)
    assert record is not None and record.state == "stopped" and record.result is None


async def _turn_closed(gateway: Gateway, turn_id: str) -> None:
    async with asyncio.timeout(10):
        await gateway.bus.wait_until(lambda: gateway.store.journal.finished(turn_id))


async def _stop_requested(gateway: Gateway, turn_id: str) -> bool:
    def query(conn: Any) -> bool:
        row = conn.execute("SELECT stop_requested_at FROM turns WHERE id = ?", (turn_id,))
        return row.fetchone()[0] is not None

    return await gateway.store.db.run(query)


async def test_delete_stops_a_tasks_turn_as_stop_does_and_no_restart_resumes_it(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    """DELETE takes /stop's path: the stop is recorded in the journal, the model call is cut
    at once (the held call never finishes), the turn ends with the stop notice, which the
    task's chat gets; a restart neither resumes the task nor calls the model again."""
    settings = task_settings(make_settings, telegram=section(tg))
    fake_llm.queue(held(asyncio.Event(), "never seen: the call is cut"))
    body = {"text": "A long job.", "deliver_to": "telegram:42"}
    async with serving(settings, fast_channel(settings)) as (gateway, url, http):
        _, task = await submit(http, url, body)
        await fake_llm.wait_for_requests(1)
        record = await gateway.store.tasks.get(task["id"])
        assert record is not None and record.turn_id is not None
        async with http.delete(f"{url}/{task['id']}", headers=OWNER) as response:
            assert response.status == 200
        assert await _stop_requested(gateway, record.turn_id)  # durable, as /stop records it
        await _turn_closed(gateway, record.turn_id)  # the held model call was cut
        await tg.wait_sent(1, chat_id=42)
        await gateway.wait_idle()
    async with serving(settings, fast_channel(settings)) as (gateway, url, http):
        await gateway.wait_idle()
        again = await gateway.store.tasks.get(task["id"])
        assert not gateway.subagents.running()
    assert tg.texts(42) == [
        f"Background task {task['id']} stopped:\n\nStopped. Nothing had been changed."
    ]
    assert again is not None and again.state == "stopped"
    assert len(fake_llm.requests) == 1  # never resumed


async def test_a_task_stopped_while_it_waits_for_approval_withdraws_its_request(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    import openai

    fake_llm.responder = lambda request: calls(("exec", {"command": "echo never-run"}))
    settings = task_settings(make_settings, tools={"approvals": "ask", "policy": MEMBERS_SPAWN})
    async with serving(settings) as (gateway, url, http):
        _, task = await submit(http, url, {"text": "Run the echo command please."}, MEMBER)
        approval = await _asked(gateway, http, f"{url}/{task['id']}")
        async with http.delete(f"{url}/{task['id']}", headers=OWNER) as response:
            assert response.status == 200
        events = await follow(http, f"{url}/{task['id']}")
        await gateway.wait_idle()
        client = openai.AsyncOpenAI(base_url=url.removesuffix("/tasks"), api_key=OWNER_TOKEN)
        async with client:
            late = await client.chat.completions.create(
                model="main", messages=[{"role": "user", "content": f"/approve {approval}"}]
            )
        await gateway.wait_idle()
    states = [e["text"] for e in events if e["kind"] == "state"]
    assert states == ["queued", "running", "awaiting_approval", "stopped"]
    assert "already refused" in (late.choices[0].message.content or "")  # by the stop
    assert len(fake_llm.requests) == 1  # the command never ran, the model was not asked again


async def _asked(gateway: Gateway, http: aiohttp.ClientSession, url: str) -> str:
    """Wait until the task is parked and its approval request delivered; its id."""
    import re

    waiting: dict[str, Any] = {}

    def asked() -> bool:
        return waiting.get("state") == "awaiting_approval" and bool(waiting["notes"])

    async with asyncio.timeout(10):
        while not asked():
            change = gateway.subagents.signal.next_change()
            async with http.get(url, headers=MEMBER) as response:
                waiting = await response.json()
            if not asked():
                await change.wait()
    [note] = [n["text"] for n in waiting["notes"]]  # told it waits, never the approver's prompt
    found = re.search(r"needs the owner's approval first, so I asked \(request (\w+)\)", note)
    assert found is not None and "exec" in note and "/approve" not in note
    return found.group(1)


async def test_a_task_survives_a_restart(make_settings: SettingsFactory, fake_llm: FakeLLM) -> None:
    settings = task_settings(make_settings)
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "never delivered: the gateway stops first"))
    first = Gateway(settings, channels=[MemoryChannel()])
    await first.start()
    try:
        assert first.web is not None
        async with aiohttp.ClientSession() as http:
            _, task = await submit(http, first.web.url + "v1/tasks", {"text": "Count to three."})
        await fake_llm.wait_for_requests(1)
    finally:
        await first.stop(drain_timeout=0)  # the task is cut mid-turn
    assert (await _state(settings, task["id"])) == "running"
    fake_llm.responder = lambda request: text("One, two, three: counted.")
    async with serving(settings) as (gateway, url, http):
        events = await follow(http, f"{url}/{task['id']}")
        await gateway.wait_idle()
    states = [e["text"] for e in events if e["kind"] == "state"]
    assert states == ["queued", "running", "running", "done"]  # started again once
    assert [e["text"] for e in events if e["kind"] == "answer"] == ["One, two, three: counted."]
    resumed = fake_llm.requests[-1]
    assert resumed.user_texts == [resumed.user_texts[0]]  # its checkpoint: the prompt, once
    assert "Count to three." in resumed.user_texts[0]


async def _state(settings: Settings, task_id: str) -> str | None:
    from gateway.runtime.storage import store_for

    async with store_for(settings) as store:
        record = await store.tasks.get(task_id)
    return None if record is None else record.state


async def test_owner_tokens_may_deliver_a_tasks_answer_to_a_chat_and_members_may_not(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    fake_llm.responder = worker
    settings = task_settings(make_settings, telegram=section(tg), tools={"policy": MEMBERS_SPAWN})
    async with serving(settings, fast_channel(settings)) as (gateway, url, http):
        status, refused = await submit(
            http, url, {"text": "Survey it.", "deliver_to": "telegram:42"}, MEMBER
        )
        assert status == 403 and "deliver_to" in refused["error"]["message"]
        # a channel this gateway does not run: refused now, not an answer stuck forever
        status, refused = await submit(http, url, {"text": "x", "deliver_to": "slack:C1"})
        assert status == 400
        assert "slack is not configured on this gateway" in refused["error"]["message"]
        status, task = await submit(http, url, {"text": "Survey it.", "deliver_to": "telegram:42"})
        assert status == 202 and task["deliver_to"] == "telegram:42"
        await follow(http, f"{url}/{task['id']}")
        await tg.wait_sent(2, chat_id=42)
        await gateway.wait_idle()
        async with http.get(f"{url}/{task['id']}", headers=MEMBER) as response:
            assert response.status == 404  # the owner token's task
    texts = tg.texts(42)
    assert texts[0] == f"[task {task['id']}] Reading the workspace now."
    assert texts[1].startswith(f"Background task {task['id']} finished:")
    assert len(texts) == 2


async def test_a_member_token_starts_a_task_only_where_a_member_may_use_spawn(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """Dogfood 9: a member token's POST /v1/tasks was accepted and ran, while the same
    member asking in a chat was refused spawn ("only available to the owner and admins").
    A task is what spawn starts: the task API asks the same rule (tools.policy)."""
    fake_llm.responder = lambda request: text("Surveyed.")
    async with serving(task_settings(make_settings)) as (gateway, url, http):
        status, refused = await submit(http, url, {"text": "Survey it."}, MEMBER)
        await gateway.wait_idle()
    assert status == 403
    assert "spawn is only available to the owner and admins" in refused["error"]["message"]
    assert fake_llm.requests == []
    async with serving(task_settings(make_settings, tools={"policy": MEMBERS_SPAWN})) as (
        gateway,
        url,
        http,
    ):
        status, task = await submit(http, url, {"text": "Survey it."}, MEMBER)
        events = await follow(http, f"{url}/{task['id']}")
        await gateway.wait_idle()
    assert status == 202 and ("answer", "Surveyed.") in [(e["kind"], e["text"]) for e in events]


async def test_a_chat_an_answer_could_never_reach_is_refused_as_a_tasks_target(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """Dogfood 9: deliver_to "terminal:owner" was taken (202), though the terminal's one
    chat is "local": the answer then failed in the outbox for good. Refused now (400)."""
    terminal = TerminalChannel(agent_name="Bot", model="m")
    async with serving(task_settings(make_settings), MemoryChannel(), terminal) as (
        gateway,
        url,
        http,
    ):
        status, refused = await submit(http, url, {"text": "x", "deliver_to": "terminal:owner"})
        await gateway.wait_idle()
    assert status == 400 and "the terminal's is terminal:local" in str(refused)
    assert fake_llm.requests == []


async def test_a_repeated_submission_is_the_same_task(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = lambda request: text("Checked the thing carefully: all fine.")
    headers = {**OWNER, "Idempotency-Key": "job-2024-06-01"}
    async with serving(task_settings(make_settings)) as (gateway, url, http):
        first_status, first = await submit(http, url, {"text": "Check the thing."}, headers)
        again_status, again = await submit(http, url, {"text": "Check the thing."}, headers)
        # the key again with another task (dogfood 9: answered 200 with the first task)
        other_status, other = await submit(http, url, {"text": "A different task."}, headers)
        await follow(http, f"{url}/{first['id']}")
        await gateway.wait_idle()
    assert (first_status, again_status) == (202, 200) and first["id"] == again["id"]
    assert other_status == 409 and other["error"]["code"] == "idempotency_key_reused"
    assert len(fake_llm.requests) == 1


async def test_a_task_waits_for_approval_and_goes_on_once_the_owner_approves(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """A member token's task that wants to run a command asks first (tools.approvals = ask);
    the owner approves with an owner token, and the task resumes at that call."""
    import openai

    def work(request: Recorded) -> Step:
        if not request.tool_results:
            return calls(("exec", {"command": "echo approved-by-the-owner"}))
        return text("The command ran after the owner's approval.")

    fake_llm.responder = work
    settings = task_settings(make_settings, tools={"approvals": "ask", "policy": MEMBERS_SPAWN})
    async with serving(settings) as (gateway, url, http):
        _, task = await submit(http, url, {"text": "Run the echo command please."}, MEMBER)
        approval = await _asked(gateway, http, f"{url}/{task['id']}")
        assert len(fake_llm.requests) == 1  # nothing ran while it waited
        client = openai.AsyncOpenAI(base_url=url.removesuffix("/tasks"), api_key=OWNER_TOKEN)
        async with client:
            decided = await client.chat.completions.create(
                model="main", messages=[{"role": "user", "content": f"/approve {approval}"}]
            )
        events = await follow(http, f"{url}/{task['id']}")
        await gateway.wait_idle()
    assert "approved" in (decided.choices[0].message.content or "").lower()
    states = [e["text"] for e in events if e["kind"] == "state"]
    assert states == ["queued", "running", "awaiting_approval", "running", "done"]
    assert "approved-by-the-owner" in fake_llm.requests[-1].tool_results[0]
