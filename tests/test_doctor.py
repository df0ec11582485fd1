"""switchboard doctor and status: what is wrong and what to do, against real endpoints.

The channel checks log in with the real client libraries (python-telegram-bot, slack_sdk,
discord.py, aiosmtplib, aioimaplib) against the fakes in tests/fakes and real Dovecot.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
from collections.abc import AsyncIterator, Callable
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from channels.discord.probe import MAX_WAIT  # before tests.fakes.discord: see its __init__
from gateway.cli.doctor.checks import Check
from gateway.cli.doctor.command import channel_checks, probe_channel, run_doctor
from gateway.cli.doctor.tools import scan_check
from gateway.config.settings import Settings
from tests.conftest import SettingsFactory
from tests.fakes.discord import BOT_ID, FakeDiscord
from tests.fakes.llm import FakeLLM, error
from tests.fakes.mailservers import (  # noqa: F401 - fixture
    Dovecot,
    SmtpSink,
    dovecot,
    free_port,
)
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, BOT_USER, FakeSlack
from tests.fakes.telegram import FakeTelegram, random_token, section
from tests.system import needs_tesseract
from tests.test_cli import cli_env, switchboard

AS_ROOT = int(os.geteuid() == 0)  # then doctor adds a warning (a test machine often is root)


async def test_doctor_passes_against_a_working_model(
    make_settings: SettingsFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_doctor(make_settings()) == 0
    out = capsys.readouterr().out
    assert "[ok  ] llm " in out and "answered" in out
    assert "[ok  ] workspace" in out and "(7/7 bootstrap files)" in out  # what onboard creates
    # No channel is configured: a warning, and the summary says so instead of "all passed".
    assert "[WARN] channels" in out
    assert out.rstrip().endswith(
        f"No problems, {AS_ROOT + 1} warning{'s' * AS_ROOT} (see [WARN] above)."
    )


async def test_doctor_says_when_the_model_sees_no_pictures_but_vision_is_on(
    make_settings: SettingsFactory, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_llm.server_kind = "llama.cpp"
    fake_llm.sees_images = False
    await run_doctor(make_settings())
    on = capsys.readouterr().out
    await run_doctor(make_settings(llm={"vision": False}))
    off = capsys.readouterr().out
    assert (
        "[WARN] pictures      fake-model sees no pictures (llama.cpp's /props (modalities)) "
        "but llm.vision is on" in on
    )
    assert "`switchboard config set llm.vision false` has OCR read them instead" in on
    assert "[ok  ] pictures      fake-model sees no pictures (llm.vision = false)" in off


async def test_doctor_explains_a_refused_key(
    make_settings: SettingsFactory, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_llm.queue(error(401, "invalid api key"))
    assert await run_doctor(make_settings()) == 1
    out = capsys.readouterr().out
    url = make_settings().llm.base_url
    assert (
        f"[FAIL] llm           {url} refused the API key (HTTP 401). Check "
        "SWITCHBOARD_LLM__API_KEY (or OPENAI_API_KEY); the key may be wrong, revoked or for "
        "another provider." in out
    )


async def test_doctor_explains_an_unreachable_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(
        home=tmp_path / "home",
        llm={"base_url": "http://127.0.0.1:9/v1", "api_key": "x", "max_retries": 0},
    )
    assert await run_doctor(settings) == 1
    out = capsys.readouterr().out
    assert (
        "Nothing is listening at http://127.0.0.1:9/v1 (connection refused). Is the model "
        "server running? Start it, or correct llm.base_url in config.toml or "
        "SWITCHBOARD_LLM__BASE_URL." in out
    )
    assert "switchboard onboard" in out  # the home does not exist yet


# -- channel logins: each probe with the real client library against the local fakes ---------


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A port that accepts connections and never says a word (a hung server, a black hole)."""
    done = asyncio.Event()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await done.wait()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    done.set()
    server.close()
    await server.wait_closed()


def wrong(prefix: str = "") -> str:
    """A credential nobody accepts, unique enough that finding it in output means a leak."""
    return f"{prefix}wrong-{secrets.token_hex(8)}"


async def timed(settings: Settings, name: str, seconds: float = 5.0) -> tuple[Check, float]:
    started = time.monotonic()
    check = await probe_channel(settings, name, seconds)
    return check, time.monotonic() - started


