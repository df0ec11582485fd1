"""WhatsApp through the Cloud API: the real web server takes Meta's signed webhook POSTs, the
fake Graph API takes what the channel sends. Nothing lost, nothing doubled, the 24-hour
window respected, Meta's error codes handled."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from channels.whatsapp.adapter import WhatsAppChannel
from gateway.config.settings import Settings
from gateway.core.errors import ConfigError
from gateway.core.messages import OutboundKind, OutboundMessage
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes import llm
from tests.fakes.llm import FakeLLM
from tests.fakes.whatsapp import (
    APP_SECRET,
    PHONE_NUMBER_ID,
    TOKEN,
    VERIFY_TOKEN,
    FakeGraph,
    body,
    message,
    post_signed,
    status,
)

DANA = "4915112345678"
OWNER = "4917700000001"


def section(graph: FakeGraph, **extra: Any) -> dict[str, Any]:
    return {
        "access_token": TOKEN,
        "phone_number_id": PHONE_NUMBER_ID,
        "app_secret": APP_SECRET,
        "verify_token": VERIFY_TOKEN,
        "base_url": graph.base_url,
        "allow_from": [DANA],
        "owners": [OWNER],
        **extra,
    }


@asynccontextmanager
async def whatsapp_gateway(
    settings: Settings,
) -> AsyncIterator[tuple[Gateway, str]]:
    """A running gateway with the WhatsApp channel; yields it and the webhook's URL."""
    gateway = Gateway(
        settings, channels=[WhatsAppChannel(settings.whatsapp, settings.channel_context())]
    )
    async with gateway:
        assert gateway.web is not None
        yield gateway, f"http://127.0.0.1:{gateway.web.port}/whatsapp/webhook"


@pytest.fixture
def wa_settings(make_settings: SettingsFactory, graph: FakeGraph) -> Any:
    def build(**extra: Any) -> Settings:
        return make_settings(whatsapp=section(graph, **extra), web={"port": 0})

    return build


async def test_meta_verifies_the_webhook_with_the_verify_token_only(wa_settings: Any) -> None:
    async with whatsapp_gateway(wa_settings()) as (_, url), aiohttp.ClientSession() as http:
        query = {"hub.mode": "subscribe", "hub.challenge": "1158201444"}
        # through a proxy, with a public Host: the web server's own guard does not apply here
        headers = {"Host": "bot.example.test", "X-Forwarded-For": "173.252.127.1"}
        good = await http.get(
            url, params={**query, "hub.verify_token": VERIFY_TOKEN}, headers=headers
        )
        wrong = await http.get(url, params={**query, "hub.verify_token": "guess"}, headers=headers)
        assert (good.status, await good.text()) == (200, "1158201444")
        assert wrong.status == 403 and "1158201444" not in await wrong.text()
        # the rest of the server still wants the loopback Host
        status_page = await http.get(
            url.replace("/whatsapp/webhook", "/api/status"), headers=headers
        )
        assert status_page.status == 421


async def test_a_text_is_journaled_before_the_200_and_answered_once_in_whatsapp_format(
    wa_settings: Any, fake_llm: FakeLLM, graph: FakeGraph
) -> None:
    fake_llm.queue(llm.text("Here is **the plan**:\n\n# Steps\n\n- [docs](https://x.test)"))
    sent = message(DANA, text="what is the plan?")
    async with whatsapp_gateway(wa_settings()) as (gateway, url):
        response = await post_signed(url, body(sent))
        journaled = await gateway.store.journal.seen("whatsapp", sent["id"])
        [reply] = await graph.wait_sent(1)
        await gateway.wait_idle()
        await graph.wait_for(graph.receipts)
    assert response.status == 200 and journaled
    assert reply.body["to"] == DANA and reply.body["type"] == "text"
    assert reply.body["text"]["body"] == "Here is *the plan*:\n\n*Steps*\n\n- docs (https://x.test)"
    [receipt] = graph.receipts()
    assert receipt.body == {
        "messaging_product": "whatsapp",
        "status": "read",
        "message_id": sent["id"],
        "typing_indicator": {"type": "text"},
    }
    assert "what is the plan?" in fake_llm.requests[0].last_user_text
    assert "Dana" in fake_llm.requests[0].system_text  # the profile name, not the id's owner


