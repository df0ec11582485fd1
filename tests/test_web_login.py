"""Who gets into the web server: the token, login sessions, and throttled guessing.

Driven over HTTP against the real gateway (web chat channel, fake LLM) with an aiohttp client.
"""

from __future__ import annotations

import secrets
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from pydantic import SecretStr

from gateway.config.channels import WebSettings
from gateway.runtime.app import Gateway
from gateway.web.access.security import KEY_HEADER, WebGuard
from gateway.web.access.sessions import WebSessions
from gateway.web.access.signin import SignInCodes
from gateway.web.access.throttle import LOGIN_MAX_FAILURES, LOGIN_WINDOW_SECONDS
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, text
from tests.test_web_server import (
    TOKEN,
    client,
    message_form,
    owner,
    page_key,
    serving,
    sign_in,
)

OTHER_TOKEN = "another-token-0123456789abcdef"


def bearer(token: str = TOKEN, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **headers}


async def status(url: str, **headers: str) -> int:
    async with aiohttp.ClientSession() as http, http.get(url + "api/status", headers=headers) as r:
        return r.status


async def log_in(http: aiohttp.ClientSession, url: str, token: str = TOKEN) -> Any:
    """The login form posted; its status, the session cookie it set and the page key."""
    origin = {"Origin": url.rstrip("/")}
    async with http.post(
        url + "login", data={"token": token}, headers=origin, allow_redirects=False
    ) as response:
        key = page_key(await response.text()) if response.status == 200 else None
        return response.status, response.cookies.get("switchboard_auth"), key


def signed(cookie: Any, key: str) -> dict[str, str]:
    """The headers of a page's request: the session cookie and the page key."""
    return {"Cookie": f"switchboard_auth={cookie.value}", KEY_HEADER: key}


async def test_requests_without_the_token_are_refused(make_settings: SettingsFactory) -> None:
    settings = make_settings(web={"port": 0, "token": TOKEN})
    async with serving(settings) as (_, url, _chat), client() as http:
        async with http.get(url + "api/status") as response:
            assert response.status == 401
        async with http.get(url + f"api/status?token={TOKEN}") as response:
            assert response.status == 401  # never from the address
        async with http.get(url + "metrics") as response:
            assert response.status == 401
        async with http.get(url, headers={"Accept": "text/html"}, allow_redirects=False) as page:
            assert page.status == 303
            assert page.headers["Location"] == "/login?next=/"
        async with http.get(url + "api/status", headers={"Authorization": "Bearer wrong"}) as r:
            assert r.status == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with http.get(url + "api/status", headers=bearer) as response:
            assert response.status == 200
            assert (await response.json())["auth"] == "token"
        async with http.get(url + "metrics", headers=bearer) as response:
            assert response.status == 200
        async with http.get(url + "healthz") as response:
            assert response.status == 200  # for supervisors: no token, nothing to leak


async def test_login_sets_a_strict_httponly_cookie_that_is_not_the_token(
    make_settings: SettingsFactory,
) -> None:
    settings = make_settings(web={"port": 0, "token": TOKEN})
    async with serving(settings) as (_, url, _chat), client() as http:
        origin = {"Origin": url.rstrip("/")}
        async with http.post(
            url + "login", data={"token": "nope"}, headers=origin, allow_redirects=False
        ) as response:
            assert response.status == 303
            assert response.headers["Location"].startswith("/login?failed=1")
            assert "switchboard_auth" not in response.cookies
        async with http.post(
            url + "login",
            data={"token": TOKEN, "next": "/status"},
            headers=origin,
            allow_redirects=False,
        ) as response:
            assert response.status == 200  # the page that hands its key to the origin
            page = await response.text()
            assert 'data-next="/status"' in page
            key = page_key(page)
            cookie = response.cookies["switchboard_auth"]
            assert cookie["httponly"] is True
            assert cookie["samesite"] == "Strict"
            assert TOKEN not in cookie.value and key not in cookie.value
            assert response.headers["Cache-Control"] == "no-store"
        async with http.get(url + "api/status") as response:
            assert response.status == 401  # the cookie alone
        http.headers[KEY_HEADER] = key
        async with http.get(url + "api/status") as response:
            assert response.status == 200
        async with http.post(url + "logout", headers=origin, allow_redirects=False) as response:
            assert response.status == 303
        async with http.get(url + "api/status") as response:
            assert response.status == 401
        statuses = []
        for _ in range(10):
            async with http.post(
                url + "login", data={"token": "guess"}, headers=origin, allow_redirects=False
            ) as response:
                statuses.append(response.status)
        assert statuses[0] == 303  # back to the form, which says it was not right
        assert statuses[-1] == 429
        async with http.post(
            url + "login", data={"token": TOKEN}, headers=origin, allow_redirects=False
        ) as response:
            assert response.status == 429  # guessing is slowed down, even a right guess
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with http.get(url + "api/status", headers=bearer) as response:
            assert response.status == 429  # nor is the token itself checked, from this address