def assert_unreachable(check: Check, elapsed: float) -> None:
    """Refused at once and said so: not a timeout, not a credentials problem."""
    assert check.status == "fail", check
    assert "cannot reach" in check.message, check
    assert "no answer within" not in check.message, check
    assert elapsed < 3, elapsed


# Telegram


async def test_telegram_check_names_the_bot_and_starts_nothing(
    make_settings: SettingsFactory, tg: FakeTelegram
) -> None:
    [check] = await channel_checks(make_settings(telegram=section(tg)), seconds=5)
    assert check == Check("channel telegram", "ok", "@switchboard_bot")
    assert [c.method for c in tg.calls] == ["getMe"]  # no polling, webhook or command changes


async def test_telegram_check_explains_a_refused_token_without_showing_it(
    make_settings: SettingsFactory, tg: FakeTelegram
) -> None:
    token = f"{tg.bot_id}:{wrong()}"
    check, _ = await timed(make_settings(telegram=section(tg, token=token)), "telegram")
    assert check.status == "fail"
    assert "refused the token" in check.message
    assert "SWITCHBOARD_TELEGRAM__TOKEN" in check.message
    assert token not in check.message and token.split(":")[1] not in check.message


async def test_telegram_check_does_not_repeat_a_token_the_server_quotes(
    make_settings: SettingsFactory, tg: FakeTelegram
) -> None:
    tg.fail("getMe", 401, f"Unauthorized: unknown bot {tg.token}")
    check, _ = await timed(make_settings(telegram=section(tg)), "telegram")
    assert check.status == "fail" and "SWITCHBOARD_TELEGRAM__TOKEN" in check.message
    assert "unknown bot" in check.message and tg.token not in check.message


async def test_telegram_check_catches_white_space_around_the_token(
    make_settings: SettingsFactory, tg: FakeTelegram
) -> None:
    """The channel uses the token as written: a stray newline would break it at start."""
    settings = make_settings(telegram=section(tg, token=tg.token + "\n"))
    check, _ = await timed(settings, "telegram")
    assert check.status == "fail"
    assert "SWITCHBOARD_TELEGRAM__TOKEN" in check.message and "white space" in check.message
    assert tg.token not in check.message
    assert tg.calls == []


async def test_telegram_check_reports_an_unreachable_server(
    make_settings: SettingsFactory, tg: FakeTelegram
) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    check, elapsed = await timed(make_settings(telegram=section(tg, base_url=closed)), "telegram")
    assert_unreachable(check, elapsed)
    assert closed in check.message and tg.token not in check.message


async def test_telegram_rate_limit_is_a_warning_not_a_failure(
    make_settings: SettingsFactory, tg: FakeTelegram
) -> None:
    tg.fail("getMe", 429, "Too Many Requests: retry after 30", retry_after=30)
    check, _ = await timed(make_settings(telegram=section(tg)), "telegram")
    assert check.status == "warn"
    assert "retry after 30" in check.message and "try again later" in check.message


# Slack


def slack(fake: FakeSlack, **overrides: Any) -> dict[str, Any]:
    return {
        "bot_token": BOT_TOKEN,
        "app_token": APP_TOKEN,
        "base_url": fake.api_url,
        **overrides,
    }


async def test_slack_check_names_the_bot_and_opens_no_socket(
    make_settings: SettingsFactory, fake_slack: FakeSlack
) -> None:
    check, _ = await timed(make_settings(slack=slack(fake_slack)), "slack")
    assert check.status == "ok", check
    assert f"bot {BOT_USER} (switchboard)" in check.message
    assert "Socket Mode app token ok" in check.message
    assert fake_slack.count("auth.test") == 1 and fake_slack.count("apps.connections.open") == 1
    assert fake_slack.connections == 0  # the websocket URL it was handed is never used


async def test_slack_http_mode_checks_only_the_bot_token(
    make_settings: SettingsFactory, fake_slack: FakeSlack
) -> None:
    section = slack(fake_slack, app_token=None, signing_secret="s3cret-signing")
    check, _ = await timed(make_settings(slack=section), "slack")
    assert check.status == "ok" and "Socket Mode" not in check.message
    assert [name for name, _ in fake_slack.calls] == ["auth.test"]


async def test_slack_check_explains_a_refused_bot_token_without_showing_it(
    make_settings: SettingsFactory, fake_slack: FakeSlack
) -> None:
    token = wrong("xoxb-")
    check, _ = await timed(make_settings(slack=slack(fake_slack, bot_token=token)), "slack")
    assert check.status == "fail"
    assert "refused the bot token (invalid_auth)" in check.message
    assert "SWITCHBOARD_SLACK__BOT_TOKEN" in check.message and token not in check.message
    assert fake_slack.count("apps.connections.open") == 0