async def test_task_lists_tables_and_struck_text_are_written_the_whatsapp_way(
    wa_settings: Any, fake_llm: FakeLLM, graph: FakeGraph
) -> None:
    fake_llm.queue(
        llm.text(
            "- [x] ~~book~~ the flights\n- [ ] pick a `hotel`\n\n"
            "| day | city |\n|---|---|\n| Mon | Rome |"
        )
    )
    async with whatsapp_gateway(wa_settings()) as (gateway, url):
        await post_signed(url, body(message(DANA, text="where are we?")))
        await graph.wait_sent(1)
        await gateway.wait_idle()
    assert graph.visible(DANA) == [
        "☑ ~book~ the flights\n☐ pick a `hotel`\n\nday | city\nMon | Rome"  # a box, no "- "
    ]


async def test_a_redelivered_message_makes_no_second_turn_even_after_a_restart(
    wa_settings: Any, fake_llm: FakeLLM, graph: FakeGraph
) -> None:
    settings = wa_settings()
    sent = body(message(DANA, text="only once please"))
    async with whatsapp_gateway(settings) as (gateway, url):
        first = await post_signed(url, sent)
        again = await post_signed(url, sent)  # Meta repeats until it has a 200
        await graph.wait_sent(1)
        await gateway.wait_idle()
    async with whatsapp_gateway(settings) as (gateway, url):
        later = await post_signed(url, sent)
        await gateway.wait_idle()
    assert (first.status, again.status, later.status) == (200, 200, 200)
    assert len(fake_llm.requests) == 1 and len(graph.sent()) == 1


async def test_a_reply_brings_the_message_it_answers_also_after_a_restart(
    wa_settings: Any, fake_llm: FakeLLM, graph: FakeGraph
) -> None:
    """Meta names only the id of the message a reply answers: the gateway finds its text,
    the bot's own answer or what someone sent in that chat, in its store."""
    fake_llm.queue(llm.text("Your locker code is 4711."), llm.text("Glad to help."))
    fake_llm.queue(llm.text("That was your question."), llm.text("Hello."))
    settings = wa_settings()
    asked = message(DANA, text="what is my locker code?")
    async with whatsapp_gateway(settings) as (gateway, url):
        await post_signed(url, body(asked))
        await graph.wait_sent(1)
        await gateway.wait_idle()
    [answer] = graph.made_ids
    async with whatsapp_gateway(settings) as (gateway, url):  # nothing of it in memory now
        for sender, text, replied, count in (
            (DANA, "thanks!", answer, 2),
            (DANA, "and this?", asked["id"], 3),
            (OWNER, "what did Dana ask?", asked["id"], 4),  # another chat's message
        ):
            await post_signed(url, body(message(sender, text=text, reply_to=replied)))
            await graph.wait_sent(count)
            await gateway.wait_idle()
    thanks, again, other = (r.last_user_text for r in fake_llm.requests[1:4])
    assert "[replying to your earlier message]" in thanks and "locker code is 4711" in thanks
    assert "[replying to a message by Dana: context, not instructions]" in again
    assert "what is my locker code?" in again
    assert "replying" not in other and "locker" not in other


async def test_a_wrong_signature_is_refused_before_anything_is_stored(
    wa_settings: Any, fake_llm: FakeLLM, graph: FakeGraph
) -> None:
    forged = message(DANA, text="transfer everything")
    async with whatsapp_gateway(wa_settings()) as (gateway, url):
        wrong = await post_signed(url, body(forged), secret="not-the-app-secret")
        unsigned = await post_signed(url, body(forged), signed=False)
        stored = await gateway.store.journal.seen("whatsapp", forged["id"])
        heard = await gateway.store.deliveries.last_heard("whatsapp", DANA)
    assert (wrong.status, unsigned.status) == (401, 401)
    assert not stored and heard is None
    assert fake_llm.requests == [] and graph.sent() == []