async def test_dns_rebinding_hosts_are_not_served(make_settings: SettingsFactory) -> None:
    async with serving(make_settings(web={"port": 0})) as (gateway, url, _chat):
        async with owner(gateway) as http:
            for host in ("evil.example", "127.evil.example", "localhost.evil.example"):
                async with http.get(url + "api/status", headers={"Host": host}) as response:
                    assert response.status == 421, host
            async with http.get(url + "api/status", headers={"Host": "localhost"}) as response:
                assert response.status == 200
            proxied = {"X-Forwarded-For": "203.0.113.9"}
            async with http.get(url + "api/status", headers=proxied) as response:
                assert response.status == 200  # the session is the proof, not the path
        async with (  # a proxy grants nothing either
            client() as stranger,
            stranger.get(url + "api/status", headers=proxied) as response,
        ):
            assert response.status == 401


async def test_a_throttled_client_is_refused_before_its_token_is_checked(
    make_settings: SettingsFactory,
) -> None:
    async with serving(make_settings(web={"port": 0, "token": TOKEN})) as (_, url, _chat):
        for _ in range(LOGIN_MAX_FAILURES):
            assert await status(url, **bearer("wrong-guess")) == 401
        assert await status(url, **bearer()) == 429  # a right guess gets nothing now


async def test_wrong_session_cookies_count_as_failed_logins(make_settings: SettingsFactory) -> None:
    async with serving(make_settings(web={"port": 0, "token": TOKEN})) as (_, url, _chat):
        for _ in range(LOGIN_MAX_FAILURES):
            cookie = f"switchboard_auth={secrets.token_urlsafe(32)}"
            assert await status(url, Cookie=cookie) == 401
        async with client() as http:
            assert (await log_in(http, url))[0] == 429


