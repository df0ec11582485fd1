"""Each way a model call goes wrong gets its own precise words, with the real openai and
anthropic SDKs against the fake LLM server or a closed port: the user's notice, the
operator's log and ``switchboard doctor`` all say the same thing."""

from __future__ import annotations

import asyncio
import base64
import socket
from pathlib import Path
from typing import Any

import pytest

from agent.llm.anthropic_provider import AnthropicProvider
from agent.llm.base import LLMProvider
from agent.llm.errors import (
    LLMAuthError,
    LLMError,
    LLMNotConfigured,
    LLMNotFound,
    LLMUnavailable,
)
from agent.llm.lazy import LazyProvider
from agent.llm.openai_provider import OpenAIProvider
from agent.llm.types import ChatMessage, LLMRequest, SystemPrompt
from channels.memory import MemoryChannel
from gateway.cli.doctor.models import probe_model
from gateway.config.llm import LLMSettings
from gateway.config.settings import load_settings
from gateway.core.errors import ConfigError
from gateway.core.system.logs import Redactor
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, error, held
from tests.test_cli import cli_env, switchboard

KINDS = ("openai", "anthropic")


def request() -> LLMRequest:
    return LLMRequest(SystemPrompt("be brief"), (ChatMessage("user", "hi"),), max_tokens=16)


def provider(
    kind: str, base_url: str, *, key: str | None = "sk-test", timeout: float = 10.0
) -> LLMProvider:
    cls = OpenAIProvider if kind == "openai" else AnthropicProvider
    return cls(model="m", api_key=key, base_url=base_url, timeout=timeout, max_retries=0)