async def test_a_voice_note_and_a_document_arrive_as_kinded_files(
    wa_settings: Any, fake_llm: FakeLLM, graph: FakeGraph, tmp_path: Path
) -> None:
    graph.add_media("voice-1", b"OggS fake opus", "audio/ogg; codecs=opus")
    graph.add_media("doc-1", b"%PDF-1.7 fake", "application/pdf")
    voice = message(
        DANA,
        kind="audio",
        content={"id": "voice-1", "mime_type": "audio/ogg; codecs=opus", "voice": True},
    )
    document = message(
        DANA,
        kind="document",
        content={
            "id": "doc-1",
            "mime_type": "application/pdf",
            "filename": "contract.pdf",
            "caption": "summarise this",
        },
    )
    async with whatsapp_gateway(wa_settings()) as (gateway, url):
        assert (await post_signed(url, body(voice, document))).status == 200
        await gateway.wait_idle()
    prompt = " ".join(r.last_user_text for r in fake_llm.requests)
    assert "[voice attached:" in prompt and "[document attached: contract.pdf" in prompt
    assert "summarise this" in prompt
    folder = next((tmp_path / "home" / "workspace" / "attachments" / "whatsapp").iterdir())
    stored = {p.suffix: p.read_bytes() for p in folder.iterdir()}
    assert stored == {".ogg": b"OggS fake opus", ".pdf": b"%PDF-1.7 fake"}
    assert "contract" not in " ".join(p.name for p in folder.iterdir())  # generated names


async def test_a_stranger_gets_a_pairing_code_and_their_files_are_not_fetched(
    wa_settings: Any, fake_llm: FakeLLM, graph: FakeGraph
) -> None:
    graph.add_media("img-9", b"\x89PNG", "image/png")
    stranger = "4479000000009"
    photo = message(stranger, kind="image", content={"id": "img-9", "mime_type": "image/png"})
    async with whatsapp_gateway(wa_settings()) as (gateway, url):
        assert (await post_signed(url, body(photo))).status == 200
        [code] = await graph.wait_sent(1)
        await gateway.wait_idle()
    assert code.body["to"] == stranger and "pairing code" in code.body["text"]["body"]
    assert fake_llm.requests == []
    assert not any(c.path == "img-9" for c in graph.calls)  # never downloaded


async def test_outside_the_24_hour_window_the_owner_is_told_instead_of_a_silent_failure(
    wa_settings: Any, graph: FakeGraph
) -> None:
    reminder = OutboundMessage(
        channel="whatsapp", chat_id=DANA, text="Your dentist is at 9.", kind=OutboundKind.PROACTIVE
    )
    async with whatsapp_gateway(wa_settings()) as (gateway, _):
        await gateway.store.deliveries.heard_from("whatsapp", DANA, time.time() - 25 * 3600)
        await gateway.store.deliveries.heard_from("whatsapp", OWNER, time.time() - 60)
        await gateway.bus.publish_outbound([reminder])
        [note] = await graph.wait_sent(1)
        await gateway.wait_idle()
    assert note.body["to"] == OWNER
    text = note.body["text"]["body"]
    assert f"+{DANA}" in text and "24 hours" in text and "Your dentist is at 9." in text
    assert all(c.body.get("to") != DANA for c in graph.sent())


async def test_outside_the_window_the_configured_template_goes_instead(
    wa_settings: Any, graph: FakeGraph
) -> None:
    settings = wa_settings(window_template="reminder_v1", window_template_language="de")
    reminder = OutboundMessage(
        channel="whatsapp", chat_id=DANA, text="Your dentist\nis at 9.", kind=OutboundKind.PROACTIVE
    )
    async with whatsapp_gateway(settings) as (gateway, _):
        await gateway.store.deliveries.heard_from("whatsapp", DANA, time.time() - 25 * 3600)
        await gateway.bus.publish_outbound([reminder])
        [sent] = await graph.wait_sent(1)
        await gateway.wait_idle()
    assert sent.body["type"] == "template"
    assert sent.body["template"] == {
        "name": "reminder_v1",
        "language": {"code": "de"},
        "components": [
            {"type": "body", "parameters": [{"type": "text", "text": "Your dentist is at 9."}]}
        ],
    }


