"""The process runs out of file descriptors (clients holding connections, a burst): a model
call that cannot open its connection is a passing failure, retried like a refused
connection, and says what happened, with the real openai and anthropic SDKs."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent.llm.errors import LLMUnavailable
from tests.fakes.llm import FakeLLM, text
from tests.test_llm_providers import make, request

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def descriptors_used_up() -> Iterator[list[int]]:
    """Every file descriptor the process may open is open (the soft limit lowered to a
    little above what is open, then filled); all given back after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 16, hard))
    held: list[int] = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    try:
        yield held
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_call_without_a_descriptor_left_is_a_passing_failure_that_says_why(
    kind: str, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(text("warm"))
    warm = make(kind, fake_llm)
    await warm.complete(request())  # the SDK's first call loads what it loads once
    await warm.aclose()
    provider = make(kind, fake_llm)  # a new pool: the call needs a new connection
    try:
        with descriptors_used_up(), pytest.raises(LLMUnavailable) as caught:
            await provider.complete(request())
    finally:
        await provider.aclose()
    assert caught.value.transient  # a fallback model is tried; the notice says to try again
    assert "too many files and connections open" in caught.value.explain()
    assert "did not answer within" not in caught.value.explain()


RETRIED = textwrap.dedent(
    """
    import asyncio, logging, os, resource
    from tests.isolation import isolate
    isolate()
    from agent.llm.openai_provider import OpenAIProvider
    from agent.llm.types import ChatMessage, LLMRequest, SystemPrompt
    from tests.fakes.llm import FakeLLM, text

    held = []
    ASK = LLMRequest(SystemPrompt("stable", ""), (ChatMessage("user", "hi"),), (), 64)

    def give_back():
        while held:
            os.close(held.pop())

    class GiveBack(logging.Handler):
        # The SDK says it retries, then waits: the descriptors come free during the wait
        # (the loop's next round; the wait starts without yielding to it).
        def emit(self, record):
            if "Retrying" in record.getMessage():
                asyncio.get_running_loop().call_soon(give_back)

    def provider(fake, retries):
        return OpenAIProvider(
            model="m", api_key="sk-test", base_url=fake.openai_url, max_retries=retries, timeout=10
        )

    async def main():
        fake = await FakeLLM().start()
        fake.queue(text("warm"), text("answered after a retry"))
        warm = provider(fake, 0)
        await warm.complete(ASK)
        await warm.aclose()
        retrying = provider(fake, 1)  # a new pool: the call needs a new connection
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 16, hard))
        try:
            while True:
                held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            pass
        answer = await retrying.complete(ASK)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        print(answer.text)
        await retrying.aclose()
        await fake.stop()

    logger = logging.getLogger("openai._base_client")
    logger.setLevel(logging.INFO)
    logger.addHandler(GiveBack())
    asyncio.run(main())
    """
)


def test_a_call_without_a_descriptor_left_is_retried_by_the_sdk() -> None:
    """In a process of its own (what the SDK loads on its first retry is loaded once per
    process): the retry must not need a descriptor to load it. It did, and the turn ended
    with "something went wrong on my side" instead of the answer."""
    done = subprocess.run(
        [sys.executable, "-c", RETRIED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "answered after a retry"
