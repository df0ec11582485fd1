"""Verified completion (issue 51): an answer that says it did what no call of its turn did
goes back to the model once with the turn's tool ledger, and reaches the person with a note
if it still says so; an answer whose turn did it is delivered as it is. In English and
German through the whole turn; the rules in four languages; the model asked only where the
rules cannot read the answer."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.guards.claims import (
    Act,
    Action,
    Claim,
    backed,
    backs,
    claims,
    listed,
    names,
    readable,
    unbacked,
)
from agent.tools.base import Effect
from agent.tools.cron import Cron
from agent.tools.email import SendEmail
from agent.tools.executor import TARGET_CHARS, target
from agent.tools.files import WriteFile
from agent.turn.review import act
from gateway.core.messages import OutboundKind
from gateway.core.system.logs import Redactor
from gateway.store import LedgerEntry
from tests.fakes.llm import FakeLLM, Recorded, Step, calls, text
from tests.fakes.mailservers import SmtpSink

BOT = "bot@example.test"
DANA = "dana@example.test"
MAIL = {"to": DANA, "subject": "Agenda", "body": "The agenda for Monday."}


@pytest.fixture
async def smtp(tmp_path: Path) -> AsyncIterator[SmtpSink]:
    sink = await SmtpSink().start(tmp_path)
    yield sink
    await sink.stop()


def email(sink: SmtpSink) -> dict[str, Any]:
    return {
        "smtp_host": "127.0.0.1",
        "smtp_port": sink.port,
        "smtp_starttls": False,
        "smtp_timeout_seconds": 5,
        "smtp_retry_base_seconds": 0.01,
        "from_address": BOT,
        "allowed_recipients": [DANA],
    }


def fix_of(request: Recorded) -> str:
    return next(t for t in request.user_texts if t.startswith("[review UNVERIFIED_CLAIM]"))


async def test_an_email_claimed_but_never_sent_goes_back_once_then_out_with_a_note(
    run_gateway: Any, fake_llm: FakeLLM, smtp: SmtpSink
) -> None:
    fake_llm.queue(
        text("Done: I've sent the email to Dana."),
        text("Done, the email to Dana has been sent."),
    )
    async with run_gateway(email=email(smtp)) as (gateway, channel):
        await channel.push("email the agenda to dana@example.test")
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
    assert len(fake_llm.requests) == 2  # the answer, and the one time it went back
    fix = fix_of(fake_llm.requests[1])
    assert "i've sent the email to dana" in fix
    assert "no tool with a side effect ran in this turn" in fix
    answer, note = reply.text.split("\n\n")
    assert answer == "Done, the email to Dana has been sent."
    assert note == (
        "Note: the answer says an email was sent, but no tool with a side effect ran in this turn."
    )
    assert smtp.received == []


async def test_a_send_that_failed_is_not_reported_as_done(
    run_gateway: Any, fake_llm: FakeLLM, smtp: SmtpSink
) -> None:
    smtp.faults.append("554 5.7.1 message rejected as spam")
    fake_llm.queue(
        calls(("send_email", MAIL)),
        text("I have sent the agenda email to Dana."),
        text("I could not send it: Dana's mail server rejected the message as spam."),
    )
    async with run_gateway(email=email(smtp)) as (gateway, channel):
        await channel.push("email the agenda to dana@example.test")
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
    fix = fix_of(fake_llm.requests[2])
    assert "send_email dana@example.test failed" in fix  # the ledger went back with it
    assert reply.text == "I could not send it: Dana's mail server rejected the message as spam."


async def test_the_ledger_names_what_each_call_acted_on_and_never_a_secret(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    key = "sk-test-key-123456"  # the configured model key: a secret the gateway knows
    fake_llm.queue(
        calls(("write_file", {"path": f"notes/{key}/todo.md", "content": "- milk"})),
        text("I've sent the email to Dana."),
        text("Done, the email to Dana has been sent."),
    )
    async with run_gateway() as (gateway, channel):
        await channel.push("put milk on my todo list and email Dana about it")
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
    shows = "this turn's tool ledger shows: write_file notes/[REDACTED]/todo.md succeeded"
    assert shows in fix_of(fake_llm.requests[2])
    assert reply.text.endswith(f"but {shows}.")


def test_a_calls_target_is_what_its_arguments_name_redacted_then_cut() -> None:
    redact = Redactor(["hunter2-secret"])
    to = [DANA, "Bob  <bob@example.test>"]
    assert (
        target(SendEmail.targets, {**MAIL, "to": to}, redact) == f"{DANA}, Bob <bob@example.test>"
    )
    assert target(WriteFile.targets, {"path": "hunter2-secret.md"}, redact) == "[REDACTED].md"
    long = "a/" + "x" * 290 + "hunter2-secret.md"  # the secret where the cut falls
    cut = target(WriteFile.targets, {"path": long}, redact)
    assert len(cut) == TARGET_CHARS and cut.endswith("…") and "hunter2" not in cut
    assert target(Cron.targets, {"action": "add", "schedule": "in 5 minutes"}, redact) == ""


async def test_a_claim_about_another_file_than_the_one_written_is_caught(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        calls(("write_file", {"path": "notes/todo.md", "content": "- milk"})),
        text("Done: I deleted report.pdf and put milk on your list."),
        text("I deleted report.pdf."),
    )
    async with run_gateway() as (gateway, channel):
        await channel.push("delete report.pdf and put milk on my todo list")
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
    fix = fix_of(fake_llm.requests[2])
    assert '("i deleted report.pdf")' in fix
    assert "this turn's tool ledger shows: write_file notes/todo.md succeeded" in fix
    assert reply.text == (
        "I deleted report.pdf.\n\nNote: the answer says report.pdf was deleted, but this "
        "turn's tool ledger shows: write_file notes/todo.md succeeded."
    )


async def test_a_claim_about_the_file_written_passes_by_its_name_in_any_case_or_quotes(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        calls(("write_file", {"path": "notes/Todo.md", "content": "- milk"})),
        text("I've saved your list to `todo.md`."),
    )
    async with run_gateway() as (gateway, channel):
        await channel.push("put milk on my todo list")
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
    assert reply.text == "I've saved your list to `todo.md`."
    assert len(fake_llm.requests) == 2  # no re-prompt


async def test_an_email_claimed_to_another_recipient_than_the_one_sent_to_is_caught(
    run_gateway: Any, fake_llm: FakeLLM, smtp: SmtpSink
) -> None:
    fake_llm.queue(
        calls(("send_email", MAIL)),
        text("I've emailed the agenda to bob@example.test."),
        text("Done, the agenda email has been sent to bob@example.test."),
    )
    async with run_gateway(email=email(smtp)) as (gateway, channel):
        await channel.push("email the agenda to bob@example.test")
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
    fix = fix_of(fake_llm.requests[2])
    assert '("i\'ve emailed the agenda to bob@example.test.")' in fix
    assert "this turn's tool ledger shows: send_email dana@example.test succeeded" in fix
    answer, note = reply.text.split("\n\n")
    assert answer == "Done, the agenda email has been sent to bob@example.test."
    assert note == (
        "Note: the answer says an email was sent to bob@example.test, but this turn's tool "
        "ledger shows: send_email dana@example.test succeeded."
    )
    assert [to for _, to in smtp.envelopes] == [[DANA]]  # one email, to Dana


async def test_a_german_claim_without_a_call_reaches_the_person_with_a_note(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        text("Erledigt: Ich habe die Erinnerung für morgen um 9 Uhr eingerichtet."),
        text("Die Erinnerung wurde eingerichtet."),
    )
    async with run_gateway() as (gateway, channel):
        await channel.push("Erinnere mich morgen um 9 Uhr an den Zahnarzt")
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
    assert "[review UNVERIFIED_CLAIM]" in fake_llm.requests[1].last_user_text
    answer, note = reply.text.split("\n\n")
    assert answer == "Die Erinnerung wurde eingerichtet."
    assert note.startswith("Note: the answer says a reminder was scheduled, but")


async def test_a_turn_that_did_send_says_so_unchanged(
    run_gateway: Any, fake_llm: FakeLLM, smtp: SmtpSink
) -> None:
    fake_llm.queue(calls(("send_email", MAIL)), text("I've sent the agenda email to Dana."))
    async with run_gateway(email=email(smtp)) as (gateway, channel):
        await channel.push("email the agenda to dana@example.test")
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
    assert reply.text == "I've sent the agenda email to Dana."
    assert reply.kind is OutboundKind.REPLY
    assert len(fake_llm.requests) == 2  # no review call, no re-prompt
    assert len(smtp.received) == 1


async def test_the_model_finds_claims_only_where_the_rules_cannot_read(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    italian = "Fatto: ho inviato l'email a Marco con il programma della riunione di lunedì."

    def respond(request: Recorded) -> Step:
        asked = request.last_user_text
        if asked.startswith("Read this reply"):
            said = "Fatto: ho inviato" in asked
            return text("CLAIM: sent | email | ho inviato l'email a Marco" if said else "NONE")
        if any("[review UNVERIFIED_CLAIM]" in t for t in request.user_texts):
            return text("Non ho inviato nessuna email: non posso farlo da qui.")
        if "capital" in asked:
            return text("The capital of France is Paris, as it has been for centuries.")
        return text(italian)

    fake_llm.responder = respond
    async with run_gateway() as (gateway, channel):
        await channel.push("manda l'email a Marco")
        [reply] = await channel.wait_for(1)
        await channel.push("What is the capital of France?")
        await channel.wait_for(2)
        await gateway.wait_idle()
    asked = [r for r in fake_llm.requests if r.last_user_text.startswith("Read this reply")]
    assert len(asked) == 2  # the first answer and the corrected one; none for English
    assert italian in asked[0].last_user_text
    assert reply.text == "Non ho inviato nessuna email: non posso farlo da qui."


async def test_with_rules_only_the_model_is_never_asked(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(text("Fatto: ho inviato l'email a Marco."))
    async with run_gateway(agent={"verify_claims": "rules"}) as (gateway, channel):
        await channel.push("manda l'email a Marco")
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
    assert len(fake_llm.requests) == 1
    assert reply.text == "Fatto: ho inviato l'email a Marco."


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Done: I've sent the email to Bob.", [(Action.SENT, "email")]),
        ("I have sent you an email with the details.", [(Action.SENT, "email")]),
        ("Email sent to bob@example.com.", [(Action.SENT, "email")]),
        ("Sent!", [(Action.SENT, "")]),
        ("Your reminder has been scheduled for 9:00.", [(Action.SCHEDULED, "reminder")]),
        ("I saved the note and emailed Bob.", [(Action.SAVED, "note"), (Action.SENT, "email")]),
        ("I booked a table for two at 7 pm.", [(Action.BOOKED, "booking")]),
        ("I've paid the invoice.", [(Action.PAID, "payment")]),
        ("I deleted the reminder for Friday.", [(Action.DELETED, "reminder")]),
        ("Ich habe die E-Mail an Bob gesendet.", [(Action.SENT, "email")]),
        ("Die Rechnung wurde bezahlt.", [(Action.PAID, "payment")]),
        ("Ich habe sie gespeichert.", [(Action.SAVED, "")]),
        ("He enviado el correo a Bob.", [(Action.SENT, "email")]),
        ("El recordatorio ha sido programado.", [(Action.SCHEDULED, "reminder")]),
        ("Reservé una mesa para dos.", [(Action.BOOKED, "booking")]),
        ("J'ai envoyé l'e-mail à Bob.", [(Action.SENT, "email")]),
        ("Le fichier a été supprimé.", [(Action.DELETED, "file")]),
        # a state that says it was done, and "set" of a reminder (docs/tools.md's example)
        ("OK, the reminder is set.", [(Action.SCHEDULED, "reminder")]),
        ("Reminder set for 9am.", [(Action.SCHEDULED, "reminder")]),
        ("I've set a reminder for 9am.", [(Action.SCHEDULED, "reminder")]),
        ("The email is sent.", [(Action.SENT, "email")]),
        ("Your file is saved.", [(Action.SAVED, "file")]),
        # no claims: asked, refused, planned, someone else's, another time, the answer itself
        ("Shall I send the email?", []),
        ("I couldn't send the email: the server refused it.", []),
        ("I'll send it once you confirm.", []),
        ("Thanks, I see you've sent the file.", []),
        ("The email you sent me yesterday says hello.", []),
        ("I've sent you the list below.", []),
        ("I've written a haiku for you:", []),
        ("I added 2 and 3 to get 5.", []),
        ("Deleted files are kept for 30 days.", []),
        ("Noted.", []),
        ("Here is a draft:\n\nSubject: Report\n\nHi Bob, I have sent the report.", []),
        ("Ich konnte die E-Mail leider nicht senden.", []),
        ("Sie haben mir die Datei geschickt.", []),
        ("Soll ich die E-Mail senden?", []),
        ("No he podido enviar el correo.", []),
        ("Vous m'avez envoyé le fichier.", []),
        ("The capital of France is Paris.", []),
        ("All set!", []),
        ("The table is set.", []),
        ("I set the volume to 5.", []),
        ("The newsletter is sent every Monday.", []),
        ("Billing: the venue invoice is paid.", []),  # a state of the world, reported
        ("Is the email sent?", []),
    ],
)
def test_the_rules_find_claims_of_done_actions(
    answer: str, expected: list[tuple[Action, str]]
) -> None:
    assert [(c.action, c.thing) for c in claims(answer)] == expected


def test_what_backs_a_claim() -> None:
    email = Claim(Action.SENT, "email", "i've sent the email")
    message = Claim(Action.SENT, "", "sent")
    sent = Act("send_email", Effect.SEND, succeeded=True)
    failed = Act("send_email", Effect.SEND, succeeded=False, detail="554 rejected")
    chat = Act("message", Effect.SEND, succeeded=True)
    mcp = Act("gmail_send", Effect.REMOTE, succeeded=True)
    assert backs(sent, email) and backs(chat, message) and backs(mcp, email)
    assert not backs(failed, email) and not backs(chat, email)
    assert unbacked([email, message], [chat]) == [email]


@pytest.mark.parametrize(
    ("answer", "files", "addresses"),
    [
        ("I deleted report.pdf.", {"report.pdf"}, set()),
        ("Deleted notes.md.", {"notes.md"}, set()),
        ("I saved it to `Notes/Todo.MD`.", {"todo.md"}, set()),
        ("I've saved the list to 'todo.md'.", {"todo.md"}, set()),
        ("Email sent to Dana <Dana@Example.test>.", set(), {"dana@example.test"}),
        ("I sent report.pdf to dana@example.test.", {"report.pdf"}, {"dana@example.test"}),
        ("I saved it.", set(), set()),  # names nothing: checked as before
        ("I saved the notes for example.com at 9.30, e.g. in v1.2.", set(), set()),
    ],
)
def test_a_claim_names_files_by_their_names_and_addresses(
    answer: str, files: set[str], addresses: set[str]
) -> None:
    [claim] = claims(answer)
    assert (claim.names.files, claim.names.addresses) == (files, addresses)


def test_a_claim_naming_files_or_addresses_needs_a_call_on_one_of_them() -> None:
    wrote = Act("write_file", Effect.WRITE, succeeded=True, target="notes/todo.md")
    remembered = Act("memory_append", Effect.WRITE, succeeded=True)  # its arguments name none
    mailed = Act("send_email", Effect.SEND, succeeded=True, target=f"Dana <{DANA}>")
    ran = Act("exec", Effect.EXEC, succeeded=True)
    [deleted_report] = claims("I deleted report.pdf.")
    [saved_todo] = claims("I saved it to TODO.md.")
    [saved] = claims("I saved it.")
    [to_bob] = claims("I emailed it to bob@example.test.")
    [to_dana] = claims(f"I sent report.pdf to {DANA}.")
    [summary] = claims("I saved a summary of report.pdf to notes/todo.md.")
    assert not backed(deleted_report, [wrote, remembered])
    assert backed(saved_todo, [wrote]) and backed(saved, [wrote]) and backed(summary, [wrote])
    assert backed(deleted_report, [remembered])  # no call names a file: as before
    assert backed(deleted_report, [wrote, ran])  # what a command did, only it knows
    assert not backed(to_bob, [mailed]) and backed(to_dana, [mailed])
    assert unbacked([deleted_report, saved_todo, to_bob], [wrote, mailed]) == [
        deleted_report,
        to_bob,
    ]
    assert not names("see example.com/a at 9.30, e.g. v1.2, or https://example.com/a.pdf")


def test_the_rules_know_what_they_cannot_read_and_the_models_list_is_parsed() -> None:
    assert readable("Paris is the capital of France and Berlin the capital of Germany.")
    assert readable("Sent!")
    assert not readable("Ho inviato l'email a Marco e ho salvato il file nella cartella.")
    assert not readable("メールを送信しました。会議の資料も添付しました。")
    found = listed("CLAIM: sent | email | ho inviato l'email\nCLAIM: flew | other | x\nNONE")
    assert found == [Claim(Action.SENT, "email", "ho inviato l'email")]


def test_a_failed_calls_error_in_the_note_is_cut_between_words() -> None:
    error = "refused: " + "bob@example.test is not the user's own address " * 6
    entry = LedgerEntry("k", "send_email", "done", json.dumps([error, True]))
    detail = act(entry, Effect.SEND).detail
    assert len(detail) <= 160 and detail.endswith(" …")
    assert detail[:-2].endswith(("address", "own", "the", "is", "not", "user's", "test"))
