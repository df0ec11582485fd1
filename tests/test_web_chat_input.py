"""What the web chat refuses, and that the refusal says why in the right unit."""

from __future__ import annotations

from channels.webchat.uploads import human_size
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM
from tests.test_web_server import message_form, owner, serving


async def test_an_oversized_text_field_is_refused_with_its_real_limit(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    async with (
        serving(make_settings(web={"port": 0})) as (gateway, url, _chat),
        owner(gateway) as http,
    ):
        form = message_form("x" * 2_000_000, "too-long-0001")
        headers = {"Origin": url.rstrip("/")}
        async with http.post(url + "api/chat/messages", data=form, headers=headers) as response:
            assert response.status == 413
            error = (await response.json())["error"]
        await gateway.wait_idle()
    assert error == "the text is larger than 100 kB"
    assert fake_llm.requests == []


def test_sizes_are_shown_in_the_unit_that_fits() -> None:
    assert [human_size(n) for n in (999, 100_000, 20_000_000, 2_500_000_000)] == [
        "999 bytes",
        "100 kB",
        "20 MB",
        "2.5 GB",
    ]