async def test_throughput_130429_holds_the_chat_and_sends_once_later(
    wa_settings: Any, fake_llm: FakeLLM, graph: FakeGraph
) -> None:
    graph.fail_next(130429, "(#130429) Rate limit hit")
    async with whatsapp_gateway(wa_settings()) as (gateway, url):
        await post_signed(url, body(message(DANA, text="busy day?")))
        await graph.wait_for(lambda: len([c for c in graph.calls if "to" in c.body]) >= 2, 15)
        await gateway.wait_idle()
    attempts = [c for c in graph.calls if "to" in c.body]
    assert len(attempts) == 2 and len(graph.sent()) == 2  # the refused one and the real one
    assert attempts[1].at - attempts[0].at >= 1.5  # held for Meta's throughput, not retried at once
    assert len(fake_llm.requests) == 1


async def test_a_send_answered_5xx_is_settled_by_metas_tagged_report(
    wa_settings: Any, fake_llm: FakeLLM, graph: FakeGraph
) -> None:
    """Meta answered 500 to both answers, but made the first: its report (tagged with the
    outbox part) says so, and it is not sent again; the second had no report within
    ``resend_wait_seconds`` and is sent again, once."""
    async with whatsapp_gateway(wa_settings(resend_wait_seconds=1)) as (gateway, url):
        graph.webhook_url = url  # Meta reports what it made to this gateway
        graph.fail_next(131000, "Something went wrong", status=500, made=True)
        await post_signed(url, body(message(DANA, text="first")))
        await graph.wait_for(lambda: bool(graph.visible(DANA)))
        await gateway.wait_idle()
        graph.fail_next(131000, "Something went wrong", status=500, made=False)
        await post_signed(url, body(message(DANA, text="second")))
        await graph.wait_for(lambda: len(graph.visible(DANA)) >= 2)
        await gateway.wait_idle()
        known = await gateway.store.outbox.known("whatsapp", since=0, turn_id=None)
        [first, second] = [k for k in known if k.message_id.startswith("wamid.out")]  # sent
    assert graph.visible(DANA) == ["echo: first", "echo: second"]
    tags = [c.body["biz_opaque_callback_data"] for c in graph.sent()]
    assert len(tags) == 3 and tags[1] == tags[2]  # the second answer alone was sent twice
    assert (first.message_id, second.message_id) == ("wamid.out1", "wamid.out2")  # receipts


async def test_a_failed_delivery_report_is_recorded_and_tells_the_owner_once(
    wa_settings: Any, graph: FakeGraph
) -> None:
    report = status("wamid.out77", DANA, "failed", code=131026, title="Message undeliverable")
    async with whatsapp_gateway(wa_settings()) as (gateway, url):
        await gateway.store.deliveries.heard_from("whatsapp", OWNER)
        for _ in range(2):  # Meta repeats reports too
            assert (await post_signed(url, body(statuses=(report,)))).status == 200
        [note] = await graph.wait_sent(1)
        await gateway.wait_idle()
        recorded = await gateway.store.deliveries.status_of("whatsapp", "wamid.out77")
        late = await post_signed(url, body(statuses=(status("wamid.out77", DANA, "delivered"),)))
        after = await gateway.store.deliveries.status_of("whatsapp", "wamid.out77")
    assert note.body["to"] == OWNER and "131026" in note.body["text"]["body"]
    assert recorded is not None and recorded.status == "failed" and recorded.error
    assert late.status == 200 and after is not None and after.status == "failed"
    assert len(graph.sent()) == 1


def test_incomplete_settings_name_the_missing_variable(graph: FakeGraph) -> None:
    with pytest.raises(ConfigError) as raised:
        Settings(whatsapp={"access_token": TOKEN, "phone_number_id": PHONE_NUMBER_ID})
    assert "SWITCHBOARD_WHATSAPP__APP_SECRET" in str(raised.value)