async def test_slack_check_explains_a_refused_app_token(
    make_settings: SettingsFactory, fake_slack: FakeSlack
) -> None:
    token = wrong("xapp-")
    check, _ = await timed(make_settings(slack=slack(fake_slack, app_token=token)), "slack")
    assert check.status == "fail"
    assert "refused the app token" in check.message
    assert "SWITCHBOARD_SLACK__APP_TOKEN" in check.message and token not in check.message


async def test_slack_check_reports_an_unreachable_server(make_settings: SettingsFactory) -> None:
    closed = f"http://127.0.0.1:{free_port()}/api/"
    settings = make_settings(
        slack={"bot_token": BOT_TOKEN, "app_token": APP_TOKEN, "base_url": closed}
    )
    check, elapsed = await timed(settings, "slack")
    assert_unreachable(check, elapsed)
    assert closed in check.message and BOT_TOKEN not in check.message


# Discord


async def test_discord_check_names_the_bot_and_opens_no_gateway(
    make_settings: SettingsFactory, fake_discord: FakeDiscord
) -> None:
    check, _ = await timed(make_settings(discord={"token": "test-token"}), "discord")
    assert check == Check("channel discord", "ok", f"@switchboard (bot {BOT_ID})")
    assert fake_discord.connections == 0


async def test_discord_check_explains_a_refused_token_without_showing_it(
    make_settings: SettingsFactory, fake_discord: FakeDiscord
) -> None:
    token = wrong("MTA.")
    check, _ = await timed(make_settings(discord={"token": token}), "discord")
    assert check.status == "fail"
    assert "refused the bot token" in check.message
    assert "SWITCHBOARD_DISCORD__TOKEN" in check.message and token not in check.message


