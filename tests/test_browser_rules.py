"""The ``browser`` tool's rules without a browser: what commits something, which sites are
allowed, who gets the tool, and the owner's profiles (``switchboard browser``)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from agent.policy import ToolPolicy
from agent.tools.browser import BrowserTool, browser_sessions
from agent.web.commitment import FormFacts, Target, commitment, in_own_words, site_allowed
from gateway.cli.main import main
from gateway.config.settings import BrowserToolSettings, WebToolSettings, load_settings
from gateway.core.errors import ConfigError
from gateway.core.messages import ChatType
from gateway.core.principal import Principal, Role
from tests.conftest import SettingsFactory

PAGE = "https://shop.example.com/checkout"


def button(name: str, form: FormFacts | None = None, *, tag: str = "button") -> Target:
    return Target(
        page=PAGE,
        tag=tag,
        type="",
        name=name,
        textual=False,
        submitter=form is not None,
        form=form,
    )


def form(method: str = "post", *, sign_in: bool = False) -> FormFacts:
    fields = (("user", "alice"), ("password", "(password)")) if sign_in else (("q", "hose"),)
    return FormFacts(method, "https://shop.example.com/go", sign_in, fields)


def test_sending_a_form_commits_but_a_search_or_a_sign_in_does_not() -> None:
    sent = commitment("click", button("Continue", form("post")), page=PAGE)
    assert sent is not None and sent.reason == "it sends a form to the site"
    assert sent.reach == (
        f'page: {PAGE}\nelement: button "Continue"\n'
        "sends: POST https://shop.example.com/go\n  q: hose"
    )
    assert sent.sites == (PAGE, "https://shop.example.com/go")
    assert commitment("click", button("Search", form("get")), page=PAGE) is None
    assert commitment("click", button("Sign in", form(sign_in=True)), page=PAGE) is None
    signing_up = commitment("click", button("Sign up and pay", form(sign_in=True)), page=PAGE)
    assert signing_up is not None and "(password)" in signing_up.reach
    field = Target(PAGE, "input", "text", "Search", textual=True, submitter=False, form=form())
    assert commitment("press", field, page=PAGE, text="Enter") is not None  # implicit submit
    assert commitment("press", field, page=PAGE, text="Tab") is None
    frame = Target(PAGE, "iframe", "", "", textual=False, submitter=False, form=None)
    inside = commitment("press", frame, page=PAGE, text="Enter")  # the focus is in a frame
    assert inside is not None and "cannot be checked" in inside.reason
    assert commitment("press", frame, page=PAGE, text="ArrowDown") is None


def test_words_of_a_purchase_commit_on_anything_but_a_plain_link() -> None:
    for name in ("Buy now", "Place order", "Pay €12", "Confirm purchase", "Check out"):
        held = commitment("click", button(name), page=PAGE)
        assert held is not None and "reads like a purchase" in held.reason, name
    assert commitment("click", button("Order history", tag="a"), page=PAGE) is None
    assert commitment("click", button("Buy now", tag="a"), page=PAGE) is None  # a GET
    assert commitment("click", button("Next"), page=PAGE) is None
    assert commitment("press", button("Buy now"), page=PAGE, text="Enter") is not None
    assert commitment("click", button("Paypal"), page=PAGE) is None  # whole words only


def test_typed_text_and_downloads() -> None:
    field = Target(PAGE, "input", "", "City", textual=True, submitter=False, form=form())
    said = ["Fill in my city, Lyon, please"]
    assert commitment("type", field, page=PAGE, text="lyon", own_words=said) is None
    held = commitment("type", field, page=PAGE, text="12 Rue des Lilas", own_words=said)
    assert held is not None and "not in the user's own words" in held.reason
    assert held.reach.endswith("in a form sent by POST to https://shop.example.com/go")
    assert in_own_words("", said) and in_own_words("Lyon!", said)
    fetched = commitment("download", None, page=PAGE)
    assert fetched is not None and "sent to the chat" in fetched.reason


def test_allowed_sites_are_hosts_and_their_subdomains() -> None:
    sites = BrowserToolSettings(allowed_sites=["https://Shop.Example.com/", "*.bank.test"])
    assert sites.allowed_sites == ("shop.example.com", "bank.test")
    assert site_allowed("https://shop.example.com/x", sites.allowed_sites)
    assert site_allowed("https://www.shop.example.com/", sites.allowed_sites)
    assert not site_allowed("https://evilshop.example.com/", sites.allowed_sites)
    assert not site_allowed("https://shop.example.com.evil.test/", sites.allowed_sites)


def test_a_site_that_is_no_host_name_stops_the_start_naming_the_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SWITCHBOARD_TOOLS__BROWSER__ALLOWED_SITES", '["shop example"]')
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.field == "tools.browser.allowed_sites"
    assert "'shop example' is not a site" in str(caught.value)


def test_only_the_owner_and_admins_get_it_and_never_in_groups(tmp_path: Path) -> None:
    sessions = browser_sessions(BrowserToolSettings(), WebToolSettings(), tmp_path)
    assert sessions is not None
    tool = BrowserTool(sessions)
    policy = ToolPolicy(ask_approval=True)
    assert policy.static_refusal(tool, Principal("t", "1", role=Role.OWNER)) is None
    assert policy.static_refusal(tool, Principal("t", "2", role=Role.ADMIN)) is None
    member = policy.static_refusal(tool, Principal("t", "3"))
    assert member is not None and member.askable  # the owner could allow one call
    group = Principal("t", "1", role=Role.OWNER, chat_type=ChatType.GROUP)
    refused = policy.static_refusal(tool, group)
    assert refused is not None and not refused.askable
    assert browser_sessions(BrowserToolSettings(enabled=False), WebToolSettings(), tmp_path) is None


def test_the_owner_makes_lists_and_deletes_profiles(
    make_settings: SettingsFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = make_settings()
    assert main(["browser", "list"]) == 0
    assert "no browser profiles" in capsys.readouterr().out
    assert main(["browser", "create"]) == 0
    assert main(["browser", "create", "--person", "telegram:42"]) == 0
    shared = settings.data_dir / "browser" / "main" / "agent.json"
    member = settings.data_dir / "browser" / "main" / "people" / "telegram%3A42.json"
    for path in (shared, member):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((settings.data_dir / "browser").stat().st_mode) == 0o700
    capsys.readouterr()
    assert main(["browser", "create"]) == 1
    assert "exists already" in capsys.readouterr().err
    assert main(["browser", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(p["agent"], p["person"]) for p in listed] == [("main", None), ("main", "telegram:42")]
    assert main(["browser", "delete", "--person", "telegram:42"]) == 0
    assert not member.exists() and shared.exists()
    assert main(["browser", "delete", "--agent", "nobody"]) == 1
    assert "no agent is named 'nobody'" in capsys.readouterr().err
    assert main(["browser", "create", "--person", "42"]) == 1
    assert "telegram:123456" in capsys.readouterr().err