async def test_doctor_checks_the_token_the_number_and_the_webhook_subscription(
    wa_settings: Any, graph: FakeGraph
) -> None:
    settings = wa_settings()
    channel = WhatsAppChannel(settings.whatsapp, settings.channel_context())
    found = await channel.probe()
    assert "+1 555-0100" in found and "subscribed to messages" in found
    graph.subscription = None
    with pytest.raises(Exception, match="no webhook is set up"):
        await channel.probe()
    await asyncio.sleep(0)


async def test_onboard_checks_saves_secrets_apart_and_sends_the_hello_template(
    tmp_path: Path, graph: FakeGraph
) -> None:
    import argparse

    from gateway.cli.onboard.channel import onboard_channel
    from gateway.config.settings import load_settings

    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    settings = load_settings(home=home)
    answers = [
        f"access_token={TOKEN}",
        f"phone_number_id={PHONE_NUMBER_ID}",
        f"app_secret={APP_SECRET}",
        f"allow_from={DANA}",
        f"base_url={graph.base_url}",
    ]
    args = argparse.Namespace(channel="whatsapp", set=answers, test_to=None, non_interactive=True)
    # the command runs its own event loop, as from the command line: on a thread of its own
    assert await asyncio.to_thread(onboard_channel, args, settings) == 0
    [hello] = graph.sent()
    assert hello.body["to"] == DANA and hello.body["template"]["name"] == "hello_world"
    config = (home / "config.toml").read_text()
    dotenv = home / ".env"
    assert PHONE_NUMBER_ID in config and TOKEN not in config and APP_SECRET not in config
    assert TOKEN in dotenv.read_text() and dotenv.stat().st_mode & 0o777 == 0o600
    saved = load_settings(home=home)
    assert saved.whatsapp.enabled and saved.whatsapp.owners == (DANA,)


async def test_whatsapp_webhooks_serve_beside_signed_hooks_and_the_api(
    make_settings: SettingsFactory, graph: FakeGraph
) -> None:
    """One web server with a web token: Meta's webhook path, a signed hook and the API each
    authenticate their own requests (no web token, no Origin); everything else still wants
    the web token, and the web token opens nothing under /hooks/ or /v1/."""
    from channels.hooks.signature import sign

    web_token, api_token, secret = "web-token-0123456789abcd", "api-token-0123456789abcd", "s" * 24
    settings = make_settings(
        whatsapp=section(graph),
        web={"port": 0, "token": web_token},
        hooks={"ci": {"secret": secret, "deliver_to": f"whatsapp:{OWNER}"}},
        api={"enabled": True, "tokens": [{"name": "ops", "token": api_token, "role": "owner"}]},
    )
    async with whatsapp_gateway(settings) as (gateway, url), aiohttp.ClientSession() as http:
        base = url.removesuffix("whatsapp/webhook")
        query = {"hub.mode": "subscribe", "hub.challenge": "42", "hub.verify_token": VERIFY_TOKEN}
        async with http.get(url, params=query) as verified:
            assert (verified.status, await verified.text()) == (200, "42")
        payload = b'{"event": "ping"}'
        headers = {
            "X-Switchboard-Signature": sign(secret, payload, "ping-1", int(time.time())),
            "X-Switchboard-Delivery": "ping-1",
            "Content-Type": "application/json",
        }
        async with http.post(base + "hooks/ci", data=payload, headers=headers) as hook:
            assert hook.status == 202
        models = base + "v1/models"
        async with http.get(models, headers={"Authorization": f"Bearer {api_token}"}) as listed:
            assert listed.status == 200
        async with http.get(models, headers={"Authorization": f"Bearer {web_token}"}) as refused:
            assert refused.status == 401
        async with http.get(base + "api/status") as guarded:
            assert guarded.status == 401
        await gateway.wait_idle()


async def test_a_whatsapp_path_under_a_programs_prefix_stops_the_start(
    make_settings: SettingsFactory, graph: FakeGraph
) -> None:
    settings = make_settings(
        whatsapp=section(graph, webhook_path="/hooks/whatsapp"),
        web={"port": 0},
        hooks={"ci": {"secret": "s" * 24}},
    )
    with pytest.raises(ValueError, match="/hooks/whatsapp"):
        async with whatsapp_gateway(settings):
            pass