async def test_discord_check_reports_an_unreachable_server(
    make_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import discord

    closed = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setattr(discord.http.Route, "BASE", f"{closed}/api/v10")
    check, elapsed = await timed(make_settings(discord={"token": "test-token"}), "discord")
    assert_unreachable(check, elapsed)
    assert closed in check.message


async def test_discord_rate_limit_is_a_warning_without_waiting_it_out(
    make_settings: SettingsFactory, fake_discord: FakeDiscord
) -> None:
    fake_discord.fail_me.append(4 * MAX_WAIT)  # discord.py alone would sleep that and ask again
    check, elapsed = await timed(make_settings(discord={"token": "test-token"}), "discord")
    assert check.status == "warn", check
    assert (
        f"retry after {4 * MAX_WAIT:.1f}s" in check.message and "try again later" in check.message
    )
    assert elapsed < 3


# Email (aiosmtpd for SMTP, Dovecot for IMAP)

DANA = "dana@example.test"
SMTP_PASSWORD = "smtp-pass-5813"


@pytest.fixture
async def smtp_sink(tmp_path: Path) -> AsyncIterator[SmtpSink]:
    sink = await SmtpSink(users={"bot": SMTP_PASSWORD}, tls="starttls").start(tmp_path)
    yield sink
    await sink.stop()


@pytest.fixture
def bot(dovecot: Dovecot) -> str:  # noqa: F811 - the imported fixture
    return dovecot.add_user("bot")


def mail(dovecot: Dovecot, bot: str, sink: SmtpSink, **overrides: Any) -> dict[str, Any]:  # noqa: F811
    """IMAPS and SMTP with STARTTLS and a login, both trusted through their test CAs."""
    return {
        "imap_host": "127.0.0.1",
        "imap_port": dovecot.imaps_port,
        "imap_tls": True,
        "imap_ca_file": dovecot.ca_file,
        "imap_username": bot,
        "imap_password": dovecot.password,
        "imap_timeout_seconds": 5,
        "smtp_host": "127.0.0.1",
        "smtp_port": sink.port,
        "smtp_starttls": True,
        "smtp_ca_file": sink.ca_file,
        "smtp_username": "bot",
        "smtp_password": SMTP_PASSWORD,
        "smtp_timeout_seconds": 5,
        "from_address": bot,
        "allow_from": [DANA],
        **overrides,
    }


def letter(bot: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = DANA, bot, "Lunch?"
    msg.set_content("Are you free on Friday?")
    return msg


async def test_email_check_logs_in_to_both_servers_and_reads_nothing(
    make_settings: SettingsFactory,
    dovecot: Dovecot,  # noqa: F811
    bot: str,
    smtp_sink: SmtpSink,
) -> None:
    await dovecot.deliver(letter(bot), bot)
    check, _ = await timed(make_settings(email=mail(dovecot, bot, smtp_sink)), "email")
    assert check.status == "ok", check
    assert "smtp login ok as bot" in check.message
    assert f"imap login ok as {bot}, INBOX has 1 unread" in check.message
    async with dovecot.mailbox(bot) as box:
        [(_, flags)] = await box.messages()
    assert "\\Seen" not in flags  # still unread for the channel
    assert smtp_sink.received == [] and smtp_sink.attempts == 0


async def test_email_check_explains_a_refused_imap_password_without_showing_it(
    make_settings: SettingsFactory,
    dovecot: Dovecot,  # noqa: F811
    bot: str,
    smtp_sink: SmtpSink,
) -> None:
    password = wrong()
    settings = make_settings(email=mail(dovecot, bot, smtp_sink, imap_password=password))
    check, _ = await timed(settings, "email")
    assert check.status == "fail"
    assert f"refused the login for {bot!r}" in check.message
    assert "SWITCHBOARD_EMAIL__IMAP_PASSWORD" in check.message
    assert "SMTP_PASSWORD" not in check.message  # the SMTP login was fine
    assert password not in check.message


async def test_email_check_explains_a_refused_smtp_password_without_showing_it(
    make_settings: SettingsFactory,
    dovecot: Dovecot,  # noqa: F811
    bot: str,
    smtp_sink: SmtpSink,
) -> None:
    password = wrong()
    settings = make_settings(email=mail(dovecot, bot, smtp_sink, smtp_password=password))
    check, _ = await timed(settings, "email")
    assert check.status == "fail"
    assert "refused the login for 'bot'" in check.message
    assert "SWITCHBOARD_EMAIL__SMTP_PASSWORD" in check.message
    assert "IMAP_PASSWORD" not in check.message
    assert password not in check.message


async def test_email_check_reports_unreachable_servers(
    make_settings: SettingsFactory,
    dovecot: Dovecot,  # noqa: F811
    bot: str,
    smtp_sink: SmtpSink,
) -> None:
    imap_port, smtp_port = free_port(), free_port()
    settings = make_settings(
        email=mail(dovecot, bot, smtp_sink, imap_port=imap_port, smtp_port=smtp_port)
    )
    check, elapsed = await timed(settings, "email")
    assert_unreachable(check, elapsed)
    assert f"smtp: cannot reach 127.0.0.1:{smtp_port}" in check.message
    assert f"imap: cannot reach 127.0.0.1:{imap_port}" in check.message


async def test_an_inbox_without_smtp_is_reported_before_any_login(
    make_settings: SettingsFactory,
) -> None:
    settings = make_settings(
        email={
            "imap_host": "127.0.0.1",
            "imap_port": free_port(),
            "imap_username": "bot@example.test",
        }
    )
    check, _ = await timed(settings, "email")
    assert check.status == "fail"
    assert "set email.smtp_host and email.from_address" in check.message


# Any channel: a server that never answers costs the check's time limit, no more


def telegram_at(port: int, make_settings: SettingsFactory) -> Settings:
    return make_settings(telegram={"token": random_token(), "base_url": f"http://127.0.0.1:{port}"})


def slack_at(port: int, make_settings: SettingsFactory) -> Settings:
    return make_settings(
        slack={
            "bot_token": BOT_TOKEN,
            "app_token": APP_TOKEN,
            "base_url": f"http://127.0.0.1:{port}/api/",
        }
    )


def email_at(port: int, make_settings: SettingsFactory) -> Settings:
    return make_settings(
        email={
            "imap_host": "127.0.0.1",
            "imap_port": port,
            "imap_tls": False,
            "imap_username": "bot@example.test",
            "imap_password": "imap-pass-2718",
            "smtp_host": "127.0.0.1",
            "smtp_port": port,
            "smtp_starttls": False,
            "from_address": "bot@example.test",
        }
    )


@pytest.mark.parametrize(
    ("name", "build"),
    [("telegram", telegram_at), ("slack", slack_at), ("email", email_at), ("discord", None)],
)
async def test_a_silent_server_fails_the_check_within_its_time_limit(
    make_settings: SettingsFactory,
    silent_port: int,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    build: Callable[[int, SettingsFactory], Settings] | None,
) -> None:
    if build is None:  # discord.py has no base URL setting: the class attribute tests patch
        import discord

        monkeypatch.setattr(discord.http.Route, "BASE", f"http://127.0.0.1:{silent_port}/api/v10")
        settings = make_settings(discord={"token": "test-token"})
    else:
        settings = build(silent_port, make_settings)
    check, elapsed = await timed(settings, name, seconds=0.5)
    assert check == Check(f"channel {name}", "fail", f"cannot reach {name}: no answer within 0.5 s")
    assert elapsed < 3


# The whole command


async def test_doctor_fails_when_a_channel_refuses_and_still_reports_the_others(
    make_settings: SettingsFactory,
    tg: FakeTelegram,
    fake_slack: FakeSlack,
    capsys: pytest.CaptureFixture[str],
) -> None:
    token = f"{tg.bot_id}:{wrong()}"
    settings = make_settings(telegram=section(tg, token=token), slack=slack(fake_slack))
    assert await run_doctor(settings) == 1
    out = capsys.readouterr().out
    assert "[FAIL] channel telegram" in out and "SWITCHBOARD_TELEGRAM__TOKEN" in out
    assert f"[ok  ] channel slack     bot {BOT_USER}" in out
    assert "[ok  ] llm " in out
    assert out.rstrip().endswith("1 problem found, 1 warning." if AS_ROOT else "1 problem found.")
    assert token not in out


async def test_doctor_passes_with_a_working_channel(
    make_settings: SettingsFactory, tg: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_doctor(make_settings(telegram=section(tg))) == 0
    out = capsys.readouterr().out
    assert "[ok  ] channel telegram  @switchboard_bot" in out
    root = "No problems, 1 warning (see [WARN] above)."  # doctor warns about running as root
    assert out.rstrip().endswith(root if AS_ROOT else "All checks passed.")


@pytest.mark.slow
@pytest.mark.timeout(150)  # four command-line processes, each checking the browser and models
async def test_switchboard_doctor_exit_code_follows_the_channel_login(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    home = tmp_path / "home"
    telegram = {
        "SWITCHBOARD_TELEGRAM__BASE_URL": tg.base_url,
        "SWITCHBOARD_TELEGRAM__ALLOW_FROM": "42",
    }
    env = cli_env(home, fake_llm, SWITCHBOARD_TELEGRAM__TOKEN=tg.token, **telegram)
    assert (await switchboard("onboard", env=env))[0] == 0
    code, out, err = await switchboard("doctor", env=env)
    assert code == 0, out + err
    assert "channel telegram  @switchboard_bot" in out

    token = f"{tg.bot_id}:{wrong()}"
    env = cli_env(home, fake_llm, SWITCHBOARD_TELEGRAM__TOKEN=token, **telegram)
    code, out, err = await switchboard("doctor", env=env)
    assert code == 1, out + err
    assert "[FAIL] channel telegram" in out and "SWITCHBOARD_TELEGRAM__TOKEN" in out
    assert token not in out + err
    code, out, err = await switchboard("doctor", "--json", env=env)
    report = json.loads(out)
    assert code == 1 and report["ok"] is False and report["problems"] >= 1
    [telegram] = [check for check in report["checks"] if check["name"] == "channel telegram"]
    assert telegram["status"] == "fail" and "SWITCHBOARD_TELEGRAM__TOKEN" in telegram["message"]
    assert {check["status"] for check in report["checks"]} <= {"ok", "warn", "fail"}
    assert token not in out + err


def test_doctor_says_how_scans_are_read_and_which_ocr_language_is_missing(
    make_settings: SettingsFactory,
) -> None:
    needs_tesseract()
    seen = make_settings(llm={"vision": True})
    blind = make_settings(llm={"vision": False})
    german = make_settings(llm={"vision": False}, tools={"documents": {"ocr_languages": "eng+zzz"}})
    off = make_settings(llm={"vision": False}, tools={"documents": {"ocr": "off"}})
    assert scan_check(seen).message == "scanned PDFs are shown to the model as pictures of pages"
    assert scan_check(blind) == Check(
        "scans", "ok", "scanned PDFs are read by OCR (Tesseract, eng)"
    )
    assert scan_check(german) == Check(
        "scans", "warn", "OCR lacks zzz: apt install tesseract-ocr-zzz"
    )
    assert scan_check(off).message == 'scanned PDFs are not read (tools.documents.ocr = "off")'
