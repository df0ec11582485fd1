"""Cluster nodes as whole processes: ``switchboard run`` subprocesses on one PostgreSQL
database, each with its own home, talking to the fake Telegram and the fake LLM by URL.
Shared by the cluster tests and the cluster soak (bench/soak_cluster.py), so both start,
watch and configure nodes the same way."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from tests.fakes.llm import FakeLLM, Recorded, Step, echo
from tests.fakes.telegram import FakeTelegram
from tests.test_cli import cli_env, switchboard


@dataclass
class Node:
    name: str
    process: asyncio.subprocess.Process
    ready: asyncio.Event
    standby: asyncio.Event


async def start_node(name: str, env: dict[str, str], log: Path | None = None) -> Node:
    """``switchboard run`` as one node, its output watched for ready and standby (its
    errors appended to ``log``, or dropped)."""
    if log is None:
        process = await spawn(env, asyncio.subprocess.DEVNULL)
    else:
        with log.open("ab") as errors:  # the child keeps its own copy of the descriptor
            process = await spawn(env, errors)
    node = Node(name, process, asyncio.Event(), asyncio.Event())
    asyncio.get_running_loop().create_task(watch(node))
    return node


async def spawn(env: dict[str, str], stderr: object) -> asyncio.subprocess.Process:
    """``switchboard run`` (as ``python -m gateway run``) with ``env``, its stdout piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "run",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,  # type: ignore[arg-type]
    )


@asynccontextmanager
async def cluster(
    tmp_path: Path,
    fake_llm: FakeLLM,
    tg: FakeTelegram,
    url: str,
    count: int,
    *,
    logs: Path | None = None,
    **extra: str,
) -> AsyncIterator[list[Node]]:
    """``count`` nodes (``switchboard run``) on one database, each with its own home
    (``extra``: more environment for each; ``logs``: a folder for each node's errors, in
    ``<name>.log``)."""
    nodes: list[Node] = []
    try:
        for i in range(count):
            name = f"node-{i}"
            env = node_env(tmp_path, fake_llm, tg, url, name, **extra)
            await switchboard("onboard", env=env)
            node = await start_node(name, env, None if logs is None else logs / f"{name}.log")
            nodes.append(node)
            # the first node leads: the others are standbys from the start
            await asyncio.wait_for((node.standby if i else node.ready).wait(), 30)
        yield nodes
    finally:
        for node in nodes:
            if node.process.returncode is None:
                node.process.send_signal(signal.SIGTERM)
        for node in nodes:
            await asyncio.wait_for(node.process.wait(), 30)


def node_env(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram, url: str, name: str, **extra: str
) -> dict[str, str]:
    return telegram_env(
        tmp_path / name,
        fake_llm,
        tg,
        SWITCHBOARD_STORAGE__URL=url,
        SWITCHBOARD_NODE__NAME=name,
        SWITCHBOARD_SCHEDULER__CATCHUP_JITTER_SECONDS="0",
        **{"SWITCHBOARD_LLM__API_KEY": node_key(name), **extra},
    )


def node_key(name: str) -> str:
    """The model key of node ``name``: the fake LLM tells by it which node asks."""
    return f"sk-test-{name}-123456"


def asked_by(request: Recorded) -> str:
    """The key a request to the fake LLM came with."""
    auth = next((v for k, v in request.headers.items() if k.lower() == "authorization"), "")
    return auth.removeprefix("Bearer ")


def telegram_env(home: Path, fake_llm: FakeLLM, tg: FakeTelegram, **extra: str) -> dict[str, str]:
    """A home whose gateway talks to the fake Telegram (anyone may DM it), without web chat."""
    return cli_env(
        home,
        fake_llm,
        SWITCHBOARD_WEB__ENABLED="false",
        SWITCHBOARD_TELEGRAM__TOKEN=tg.token,
        SWITCHBOARD_TELEGRAM__BASE_URL=tg.base_url,
        SWITCHBOARD_TELEGRAM__POLL_TIMEOUT_SECONDS="2",
        SWITCHBOARD_TELEGRAM__DM_POLICY="open",
        SWITCHBOARD_AGENT__REFLECTION="false",
        **extra,
    )


async def watch(node: Node) -> None:
    assert node.process.stdout is not None
    async for line in node.process.stdout:
        if line.decode().endswith("ready\n"):
            node.ready.set()
        elif line.decode().startswith("switchboard: standby"):
            node.standby.set()


# answers stream by editing from the first word (a draft message posted, then edited into
# the answer): whichever node runs the turn posts the draft, the leader delivers the answer
STREAMING = {
    "SWITCHBOARD_TELEGRAM__STREAMING": "true",
    "SWITCHBOARD_TELEGRAM__STREAM_AFTER_SECONDS": "0",
}


def written_echo(request: Recorded) -> Step:
    """The echo written in four pieces over 0.45 s, as a model writes: an answer that arrives
    all at once is sent whole, never drafted, so streaming needs words that take a while."""
    return replace(echo(request), stream_chunks=4, chunk_delay=0.15)


def streamed(tg: FakeTelegram) -> int:
    """How many answers were delivered by editing a draft (each shows once: the checks
    of what the chats show catch a draft left beside its answer)."""
    return len(tg.called("editMessageText"))