async def failure(llm: LLMProvider) -> LLMError:
    try:
        with pytest.raises(LLMError) as caught:
            await llm.complete(request())
    finally:
        await llm.aclose()
    return caught.value


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on: connecting is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_no_key_and_no_base_url_fails_at_once_without_a_request() -> None:
    lazy = LazyProvider(LLMSettings())
    with pytest.raises(LLMNotConfigured) as caught:
        await lazy.complete(request())
    await lazy.aclose()
    assert lazy._provider is None  # no SDK client was even built
    assert caught.value.explain() == (
        "No AI model is configured (no API key and no base URL). Set SWITCHBOARD_LLM__API_KEY "
        "(or OPENAI_API_KEY), or point llm.base_url in config.toml or SWITCHBOARD_LLM__BASE_URL "
        "at a local server such as "
        "Ollama (http://localhost:11434/v1). `switchboard onboard` asks for both; "
        "`switchboard doctor` checks the model settings."
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_connection_refused_is_not_called_a_timeout(kind: str, closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}" + ("/v1" if kind == "openai" else "")
    exc = await failure(provider(kind, url))
    assert isinstance(exc, LLMUnavailable) and exc.transient
    assert exc.explain() == (
        f"Nothing is listening at {url} (connection refused). Is the model server running? "
        "Start it, or correct llm.base_url in config.toml or SWITCHBOARD_LLM__BASE_URL."
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_a_timeout_says_how_long_it_waited(kind: str, fake_llm: FakeLLM) -> None:
    fake_llm.queue(held(asyncio.Event()))  # released when the fake stops
    url = fake_llm.openai_url if kind == "openai" else fake_llm.anthropic_url
    exc = await failure(provider(kind, url, timeout=0.3))
    assert isinstance(exc, LLMUnavailable)
    assert exc.user_message == f"{url} did not answer within 0.3 s."
    assert "SWITCHBOARD_LLM__TIMEOUT_SECONDS" in exc.fix


async def test_a_base_url_without_v1_is_named_not_blamed_on_the_model(fake_llm: FakeLLM) -> None:
    root = f"http://127.0.0.1:{fake_llm.port}"
    exc = await failure(provider("openai", root))
    assert isinstance(exc, LLMNotFound) and not exc.transient
    assert exc.explain() == (
        f"{root} has no /chat/completions (HTTP 404): the base URL is missing /v1. "
        f"Set llm.base_url in config.toml or SWITCHBOARD_LLM__BASE_URL to {root}/v1."
    )
    assert "model" not in exc.user_message
    # another version where /v1 belongs: replaced, not /v1 added after it (".../v2/v1")
    exc = await failure(provider("openai", f"{root}/v2"))
    assert isinstance(exc, LLMNotFound)
    assert exc.explain() == (
        f"{root}/v2 has no /chat/completions (HTTP 404): the base URL ends in /v2, and "
        f"OpenAI-compatible servers answer at /v1. Set llm.base_url in config.toml or "
        f"SWITCHBOARD_LLM__BASE_URL to {root}/v1."
    )


async def test_an_anthropic_base_url_ending_in_v1_is_named(fake_llm: FakeLLM) -> None:
    exc = await failure(provider("anthropic", fake_llm.openai_url))
    assert isinstance(exc, LLMNotFound)
    assert "for Anthropic the base URL must not end in /v1 (the SDK adds it)" in exc.user_message
    assert exc.fix == (
        f"Set llm.base_url in config.toml or SWITCHBOARD_LLM__BASE_URL to {fake_llm.anthropic_url}."
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_an_unknown_model_is_named(kind: str, fake_llm: FakeLLM) -> None:
    fake_llm.queue(error(404, 'model "m" not found, try pulling it first'))
    url = fake_llm.openai_url if kind == "openai" else fake_llm.anthropic_url
    exc = await failure(provider(kind, url))
    assert isinstance(exc, LLMNotFound)
    assert exc.explain() == (
        f"{url} does not know the model 'm' (HTTP 404). Check llm.model in config.toml or "
        "SWITCHBOARD_LLM__MODEL "
        "(for Ollama, `ollama list` shows the models)."
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_a_refused_key_is_not_told_to_try_again(kind: str, fake_llm: FakeLLM) -> None:
    fake_llm.queue(error(401, "invalid api key"))
    url = fake_llm.openai_url if kind == "openai" else fake_llm.anthropic_url
    exc = await failure(provider(kind, url))
    assert isinstance(exc, LLMAuthError) and not exc.transient
    variable = "OPENAI_API_KEY" if kind == "openai" else "ANTHROPIC_API_KEY"
    assert exc.explain() == (
        f"{url} refused the API key (HTTP 401). Check SWITCHBOARD_LLM__API_KEY (or "
        f"{variable}); the key may be wrong, revoked or for another provider."
    )


async def test_a_server_that_wants_a_key_when_none_is_set(fake_llm: FakeLLM) -> None:
    fake_llm.queue(error(401, "missing key"))
    exc = await failure(provider("openai", fake_llm.openai_url, key=None))
    assert exc.user_message == (
        f"{fake_llm.openai_url} wants an API key and none is configured (HTTP 401)."
    )


def test_a_base_url_without_a_scheme_stops_the_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SWITCHBOARD_LLM__BASE_URL", "localhost:18080")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert (
        "llm.base_url: 'localhost:18080' is not an http:// or https:// URL; did you mean "
        "'http://localhost:18080/v1'? (set by environment variable SWITCHBOARD_LLM__BASE_URL)"
    ) in str(caught.value)


# -- a user name and password in the base URL (a proxy's basic auth) -----------------------

PASSWORD = "hunter2-s3cret"


def with_password(url: str) -> str:
    return url.replace("http://", f"http://proxyuser:{PASSWORD}@", 1)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_password_in_the_base_url_goes_as_basic_auth(kind: str, fake_llm: FakeLLM) -> None:
    url = fake_llm.openai_url if kind == "openai" else fake_llm.anthropic_url
    llm = provider(kind, with_password(url), key=None)
    try:
        response = await llm.complete(request())
    finally:
        await llm.aclose()
    assert response.text == "echo: hi"
    [asked] = fake_llm.requests
    headers = {name.lower(): value for name, value in asked.headers.items()}
    token = base64.b64encode(f"proxyuser:{PASSWORD}".encode()).decode()
    assert headers["authorization"] == f"Basic {token}"


async def test_a_password_in_the_base_url_is_never_shown(
    run_gateway: Any,
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A member is told the model failed, without its address; the owner is told which
    server failed, without the password; neither reaches the log or doctor either."""
    settings = make_settings(
        llm={"base_url": with_password(fake_llm.openai_url), "api_key": None},
        telegram={"owners": ["1"], "allow_from": ["1", "3"]},
    )
    channel = MemoryChannel("telegram")
    fake_llm.queue(error(503, "upstream down"), error(503, "upstream down"))
    async with run_gateway(settings, channel=channel):
        await channel.push("Hello again", sender_id="3", chat_id="3")  # a member
        await channel.push("Hello", sender_id="1", chat_id="1")  # the owner
        member, owner = sorted(await channel.wait_for(2), key=lambda m: m.chat_id, reverse=True)
    fake_llm.queue(error(503, "upstream down"))
    doctor = await probe_model("llm", settings.llm)
    assert member.text == (
        "Sorry, I could not answer: the AI model behind me did not answer. This is on my "
        "side, not a problem with your message; please try again in a moment."
    )
    assert owner.text.startswith(
        f"Sorry, I could not answer. {fake_llm.openai_url} failed with an internal error "
        "(HTTP 503)."
    )
    assert doctor.status == "fail" and fake_llm.openai_url in doctor.message
    for shown in (member.text, owner.text, doctor.message, caplog.text):
        assert PASSWORD not in shown and "proxyuser" not in shown


def test_a_password_in_the_base_url_and_an_api_key_are_refused_together() -> None:
    for provider_name in KINDS:
        with pytest.raises(ValueError, match="one Authorization header"):
            LLMSettings(
                provider=provider_name, base_url="http://me:pw@127.0.0.1:8080/v1", api_key="sk-x"
            )


def test_the_log_hides_a_urls_user_name_and_password() -> None:
    line = f"cannot reach http://proxyuser:{PASSWORD}@10.0.0.2:8080/v1 (refused)"
    assert Redactor()(line) == "cannot reach http://[REDACTED]@10.0.0.2:8080/v1 (refused)"


# -- through the real command line ----------------------------------------------------------


@pytest.mark.slow
async def test_chat_without_a_model_says_so_at_once(tmp_path: Path, fake_llm: FakeLLM) -> None:
    env = cli_env(tmp_path / "home", fake_llm)
    for name in ("SWITCHBOARD_LLM__BASE_URL", "SWITCHBOARD_LLM__API_KEY"):
        del env[name]
    env.pop("OPENAI_API_KEY", None)
    code, out, _ = await switchboard("chat", "-m", "hi", env=env)
    assert code == 1
    assert out.startswith("Sorry, I could not answer. No AI model is configured")
    assert out.rstrip().endswith("Your message is saved; send it again once this is fixed.")
    log = (tmp_path / "home" / "data" / "logs" / "switchboard.log").read_text()
    assert "WARNING gateway.runtime.app: No AI model is configured" in log  # at start
    assert "[LLMNotConfigured: " in log  # and for the turn


@pytest.mark.slow
async def test_refused_connection_reaches_user_log_and_doctor_alike(
    tmp_path: Path, fake_llm: FakeLLM, closed_port: int
) -> None:
    url = f"http://127.0.0.1:{closed_port}/v1"
    env = cli_env(tmp_path / "home", fake_llm, SWITCHBOARD_LLM__BASE_URL=url)
    words = f"Nothing is listening at {url} (connection refused)."
    code, out, _ = await switchboard("chat", "-m", "hi", env=env)
    assert code == 1
    assert out.startswith(f"Sorry, I could not answer. {words}")
    assert "please try again in a moment" in out
    log = (tmp_path / "home" / "data" / "logs" / "switchboard.log").read_text()
    assert words in log and "timed out" not in log.lower()
    code, out, _ = await switchboard("doctor", env=env)
    assert code == 1
    assert "[FAIL] llm " in out and words in out


@pytest.mark.slow
async def test_a_base_url_without_v1_reaches_the_user_and_doctor(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    root = f"http://127.0.0.1:{fake_llm.port}"
    env = cli_env(tmp_path / "home", fake_llm, SWITCHBOARD_LLM__BASE_URL=root)
    words = f"{root} has no /chat/completions (HTTP 404): the base URL is missing /v1."
    code, out, _ = await switchboard("chat", "-m", "hi", env=env)
    assert code == 1 and out.startswith(f"Sorry, I could not answer. {words}")
    assert "try again" not in out  # retrying cannot help
    code, out, _ = await switchboard("doctor", env=env)
    assert code == 1 and words in out and f"SWITCHBOARD_LLM__BASE_URL to {root}/v1" in out


@pytest.mark.slow
async def test_a_refused_key_reaches_the_user_and_doctor_without_the_key(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    env = cli_env(tmp_path / "home", fake_llm)
    words = f"{fake_llm.openai_url} refused the API key (HTTP 401)."
    fake_llm.queue(error(401, "invalid api key"))
    code, out, _ = await switchboard("chat", "-m", "hi", env=env)
    assert code == 1 and out.startswith(f"Sorry, I could not answer. {words}")
    fake_llm.queue(error(401, "invalid api key"))
    code, out, err = await switchboard("doctor", env=env)
    assert code == 1 and words in out and "SWITCHBOARD_LLM__API_KEY" in out
    assert env["SWITCHBOARD_LLM__API_KEY"] not in out + err


@pytest.mark.slow
async def test_a_base_url_without_a_scheme_is_refused_by_the_command_line(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    env = cli_env(tmp_path / "home", fake_llm, SWITCHBOARD_LLM__BASE_URL="localhost:18080")
    code, out, err = await switchboard("chat", "-m", "hi", env=env)
    assert code != 0 and out == ""
    assert "llm.base_url: 'localhost:18080' is not an http:// or https:// URL" in err
    assert "did you mean 'http://localhost:18080/v1'?" in err