async def test_a_guesser_on_the_owners_address_never_locks_the_owner_out(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """On a loopback bind every local program has the owner's address: its guesses are
    refused, the owner's signed-in browser and a new sign-in link of theirs are not."""
    fake_llm.queue(text("still answering"))
    async with serving(make_settings(web={"port": 0})) as (gateway, url, _chat):
        assert gateway.web is not None
        async with owner(gateway) as browser:
            guesses = []
            for _ in range(LOGIN_MAX_FAILURES + 2):
                cookie = f"switchboard_auth={secrets.token_urlsafe(32)}"
                guesses.append(await status(url, Cookie=cookie))
            for number in range(3):
                async with (
                    client() as guesser,
                    guesser.get(url + f"signin?code=1.guess.{number}") as response,
                ):
                    guesses.append(response.status)
            assert guesses[:LOGIN_MAX_FAILURES] == [401] * LOGIN_MAX_FAILURES
            assert set(guesses[LOGIN_MAX_FAILURES:]) == {429}  # still slowed down
            async with browser.get(url + "api/status") as response:
                assert response.status == 200
            async with browser.post(
                url + "api/chat/messages",
                data=message_form("can I still talk?"),
                headers={"Origin": url.rstrip("/")},
            ) as response:
                assert response.status == 200
        async with client() as new_browser:  # a link from `switchboard web`, say
            await sign_in(new_browser, gateway.web.sign_in_link())
            async with new_browser.get(url + "api/status") as response:
                assert response.status == 200
        await gateway.wait_idle()
        assert len(fake_llm.requests) == 1


async def test_behind_a_trusted_proxy_each_client_is_throttled_alone(
    make_settings: SettingsFactory,
) -> None:
    settings = make_settings(web={"port": 0, "token": TOKEN, "trusted_proxies": ["127.0.0.1"]})
    async with serving(settings) as (_, url, _chat):
        for _ in range(LOGIN_MAX_FAILURES):
            guess = bearer("wrong-guess", **{"X-Forwarded-For": "203.0.113.5"})
            assert await status(url, **guess) == 401
        assert await status(url, **bearer(**{"X-Forwarded-For": "203.0.113.5"})) == 429
        # The guesser cannot pose as someone else: the proxy appends the real address.
        spoofed = {"X-Forwarded-For": "198.51.100.7, 203.0.113.5"}
        assert await status(url, **bearer(**spoofed)) == 429
        assert await status(url, **bearer(**{"X-Forwarded-For": "198.51.100.7"})) == 200


async def test_without_trusted_proxies_forwarded_addresses_are_ignored(
    make_settings: SettingsFactory,
) -> None:
    async with serving(make_settings(web={"port": 0, "token": TOKEN})) as (_, url, _chat):
        for number in range(LOGIN_MAX_FAILURES):
            forged = {"X-Forwarded-For": f"203.0.113.{number}"}
            assert await status(url, **bearer("wrong-guess", **forged)) == 401
        assert await status(url, **bearer(**{"X-Forwarded-For": "198.51.100.7"})) == 429


async def test_sessions_are_random_and_end_at_logout(make_settings: SettingsFactory) -> None:
    settings = make_settings(web={"port": 0, "token": TOKEN, "session_hours": 12})
    async with serving(settings) as (_, url, _chat), client() as first, client() as second:
        code, one, one_key = await log_in(first, url)
        _, two, two_key = await log_in(second, url)
        assert code == 200 and one.value != two.value and one_key != two_key
        assert one["max-age"] == str(12 * 3600)
        assert await status(url, **signed(one, one_key)) == 200
        assert await status(url, **signed(one, two_key)) == 401  # another sign-in's key
        async with first.post(
            url + "logout",
            headers={"Origin": url.rstrip("/"), KEY_HEADER: one_key},
            allow_redirects=False,
        ) as response:
            assert response.status == 303
        # a copied cookie and key die with the session
        assert await status(url, **signed(one, one_key)) == 401
        assert await status(url, **signed(two, two_key)) == 200
        _, three, three_key = await log_in(first, url)
        assert three.value not in (one.value, two.value)
        assert three_key not in (one_key, two_key)


async def test_sessions_survive_a_restart_but_not_a_new_token(
    make_settings: SettingsFactory,
) -> None:
    settings = make_settings(web={"port": 0, "token": TOKEN})
    async with serving(settings) as (_, url, _chat), client() as http:
        _, cookie, key = await log_in(http, url)
    session = signed(cookie, key)
    async with serving(settings) as (_, url, _chat):
        assert await status(url, **session) == 200  # the page key too
        assert await status(url, Cookie=session["Cookie"]) == 401
    changed = settings.model_copy(
        update={"web": settings.web.model_copy(update={"token": SecretStr(OTHER_TOKEN)})}
    )
    async with serving(changed) as (_, url, _chat):
        assert await status(url, **session) == 401
    async with serving(settings) as (_, url, _chat):
        assert await status(url, **session) == 401  # revoked for good, not just hidden


async def test_a_session_expires(make_settings: SettingsFactory) -> None:
    settings = make_settings()
    now = [1_000.0]
    async with Gateway(settings, channels=[]) as gateway:
        sessions = WebSessions(
            b"t" * 32, lifetime_seconds=3600, kv=gateway.store.kv, clock=lambda: now[0]
        )
        session = (await sessions.create()).session
        assert sessions.valid(session)
        now[0] += 3601
        assert not sessions.valid(session)
        reloaded = WebSessions(
            b"t" * 32, lifetime_seconds=3600, kv=gateway.store.kv, clock=lambda: now[0]
        )
        await reloaded.load()
        assert reloaded.count == 0


# -- web sign-in: failed-login tracking stays bounded -------------------------------------


class Seconds:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def sign_in_from(address: str) -> web.Request:
    return make_mocked_request("POST", "/login").clone(remote=address)


def guard(clock: Seconds, max_clients: int) -> WebGuard:
    return WebGuard(
        WebSettings(token="t" * 32),
        sessions=WebSessions(b"t" * 32, lifetime_seconds=3600),
        sign_in=SignInCodes(b"k" * 32),
        clock=clock,
        max_clients=max_clients,
    )


def test_a_flood_of_addresses_stays_bounded_and_a_throttled_client_stays_throttled() -> None:
    clock = Seconds()
    web_guard = guard(clock, max_clients=50)
    guesser = sign_in_from("203.0.113.7")
    for _ in range(LOGIN_MAX_FAILURES):
        web_guard.record_failure(guesser)
    assert web_guard.throttled(guesser)
    for i in range(1_000):
        flood = sign_in_from(f"2001:db8::{i:x}")
        assert not web_guard.throttled(flood)
        web_guard.record_failure(flood)
        clock.now += 0.01
        assert web_guard.tracked_clients <= 50
    assert web_guard.tracked_clients == 50
    assert web_guard.throttled(guesser)  # still slowed down
    clock.now += LOGIN_WINDOW_SECONDS
    assert not web_guard.throttled(guesser)  # until its window has passed


def test_a_failed_login_after_another_clients_failures_aged_out_is_still_counted() -> None:
    clock = Seconds()
    web_guard = guard(clock, max_clients=50)
    first, second = sign_in_from("198.51.100.1"), sign_in_from("198.51.100.2")
    web_guard.record_failure(first)
    clock.now += LOGIN_WINDOW_SECONDS + 1
    assert not web_guard.throttled(first)  # then signs in with the right token
    for _ in range(LOGIN_MAX_FAILURES):
        web_guard.record_failure(second)
    assert web_guard.throttled(second)
    assert web_guard.tracked_clients == 1  # the first client's old failure is forgotten
