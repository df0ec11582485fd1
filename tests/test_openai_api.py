"""The OpenAI-compatible API with the real ``openai`` SDK against the real web server: answers
streamed and not, a session that remembers, tokens that are the only way in, and a member
token that gets a member's rights. Also the request shape of Open WebUI's OpenAI connection
(``GET /v1/models``, then the whole conversation resent with ``stream: true``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import openai
import pytest

from channels.memory import MemoryChannel
from gateway.config.settings import Settings
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, Step, calls, held, streamed, text
from tests.fakes.llm import error as llm_error

OWNER_TOKEN = "owner-token-0123456789abcdef"
MEMBER_TOKEN = "member-token-0123456789abcdef"
WEB_TOKEN = "web-token-0123456789abcdefgh"


def api_settings(make_settings: SettingsFactory, **overrides: Any) -> Settings:
    return make_settings(
        web={"port": 0, **overrides.pop("web", {})},
        api={
            "enabled": True,
            "tokens": [
                {"name": "ops", "token": OWNER_TOKEN, "role": "owner"},
                {"name": "script", "token": MEMBER_TOKEN, "role": "member"},
            ],
            **overrides.pop("api", {}),
        },
        **overrides,
    )


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[tuple[Gateway, str]]:
    async with Gateway(settings, channels=[MemoryChannel()]) as gateway:
        assert gateway.web is not None
        yield gateway, gateway.web.url + "v1"


@asynccontextmanager
async def sdk(url: str, token: str = OWNER_TOKEN) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(base_url=url, api_key=token, max_retries=0, timeout=30)
    try:
        yield client
    finally:
        await client.close()


async def test_a_completion_and_a_streamed_one_with_the_sdk(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        text("Paris is the capital of France."),
        streamed("Berlin is the capital of Germany.", chunks=4, over=0.05),
    )
    async with serving(api_settings(make_settings)) as (gateway, url), sdk(url) as client:
        answer = await client.chat.completions.create(
            model="main", messages=[{"role": "user", "content": "Capital of France?"}]
        )
        stream = await client.chat.completions.create(
            model="main",
            messages=[{"role": "user", "content": "Capital of Germany?"}],
            stream=True,
        )
        pieces = [chunk.choices[0].delta.content or "" async for chunk in stream]
        await gateway.wait_idle()
    assert answer.choices[0].message.content == "Paris is the capital of France."
    assert answer.model == "main" and answer.choices[0].finish_reason == "stop"
    assert "".join(pieces) == "Berlin is the capital of Germany."
    assert len([p for p in pieces if p]) > 1  # it came in pieces, as the model wrote it


async def test_a_second_call_remembers_the_first_and_a_resent_conversation_is_not_doubled(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """Open WebUI resends the whole conversation each time; the session has it already."""
    fake_llm.queue(text("Noted: your name is Ada."), text("Your name is Ada."))
    first = [{"role": "user", "content": "My name is Ada."}]
    async with serving(api_settings(make_settings)) as (gateway, url), sdk(url) as client:
        reply = await client.chat.completions.create(model="main", messages=first, user="ada")
        again = [
            *first,
            {"role": "assistant", "content": reply.choices[0].message.content},
            {"role": "user", "content": "What is my name?"},
        ]
        stream = await client.chat.completions.create(
            model="main", messages=again, user="ada", stream=True
        )
        answer = "".join([c.choices[0].delta.content or "" async for c in stream])
        await gateway.wait_idle()
    assert answer == "Your name is Ada."
    second = fake_llm.requests[1]
    assert second.user_texts == ["My name is Ada.", "What is my name?"]  # once each
    assert "Noted: your name is Ada." in json.dumps(second.body["messages"])


async def test_sessions_are_per_token_and_user(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = lambda request: text(f"You said {len(request.user_texts)} thing(s).")
    async with serving(api_settings(make_settings)) as (gateway, url):
        async with sdk(url) as owner, sdk(url, MEMBER_TOKEN) as member:
            for client, user in ((owner, "a"), (owner, "b"), (member, "a"), (owner, "a")):
                await client.chat.completions.create(
                    model="main", messages=[{"role": "user", "content": "hi"}], user=user
                )
        await gateway.wait_idle()
    assert [len(r.user_texts) for r in fake_llm.requests] == [1, 1, 1, 2]


async def test_a_wrong_token_is_refused_without_a_model_call(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = api_settings(make_settings, web={"token": WEB_TOKEN})
    async with serving(settings) as (gateway, url):
        for token in ("wrong-token-0123456789abcdef", WEB_TOKEN):  # the web chat's is no API token
            async with sdk(url, token) as client:
                with pytest.raises(openai.AuthenticationError) as refused:
                    await client.chat.completions.create(
                        model="main", messages=[{"role": "user", "content": "hello"}]
                    )
            assert refused.value.code == "invalid_api_key"
        async with aiohttp.ClientSession() as http:  # and an API token opens no web page
            headers = {"Authorization": f"Bearer {OWNER_TOKEN}"}
            async with http.get(url.removesuffix("v1") + "api/status", headers=headers) as r:
                assert r.status == 401
        assert await gateway.store.journal.counts() == {}
    assert fake_llm.requests == []


async def test_a_guesser_on_the_same_address_never_locks_a_valid_token_out(
    make_settings: SettingsFactory,
) -> None:
    """On a loopback bind every local program has the clients' address: ten wrong tokens a
    minute got Open WebUI and the owner's scripts refused (429) for as long as they went
    on. Wrong tokens are throttled; a valid one is checked first and answered."""
    async with serving(api_settings(make_settings)) as (_, url), aiohttp.ClientSession() as http:

        async def models(token: str) -> int:
            headers = {"Authorization": f"Bearer {token}"}
            async with http.get(url + "/models", headers=headers) as response:
                return response.status

        refused = [await models(f"wrong-token-{n:04d}-0123456789") for n in range(11)]
        assert refused == [401] * 10 + [429]
        assert await models(OWNER_TOKEN) == 200
        assert await models(MEMBER_TOKEN) == 200
        assert await models("wrong-token-9999-0123456789") == 429


async def test_a_member_token_is_refused_an_owner_only_tool(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        calls(("exec", {"command": "touch made-by-member"})),
        text("Running commands needs the owner; I could not do that."),
    )
    settings = api_settings(make_settings)
    async with serving(settings) as (gateway, url), sdk(url, MEMBER_TOKEN) as client:
        answer = await client.chat.completions.create(
            model="main", messages=[{"role": "user", "content": "run touch made-by-member"}]
        )
        await gateway.wait_idle()
    assert "exec" not in fake_llm.requests[0].tool_names
    assert "only available to the owner" in fake_llm.requests[1].tool_results[0]
    assert not (settings.workspace_dir / "made-by-member").exists()
    assert (
        answer.choices[0].message.content
        == "Running commands needs the owner; I could not do that."
    )


async def test_models_lists_the_agents_and_a_chat_names_one(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = lambda request: text("Hello from " + request.system_text.split(",")[0])
    settings = api_settings(make_settings, agents={"coder": {"name": "Coder"}})
    async with serving(settings) as (gateway, url), sdk(url) as client:
        models = await client.models.list()
        answer = await client.chat.completions.create(
            model="coder", messages=[{"role": "user", "content": "who are you?"}]
        )
        with pytest.raises(openai.NotFoundError):
            await client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
        await gateway.wait_idle()
    assert [m.id for m in models.data] == ["main", "coder"]
    assert "You are Coder" in (answer.choices[0].message.content or "")
    assert len(fake_llm.requests) == 1


async def test_open_webui_request_shape(make_settings: SettingsFactory, fake_llm: FakeLLM) -> None:
    """What Open WebUI's OpenAI connection sends: a models check, then chats with the whole
    conversation, ``stream: true``, extra sampling fields, and its chat id header."""
    fake_llm.queue(text("Hi! How can I help?"), text("Two plus two is four."))
    headers = {"Authorization": f"Bearer {OWNER_TOKEN}", "X-OpenWebUI-Chat-Id": "chat-77"}
    conversation: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    async with serving(api_settings(make_settings)) as (gateway, url):
        async with aiohttp.ClientSession(headers=headers) as http:
            async with http.get(url + "/models") as r:
                assert r.status == 200 and (await r.json())["data"][0]["id"] == "main"
            for question in ("hello", "what is 2+2?"):
                conversation.append(
                    {"role": "user", "content": [{"type": "text", "text": question}]}
                )
                body = {
                    "model": "main",
                    "messages": conversation,
                    "stream": True,
                    "temperature": 0.7,
                    "stream_options": {"include_usage": True},
                }
                async with http.post(url + "/chat/completions", json=body) as r:
                    assert r.headers["Content-Type"].startswith("text/event-stream")
                    events = [line async for line in r.content if line.startswith(b"data: ")]
                assert events[-1] == b"data: [DONE]\n"
                said = "".join(
                    json.loads(e[6:])["choices"][0]["delta"].get("content") or ""
                    for e in events[:-1]
                )
                conversation.append({"role": "assistant", "content": said})
        await gateway.wait_idle()
        _, stored = await gateway.store.history.load("api:ops:chat-77", limit=10)
    assert conversation[-1]["content"] == "Two plus two is four."
    assert fake_llm.requests[1].user_texts == ["hello", "what is 2+2?"]
    assert len(stored) == 4  # the session of that Open WebUI chat: two questions, two answers


async def test_a_body_too_large_for_one_read_is_read_whole(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """A long conversation (600 kB, under api.max_request_bytes) arrives over several reads
    of the socket: before, only what the first read returned was parsed ("the body is not
    JSON"), which over a real network could happen to any request."""
    fake_llm.queue(text("Read it all."))
    long_answer = "é" * 100_000  # 6 bytes each as JSON
    conversation = [
        {"role": "user", "content": "write a lot"},
        {"role": "assistant", "content": long_answer},
        {"role": "user", "content": "thanks, and now?"},
    ]
    headers = {"Authorization": f"Bearer {OWNER_TOKEN}"}
    async with (
        serving(api_settings(make_settings)) as (gateway, url),
        aiohttp.ClientSession(headers=headers) as http,
    ):
        body = json.dumps({"model": "main", "messages": conversation}).encode()
        assert len(body) > 600_000
        async with http.post(url + "/chat/completions", data=body) as r:
            assert r.status == 200, await r.text()
            answer = await r.json()
        await gateway.wait_idle()
    assert answer["choices"][0]["message"]["content"] == "Read it all."
    assert fake_llm.requests[0].last_user_text == "thanks, and now?"


async def test_a_request_over_a_limit_is_told_which_limit(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """A body over api.max_request_bytes said only "the body is over 1000000 bytes"; it
    names the setting now. A message over 100,000 characters names its limit too."""
    headers = {"Authorization": f"Bearer {OWNER_TOKEN}"}
    too_long = {"model": "main", "messages": [{"role": "user", "content": "x" * 100_001}]}
    async with (
        serving(api_settings(make_settings)) as (_, url),
        aiohttp.ClientSession(headers=headers) as http,
    ):
        async with http.post(url + "/chat/completions", data=b"{" * 1_100_000) as r:
            large = r.status, (await r.json())["error"]["message"]
        async with http.post(url + "/chat/completions", json=too_long) as r:
            long = r.status, (await r.json())["error"]["message"]
    assert large == (400, "the body is over 1000000 bytes (api.max_request_bytes)")
    assert long == (400, "the message is over 100000 characters")
    assert fake_llm.requests == []


async def test_an_unknown_path_or_a_wrong_method_is_an_openai_shaped_error(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """Under /v1, a path no endpoint has and a method its endpoint does not take were
    aiohttp's plain-text "404: Not Found" and "405: Method Not Allowed": a client reading
    ``error.message`` failed on them, and the SDK's exception had no code. They are JSON in
    OpenAI's shape now, the 405 with the methods the path takes in ``Allow``."""
    async with serving(api_settings(make_settings)) as (_, url), sdk(url) as client:
        with pytest.raises(openai.NotFoundError) as unknown:
            await client.get("/embeddings", cast_to=object)
        with pytest.raises(openai.APIStatusError) as wrong:
            await client.delete("/chat/completions", cast_to=object)
        async with aiohttp.ClientSession() as http:  # no token: still the API's error
            async with http.put(url + "/models") as r:
                put = r.status, r.headers.get("Allow", ""), r.content_type, await r.json()
            async with http.get(url + "/tasks/t1/nothing") as r:
                deeper = r.status, await r.json()
    assert unknown.value.code == "unknown_url"
    assert unknown.value.message.endswith(
        "Invalid URL (GET /v1/embeddings): no such endpoint (docs/connect.md lists them)"
    )
    assert (wrong.value.status_code, wrong.value.code) == (405, "method_not_allowed")
    assert wrong.value.response.headers["Allow"] == "POST"
    status, allow, content_type, body = put
    assert (status, content_type) == (405, "application/json")
    assert set(allow.split(",")) == {"GET", "HEAD"}
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["code"] == "method_not_allowed"
    assert (
        body["error"]["message"]
        == "Method not allowed (PUT /v1/models): /v1/models takes GET, HEAD"
    )
    assert deeper[0] == 404 and deeper[1]["error"]["code"] == "unknown_url"
    assert fake_llm.requests == []


async def test_a_streamed_answer_with_a_tool_step_shows_each_part_once(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """Text before a tool call streams, the answer after it starts a new paragraph, and the
    outbox's final answer completes the stream instead of repeating it."""
    fake_llm.queue(
        calls(("list_dir", {}), content="Let me look at the workspace."),
        streamed("The workspace holds the bootstrap files.", chunks=3, over=0.03),
    )
    async with serving(api_settings(make_settings)) as (gateway, url), sdk(url) as client:
        stream = await client.chat.completions.create(
            model="main", messages=[{"role": "user", "content": "what is here?"}], stream=True
        )
        shown = "".join([c.choices[0].delta.content or "" async for c in stream])
        await gateway.wait_idle()
    assert shown == "Let me look at the workspace.\n\nThe workspace holds the bootstrap files."


async def test_a_member_over_its_allowance_gets_429_without_a_model_call(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = lambda request: text("An answer that uses the one turn allowed.")
    settings = api_settings(make_settings, limits={"user_turns_per_hour": 1})
    async with serving(settings) as (gateway, url), sdk(url, MEMBER_TOKEN) as client:
        ask = {"model": "main", "messages": [{"role": "user", "content": "hi"}]}
        await client.chat.completions.create(**ask)  # type: ignore[call-overload]
        await gateway.wait_idle()
        with pytest.raises(openai.RateLimitError) as refused:
            await client.chat.completions.create(**ask)  # type: ignore[call-overload]
        # what their spend is, and what runs, they may still ask (no model is called)
        usage = {"model": "main", "messages": [{"role": "user", "content": "/usage"}]}
        told = await client.chat.completions.create(**usage)  # type: ignore[call-overload]
        await gateway.wait_idle()
    assert refused.value.code == "allowance"
    # the first refusal names the limit too (it was the chat's "more than I can take on")
    assert "1 turns in the last hour (limit 1)" in refused.value.message
    assert len(fake_llm.requests) == 1
    assert "turn" in (told.choices[0].message.content or "").lower()


async def test_two_requests_of_one_session_are_answered_in_turn_each_with_its_own_answer(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    import asyncio

    gate = asyncio.Event()
    fake_llm.queue(held(gate, "The first answer, about apples."))
    fake_llm.responder = lambda request: text("The second answer, about pears.")
    async with serving(api_settings(make_settings)) as (gateway, url), sdk(url) as client:

        async def ask(question: str) -> str:
            answer = await client.chat.completions.create(
                model="main", user="same", messages=[{"role": "user", "content": question}]
            )
            return answer.choices[0].message.content or ""

        first = asyncio.create_task(ask("Tell me about apples."))
        await fake_llm.wait_for_requests(1)
        second = asyncio.create_task(ask("And pears?"))
        gate.set()
        answers = await asyncio.gather(first, second)
        await gateway.wait_idle()
    assert answers == ["The first answer, about apples.", "The second answer, about pears."]
    assert fake_llm.requests[1].user_texts == ["Tell me about apples.", "And pears?"]


async def test_controls_answered_beside_the_queue_reach_the_waiting_request(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """/status, /help and /stop are answered at intake (gateway/runtime/dispatch/controls.py), not by a
    turn of the request's session: their answer still comes back to the request."""
    async with serving(api_settings(make_settings)) as (gateway, url), sdk(url) as client:
        shown = {}
        for command in ("/status", "/help", "/stop"):
            answer = await client.chat.completions.create(
                model="main", messages=[{"role": "user", "content": command}]
            )
            shown[command] = answer.choices[0].message.content or ""
        await gateway.wait_idle()
    assert shown["/status"].startswith("Switchboard ") and "Context:" in shown["/status"]
    assert "/stop" in shown["/help"]
    assert shown["/stop"] == "Nothing is running right now."
    assert fake_llm.requests == []  # controls need no model


async def test_an_api_client_stops_its_own_running_request_and_asks_for_status_meanwhile(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """Dogfood 9: /stop and /status sent while the session's streamed answer ran waited
    behind it (answered when it had finished: "Nothing is running right now."), so a client
    could not stop its own turn. They are answered beside the queue, as in a chat: /status
    says what runs, /stop stops it, and the stopped request ends with the turn's own word."""
    never = asyncio.Event()  # the model would go on writing only after this
    fake_llm.queue(Step(text="one two three four", stream_chunks=4, gate=never, pause_after=1))
    async with serving(api_settings(make_settings)) as (gateway, url), sdk(url) as client:

        async def ask(content: str, **options: Any) -> Any:
            return await client.chat.completions.create(
                model="main", user="me", messages=[{"role": "user", "content": content}], **options
            )

        async def streamed() -> str:
            stream = await ask("count slowly", stream=True)
            return "".join([c.choices[0].delta.content or "" async for c in stream])

        running = asyncio.create_task(streamed())
        await fake_llm.wait_for_requests(1)
        async with asyncio.timeout(10):  # before: until the turn ended, which it never does
            status = await ask("/status")
            stopped = await ask("/stop")
            shown = await running
        await gateway.wait_idle()
    assert "Now: " in (status.choices[0].message.content or "")
    assert (stopped.choices[0].message.content or "").startswith("Stopping it")
    assert shown.startswith("one") and "Stopped." in shown
    assert len(fake_llm.requests) == 1


async def test_an_idempotency_key_is_per_session_so_another_user_gets_their_own_answer(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """Issue 44's finding: with one token, bob sent the key alice had used and got alice's
    answer; his own message never ran. The key is the session's: bob's message runs and he
    gets his answer, while alice's repeat still gets hers without a second turn."""
    fake_llm.responder = lambda request: text(f"About: {request.last_user_text}")
    key = {"Idempotency-Key": "req-2024-06-01-1"}
    async with serving(api_settings(make_settings)) as (gateway, url), sdk(url) as client:

        async def ask(user: str, question: str) -> str:
            answer = await client.chat.completions.create(
                model="main",
                user=user,
                messages=[{"role": "user", "content": question}],
                extra_headers=key,
            )
            return answer.choices[0].message.content or ""

        alices = await ask("alice", "Alice's salary review?")
        bobs = await ask("bob", "Bob's travel plans?")
        again = await ask("alice", "Alice's salary review?")  # her client retried
        # the key again with another question: a client's bug, never the first's answer
        with pytest.raises(openai.ConflictError) as reused:
            await ask("alice", "Something else entirely?")
        await gateway.wait_idle()
    assert reused.value.code == "idempotency_key_reused"
    assert alices == again == "About: Alice's salary review?"
    assert bobs == "About: Bob's travel plans?"
    assert [r.last_user_text for r in fake_llm.requests] == [
        "Alice's salary review?",
        "Bob's travel plans?",
    ]


async def test_a_repeated_streaming_request_gets_its_answer_as_a_stream(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """A client that streams and retries with its Idempotency-Key reads the answer again
    from a stream (before: plain JSON, which the SDK read as an empty answer)."""
    fake_llm.queue(text("count=1 and that is all"))
    async with serving(api_settings(make_settings)) as (gateway, url), sdk(url) as client:

        async def ask() -> str:
            stream = await client.chat.completions.create(
                model="main",
                messages=[{"role": "user", "content": "count once"}],
                stream=True,
                extra_headers={"Idempotency-Key": "stream-key-1"},
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

        first = await ask()
        again = await ask()
        await gateway.wait_idle()
    assert first == again == "count=1 and that is all"
    assert len(fake_llm.requests) == 1


def streamed_text(events: list[bytes]) -> str:
    """What a stream's ``data:`` events say, joined (``[DONE]`` last)."""
    assert events[-1] == b"data: [DONE]\n"
    return "".join(
        json.loads(e[6:])["choices"][0]["delta"].get("content") or "" for e in events[:-1]
    )


async def test_a_request_asked_again_after_its_client_left_gets_the_answer_of_its_one_turn(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """Dogfood 9: a stream dropped and sent again with its Idempotency-Key got 409
    duplicate_request, also once the turn had finished: an answer was kept only if its client
    was still there. A request outlives its client now: asked again, it gets the answer of
    its one turn (as a stream when asked so), or waits for it while the turn runs."""
    rest, slow = asyncio.Event(), asyncio.Event()
    fake_llm.queue(
        Step(text="one two three four", stream_chunks=4, gate=rest, pause_after=1),
        held(slow, "The slow answer."),
    )
    settings = api_settings(make_settings, api={"answer_timeout_seconds": 2})
    auth = {"Authorization": f"Bearer {OWNER_TOKEN}"}
    counting = {"model": "main", "stream": True, "messages": [{"role": "user", "content": "count"}]}
    slowly = {"model": "main", "messages": [{"role": "user", "content": "take your time"}]}
    async with serving(settings) as (gateway, url), aiohttp.ClientSession(headers=auth) as http:
        chat = url + "/chat/completions"
        first = await http.post(chat, json=counting, headers={"Idempotency-Key": "drop-1"})
        await first.content.readline()  # the stream has begun
        first.close()  # and the client goes
        rest.set()
        await gateway.wait_idle()  # answered, with nobody there
        async with http.post(chat, json=counting, headers={"Idempotency-Key": "drop-1"}) as again:
            assert again.status == 200
            repeated = [line async for line in again.content if line.startswith(b"data: ")]
        async with http.post(chat, json=slowly, headers={"Idempotency-Key": "slow-1"}) as late:
            assert late.status == 504  # the turn goes on
        joining = {**slowly, "stream": True}
        async with http.post(chat, json=joining, headers={"Idempotency-Key": "slow-1"}) as joined:
            await joined.content.readline()  # it waits on the running turn now
            slow.set()
            waited = [line async for line in joined.content if line.startswith(b"data: ")]
        await gateway.wait_idle()
    assert streamed_text(repeated) == "one two three four"
    assert streamed_text(waited) == "The slow answer."
    assert [r.last_user_text for r in fake_llm.requests] == ["count", "take your time"]


async def test_each_completion_has_an_id_of_its_own_and_a_repeat_gets_the_first_ones(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """Dogfood 9: streamed completions sent with an Idempotency-Key all had the id
    ``chatcmpl-ops:my-long-session-n``, the token's and the session's names cut short."""
    fake_llm.responder = lambda request: text(f"About {request.last_user_text}.")
    auth = {"Authorization": f"Bearer {OWNER_TOKEN}"}
    ids = []
    async with (
        serving(api_settings(make_settings)) as (gateway, url),
        aiohttp.ClientSession(headers=auth) as http,
    ):
        for key in ("req-0001", "req-0002", "req-0001"):  # the last: a repeat
            body = {
                "model": "main",
                "user": "my-long-session-name",
                "stream": True,
                "messages": [{"role": "user", "content": f"request {key}"}],
            }
            headers = {"Idempotency-Key": key}
            async with http.post(url + "/chat/completions", json=body, headers=headers) as r:
                events = [line async for line in r.content if line.startswith(b"data: {")]
            ids.append({json.loads(e[6:])["id"] for e in events})
        async with http.post(
            url + "/chat/completions",
            json={"model": "main", "messages": [{"role": "user", "content": "plain"}]},
        ) as r:
            ids.append({(await r.json())["id"]})
        await gateway.wait_idle()
    first, second, repeated, plain = (one for [one] in map(list, ids))
    assert len({first, second, plain}) == 3 and repeated == first
    assert all(re.fullmatch(r"chatcmpl-[0-9a-f]{32}", i) for i in (first, second, plain))


async def test_a_turn_whose_model_fails_is_an_error_and_a_member_is_not_shown_its_address(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """Dogfood 9: a model failure came back as 200 with finish_reason "stop", the failure
    notice as the answer (the model server's URL in it, also for member tokens): a script
    could not tell it from an answer. It is an OpenAI-shaped 502 now, streamed as an error
    event; an owner's token reads the notice (the cause and the fix), others only that the
    turn failed."""
    fake_llm.responder = lambda request: llm_error(500, "model server exploded")
    address = fake_llm.openai_url.split("/v1")[0]
    async with (
        serving(api_settings(make_settings)) as (gateway, url),
        sdk(url) as owner,
        sdk(url, MEMBER_TOKEN) as member,
    ):
        with pytest.raises(openai.APIStatusError) as owners:
            await owner.chat.completions.create(
                model="main", messages=[{"role": "user", "content": "please answer"}]
            )
        with pytest.raises(openai.APIStatusError) as members:
            await member.chat.completions.create(
                model="main", messages=[{"role": "user", "content": "please answer"}]
            )
        with pytest.raises(openai.APIError) as streamed:
            stream = await member.chat.completions.create(
                model="main", messages=[{"role": "user", "content": "again"}], stream=True
            )
            async for _ in stream:
                pass
        await gateway.wait_idle()
    assert owners.value.status_code == members.value.status_code == 502
    assert owners.value.code == members.value.code == "turn_failed"
    assert address in owners.value.message and "HTTP 500" in owners.value.message
    for refused in (members.value, streamed.value):
        assert "could not answer" in refused.message and address not in refused.message


async def test_a_client_that_leaves_its_stream_is_no_error(
    make_settings: SettingsFactory, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """Closing the connection in the middle of a streamed answer is a client's right: the
    answer is kept in the session's history, and nothing is logged as an error (it was a
    traceback, then shown by `switchboard status` as the latest error)."""
    rest = asyncio.Event()
    fake_llm.queue(Step(text="one two three four", stream_chunks=4, gate=rest, pause_after=1))
    headers = {"Authorization": f"Bearer {OWNER_TOKEN}"}
    body = {"model": "main", "stream": True, "messages": [{"role": "user", "content": "count"}]}
    async with serving(api_settings(make_settings)) as (gateway, url):
        async with aiohttp.ClientSession(headers=headers) as http:
            response = await http.post(url + "/chat/completions", json=body)
            await response.content.readline()  # the stream has begun
            response.close()  # and the client goes
        rest.set()
        await gateway.wait_idle()
        _, stored = await gateway.store.history.load("api:ops", limit=10)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert any("one two three four" in str(m.body) for m in stored)


async def test_a_member_tokens_status_shows_its_own_spend_and_no_one_elses_work(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """What others spent and asked for is no member's business: a member token's /status
    shows its own tokens today and no background task; an owner token's shows everyone's
    spend and the owner's task."""
    import asyncio

    gate = asyncio.Event()
    fake_llm.queue(text("The owner's answer."), held(gate, "The memo is drafted."))
    async with serving(api_settings(make_settings)) as (gateway, url):
        async with sdk(url) as owner, sdk(url, MEMBER_TOKEN) as member:
            await owner.chat.completions.create(
                model="main", messages=[{"role": "user", "content": "Summarise the quarter."}]
            )
            async with (
                aiohttp.ClientSession() as http,
                http.post(
                    url + "/tasks",
                    json={"text": "Draft the memo on the reorganisation."},
                    headers={"Authorization": f"Bearer {OWNER_TOKEN}"},
                ) as submitted,
            ):
                assert submitted.status == 202
            await fake_llm.wait_for_requests(2)  # the task runs
            shown = {}
            for name, client in (("member", member), ("owner", owner)):
                answer = await client.chat.completions.create(
                    model="main", messages=[{"role": "user", "content": "/status"}]
                )
                shown[name] = answer.choices[0].message.content or ""
            gate.set()
        await gateway.wait_idle()
    [member_spend] = [line for line in shown["member"].splitlines() if line.startswith("Today:")]
    [owner_spend] = [line for line in shown["owner"].splitlines() if line.startswith("Today:")]
    assert member_spend == "Today: you 0 tokens"
    assert "everyone" in owner_spend and "you 0 tokens" not in owner_spend
    assert "reorganisation" not in shown["member"] and "Background task" not in shown["member"]
    assert "Draft the memo on the reorganisation." in shown["owner"]


async def test_each_request_and_each_answered_turn_is_one_info_line_without_secrets(
    make_settings: SettingsFactory, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """`switchboard logs` at info shows the API's requests (method, path, status, token name)
    and the turns answered (chat, agent, tokens, duration); never a token or what was said."""
    caplog.set_level(logging.INFO)
    fake_llm.queue(text("Paris is the capital of France."))
    async with serving(api_settings(make_settings)) as (gateway, url):
        async with sdk(url) as client:
            await client.chat.completions.create(
                model="main", messages=[{"role": "user", "content": "Capital of France?"}]
            )
        async with sdk(url, "wrong-token-0123456789abcdef") as stranger:
            with pytest.raises(openai.AuthenticationError):
                await stranger.models.list()
        await gateway.wait_idle()
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    requests = [line for line in lines if line.startswith("api: ")]
    assert [re.sub(r"\d+\.\d s\)$", "T s)", line) for line in requests] == [
        "api: POST /v1/chat/completions 200 (token ops, T s)",
        "api: GET /v1/models 401 (no valid token, T s)",
    ]
    [turn] = [line for line in lines if line.startswith("turn ")]
    found = re.fullmatch(
        r"turn \S+ in api:ops\S* \(agent main\) answered: ([\d,]+) tokens, \d+\.\d s", turn
    )
    assert found is not None, turn
    assert int(found[1].replace(",", "")) > 0
    for secret in (OWNER_TOKEN, "wrong-token-0123456789abcdef", "France"):
        assert secret not in caplog.text


@asynccontextmanager
async def counting_sdk(
    url: str, sent: list[str], *, on_request: Any = None, **options: Any
) -> AsyncIterator[openai.AsyncOpenAI]:
    """The SDK with its own retries (``max_retries`` as given), recording each request it
    sends (its ``x-stainless-retry-count``: "0", then "1", ... for its retries)."""

    async def record(request: Any) -> None:
        sent.append(request.headers.get("x-stainless-retry-count", ""))
        if on_request is not None:
            on_request(len(sent))

    http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [record]})
    client = openai.AsyncOpenAI(base_url=url, api_key=OWNER_TOKEN, http_client=http, **options)
    try:
        yield client
    finally:
        await client.close()


async def test_an_sdk_retry_after_its_timeout_gets_the_first_requests_answer(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """The official SDK sends a request again when it times out, without an Idempotency-Key:
    each retry was a new turn (dogfood 9: one create() call, three turns, the question three
    times in the history). Its retry is the request it repeats: one turn, and the retry gets
    its answer."""
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "One answer, from one turn."))
    sent: list[str] = []

    def answer_once_retried(count: int) -> None:
        if count == 2:  # the SDK gave up waiting and asks again: now the turn may end
            gate.set()

    async with (
        serving(api_settings(make_settings)) as (gateway, url),
        counting_sdk(url, sent, on_request=answer_once_retried, timeout=1.5, max_retries=3) as sdk,
    ):
        answer = await sdk.chat.completions.create(
            model="main", user="me", messages=[{"role": "user", "content": "Plan my Tuesday."}]
        )
        await gateway.wait_idle()
        _, stored = await gateway.store.history.load("api:ops:me", limit=10)
    assert sent[:2] == ["0", "1"]  # it did retry
    assert answer.choices[0].message.content == "One answer, from one turn."
    assert len(fake_llm.requests) == 1
    assert len(stored) == 2  # the question once, and its answer


async def test_errors_tell_the_sdk_not_to_retry_what_would_run_again(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """A 504 (the turn goes on) and a 409 were retried by the SDK twice each: three turns
    for one call. They say ``x-should-retry: false`` now; the SDK sends each once."""
    gate = asyncio.Event()
    fake_llm.queue(text("The first answer."), held(gate, "A slow answer."))
    sent: list[str] = []
    settings = api_settings(make_settings, api={"answer_timeout_seconds": 0.5})
    key = {"Idempotency-Key": "once-1"}
    async with (
        serving(settings) as (gateway, url),
        counting_sdk(url, sent, max_retries=2, timeout=30) as sdk,
    ):
        await sdk.chat.completions.create(
            model="main", messages=[{"role": "user", "content": "first"}], extra_headers=key
        )
        with pytest.raises(openai.ConflictError):  # the key again with another question
            await sdk.chat.completions.create(
                model="main", messages=[{"role": "user", "content": "other"}], extra_headers=key
            )
        with pytest.raises(openai.InternalServerError) as late:
            await sdk.chat.completions.create(
                model="main", messages=[{"role": "user", "content": "slow one"}]
            )
        gate.set()
        await gateway.wait_idle()
    assert late.value.status_code == 504
    assert sent == ["0", "0", "0"]  # each sent once
    assert [r.last_user_text for r in fake_llm.requests] == ["first", "slow one"]


async def test_an_sdk_retry_after_a_restart_gets_the_answer_of_the_one_turn(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """The SDK's retry was matched to its first try in the process's memory only: a
    restart between the two (the first try's connection cut by it) made the retry a new
    turn beside the resumed one, the question twice in the history. The match is in the
    store now: the retry is the first try's message, and gets the answer of the turn that
    took it, resumed after the restart (here from the store: it answered before the retry
    came)."""
    cut = asyncio.Event()  # never set: the restart cuts the first process's model call
    fake_llm.queue(held(cut, "Never sent."))
    fake_llm.responder = lambda request: text(f"Answer of model call {len(fake_llm.requests)}.")
    restarted = asyncio.Event()
    sent: list[str] = []

    async def hold_the_retry(request: Any) -> None:
        sent.append(request.headers.get("x-stainless-retry-count", ""))
        if len(sent) > 1:  # the SDK's retry goes out once the gateway is back
            await restarted.wait()

    http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [hold_the_retry]})
    settings = api_settings(make_settings)
    async with Gateway(settings, channels=[MemoryChannel()]) as gateway:
        assert gateway.web is not None and gateway.web.port is not None
        port, url = gateway.web.port, gateway.web.url + "v1"
        client = openai.AsyncOpenAI(
            base_url=url, api_key=OWNER_TOKEN, http_client=http, max_retries=2, timeout=30
        )
        asking = asyncio.create_task(
            client.chat.completions.create(
                model="main", user="me", messages=[{"role": "user", "content": "Plan my Tuesday."}]
            )
        )
        await fake_llm.wait_for_requests(1)  # journaled, and its turn runs
        await gateway.stop(drain_timeout=0)  # the restart: the turn is cut, the client too
    again = api_settings(make_settings, web={"port": port})
    async with Gateway(again, channels=[MemoryChannel()]) as gateway:
        await gateway.wait_idle()  # the turn resumed and answered, with nobody waiting
        restarted.set()
        answer = await asking
        await gateway.wait_idle()
        _, stored = await gateway.store.history.load("api:ops:me", limit=10)
    await client.close()
    assert sent == ["0", "1"]  # the first try, and the SDK's retry of it after the restart
    assert answer.choices[0].message.content == "Answer of model call 2."  # the resumed turn's
    assert len(fake_llm.requests) == 2  # the cut call, and the resumed turn's: no other turn
    assert [m.body["role"] for m in stored] == ["user", "assistant"]  # the question once


async def test_a_request_repeated_after_a_restart_waits_for_its_resumed_turn(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """A request sent again with its Idempotency-Key after a restart was 409
    duplicate_request: the new process had not seen it. It waits now for the turn that
    took it (resumed after the restart) and gets its answer, as a stream when asked so."""
    cut, resumed = asyncio.Event(), asyncio.Event()
    fake_llm.queue(held(cut, "Never sent."), held(resumed, "Tuesday: the dentist at 9."))
    auth = {"Authorization": f"Bearer {OWNER_TOKEN}", "Idempotency-Key": "plan-1"}
    body = {"model": "main", "messages": [{"role": "user", "content": "Plan my Tuesday."}]}
    settings = api_settings(make_settings)
    async with aiohttp.ClientSession(headers=auth) as http:
        async with Gateway(settings, channels=[MemoryChannel()]) as gateway:
            assert gateway.web is not None and gateway.web.port is not None
            port, chat = gateway.web.port, gateway.web.url + "v1/chat/completions"
            first = asyncio.create_task(http.post(chat, json=body))
            await fake_llm.wait_for_requests(1)  # journaled, and its turn runs
            await gateway.stop(drain_timeout=0)  # the restart cuts the turn and the request
        with pytest.raises(aiohttp.ClientError):
            await first
        again = api_settings(make_settings, web={"port": port})
        async with Gateway(again, channels=[MemoryChannel()]) as gateway:
            await fake_llm.wait_for_requests(2)  # the turn resumed
            async with http.post(chat, json={**body, "stream": True}) as repeated:
                assert repeated.status == 200
                await repeated.content.readline()  # it waits on the resumed turn now
                resumed.set()
                events = [line async for line in repeated.content if line.startswith(b"data: ")]
            await gateway.wait_idle()
            _, stored = await gateway.store.history.load("api:ops", limit=10)
    assert streamed_text(events) == "Tuesday: the dentist at 9."
    assert len(fake_llm.requests) == 2  # the cut call and the resumed turn's: no other turn
    assert [m.body["role"] for m in stored] == ["user", "assistant"]
