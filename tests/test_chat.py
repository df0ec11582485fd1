"""``switchboard chat`` as a user runs it: attached to ``switchboard run`` or in-process,
Ctrl-C, resumed turns, and the terminal front end under a pseudo-terminal.

Everything goes through the real command (subprocesses, pexpect for the terminal) and the
fake LLM server; nothing is timed: each step waits for what the user would see.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import signal
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pexpect
import pytest

from tests.fakes.llm import FakeLLM, calls, error, held, streamed, text

pytestmark = pytest.mark.slow

STOPPING = "stopping: waiting up to 10 s for 1 turn (Ctrl-C again to stop now)"


def chat_env(home: Path, llm: FakeLLM | str, **extra: str) -> dict[str, str]:
    """The environment of a ``switchboard`` subprocess: its own home, the model at ``llm``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    env.update(
        SWITCHBOARD_HOME=str(home),
        SWITCHBOARD_LLM__BASE_URL=llm if isinstance(llm, str) else llm.openai_url,
        SWITCHBOARD_LLM__API_KEY="sk-test-chat-123456",
        SWITCHBOARD_LLM__MAX_RETRIES="0",
        SWITCHBOARD_AGENT__REFLECTION="false",
        SWITCHBOARD_WEB__ENABLED="false",
        NO_PROXY="127.0.0.1",
    )
    env.update(extra)
    return env


async def spawn(*args: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finish(process: asyncio.subprocess.Process, timeout: float = 60) -> tuple[int, str, str]:
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def switchboard(*args: str, env: dict[str, str], timeout: float = 60) -> tuple[int, str, str]:
    return await finish(await spawn(*args, env=env), timeout)


async def read_until(stream: asyncio.StreamReader | None, wanted: str) -> list[str]:
    """Lines of ``stream`` up to and including the first that contains ``wanted``."""
    assert stream is not None
    lines: list[str] = []
    while True:
        line = (await asyncio.wait_for(stream.readline(), 30)).decode()
        assert line, f"stream ended before {wanted!r}; got {lines}"
        lines.append(line.rstrip("\n"))
        if wanted in line:
            return lines


@asynccontextmanager
async def running_gateway(env: dict[str, str]) -> AsyncIterator[asyncio.subprocess.Process]:
    """``switchboard run`` until it printed "ready"; stopped (SIGTERM) afterwards."""
    process = await spawn("run", env=env)
    try:
        await read_until(process.stdout, "ready")
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await finish(process)


@pytest.fixture
async def home(tmp_path: Path, fake_llm: FakeLLM) -> Path:
    home = tmp_path / "home"
    code, _, err = await switchboard("onboard", env=chat_env(home, fake_llm))
    assert code == 0, err
    return home


async def test_chat_attaches_to_a_running_gateway(home: Path, fake_llm: FakeLLM) -> None:
    env = chat_env(home, fake_llm)
    async with running_gateway(env) as gateway:
        sock = home / "data" / "chat.sock"
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600  # only the gateway's user
        code, out, err = await switchboard("chat", "-m", "hello from outside", env=env)
        assert (code, out) == (0, "echo: hello from outside\n"), err
        assert "\x1b" not in out + err  # not a terminal: no escape codes
        assert gateway.returncode is None  # it answered; nobody fought over the data dir
        code, out, err = await switchboard("chat", "-m", "again", env=env)
        assert (code, out) == (0, "echo: again\n"), err
    assert [r.last_user_text for r in fake_llm.requests] == ["hello from outside", "again"]
    assert not sock.exists()  # removed at stop


async def test_attached_chat_left_mid_turn_gets_its_answer_next_time(
    home: Path, fake_llm: FakeLLM
) -> None:
    env = chat_env(home, fake_llm)
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "the slow answer"))
    async with running_gateway(env):
        first = await spawn("chat", "-m", "slow question", env=env)
        await fake_llm.wait_for_requests(1, timeout=30)  # journaled and being answered
        first.send_signal(signal.SIGINT)
        code, out, err = await finish(first)
        assert code == 130
        assert out == ""
        assert "left the chat; the gateway finishes what you asked" in err
        gate.set()  # the gateway finishes the turn with nobody attached
        code, out, err = await switchboard("chat", "-m", "next", env=env)
        assert code == 0, err
        assert out.splitlines() == ["echo: next"]  # only the answer to its own message
        assert "(earlier, undelivered) the slow answer" in err  # shown, marked as earlier
        code, out, err = await switchboard("chat", "-m", "third", env=env)
        assert out.splitlines() == ["echo: third"]
        assert "earlier" not in err  # nothing shown twice
    assert len(fake_llm.requests) == 3  # one model call per question


async def test_bytes_that_are_not_utf8_are_read_as_replacement_characters(
    home: Path, fake_llm: FakeLLM
) -> None:
    """A terminal set to another encoding passes bytes that are not UTF-8: the message is
    answered (before, the chat ended with a traceback from the journal)."""
    env = chat_env(home, fake_llm)
    typed = os.fsdecode(b"bad \xc3\x28 end")  # as Python hands the argument over
    code, out, err = await switchboard("chat", "-m", typed, env=env)
    assert (code, out) == (0, "echo: bad \ufffd( end\n"), err


async def test_a_turn_that_waits_for_approval_lets_chat_m_return_and_take_the_decision(
    home: Path, fake_llm: FakeLLM
) -> None:
    """A turn parked for the owner's approval runs no more until someone decides: `chat -m`
    returns once the request is shown, and `chat -m "/approve ID"` is sent and answered
    (it waited for that turn to end, and hung)."""
    env = chat_env(
        home,
        fake_llm,
        SWITCHBOARD_TOOLS__APPROVALS="ask",
        SWITCHBOARD_TOOLS__WEB__ALLOW_PRIVATE_HOSTS='["127.0.0.1"]',
    )
    fake_llm.queue(
        calls(("web_fetch", {"url": fake_llm.openai_url + "/models"})),
        calls(("write_file", {"path": "note.txt", "content": "from the page"})),
        text("Written to note.txt."),
    )
    async with running_gateway(env):
        code, asked, _ = await switchboard("chat", "-m", "look at the models page", env=env)
        found = re.search(r"/approve ([A-Z0-9]{6,})", asked)
        assert found is not None, asked
        code, decided, err = await switchboard("chat", "-m", f"/approve {found.group(1)}", env=env)
    assert code == 0, err
    assert "Written to note.txt." in decided
    assert (home / "workspace" / "note.txt").read_text() == "from the page"


async def test_chat_reads_messages_from_a_pipe(home: Path, fake_llm: FakeLLM) -> None:
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "gateway", "chat"),
        env=chat_env(home, fake_llm),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(b"first\nsecond\n"), 60)
    assert process.returncode == 0, err
    lines = out.decode().splitlines()
    assert lines[0].startswith("Switchboard chat")
    assert lines[1:] == ["assistant> echo: first", "assistant> echo: second"]
    assert b"\x1b" not in out


async def test_ctrl_c_in_chat_says_what_it_waits_for_and_the_turn_resumes(
    home: Path, fake_llm: FakeLLM
) -> None:
    env = chat_env(home, fake_llm)
    fake_llm.queue(held(asyncio.Event(), "never delivered"))
    chat = await spawn("chat", "-m", "first question", env=env)
    await fake_llm.wait_for_requests(1, timeout=30)
    chat.send_signal(signal.SIGINT)
    await read_until(chat.stderr, STOPPING)  # at once, not after the drain
    chat.send_signal(signal.SIGINT)
    code, out, err = await finish(chat)
    assert code == 130
    assert out == ""
    assert "Unclosed" not in err and "Traceback" not in err, err

    code, out, err = await switchboard("chat", "-m", "second question", env=env)
    assert code == 0, err
    assert "resuming your last question: first question" in err
    assert "(earlier, undelivered) echo: first question" in err
    assert out.splitlines() == ["echo: second question"]


async def test_one_message_is_judged_by_its_own_answer_not_an_earlier_one(
    home: Path, fake_llm: FakeLLM
) -> None:
    env = chat_env(home, fake_llm)
    fake_llm.queue(held(asyncio.Event(), "never delivered"))
    cut = await spawn("chat", "-m", "what was I asking", env=env)
    await fake_llm.wait_for_requests(1, timeout=30)
    cut.send_signal(signal.SIGKILL)  # a crash mid-turn
    await finish(cut)
    fake_llm.queue(error(400, "the model refused"))  # resumed, the earlier question fails

    code, out, err = await switchboard("chat", "-m", "and now this", env=env)
    assert code == 0, err  # its own answer came: the earlier failure is not this run's
    assert out.splitlines() == ["echo: and now this"]
    assert "(earlier, undelivered) Sorry, I could not answer." in err


async def test_a_message_waiting_on_another_chats_gateway_is_sent_when_that_chat_closes(
    home: Path, fake_llm: FakeLLM
) -> None:
    """Two `chat -m` at once, no `switchboard run`: the second attaches to the gateway the
    first runs and waits for its answer before sending; the first then closes, taking its
    gateway with it. The second is sent all the same (before, it said "what you sent is
    saved" and it was never sent)."""
    env = chat_env(home, fake_llm)
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "the first answer"))
    first = await spawn("chat", "-m", "first", env=env)
    await fake_llm.wait_for_requests(1, timeout=30)  # the first runs a gateway and asks
    second = await spawn("chat", "-m", "second", env=env)
    await read_until(second.stderr, "still working on: first")  # attached, waiting
    gate.set()
    code, out, err = await finish(first)
    assert (code, out) == (0, "the first answer\n"), err
    code, out, err = await finish(second)
    assert (code, out) == (0, "echo: second\n"), err
    assert "saved" not in err
    assert [r.last_user_text for r in fake_llm.requests] == ["first", "second"]


async def test_a_message_waiting_when_switchboard_run_dies_is_said_to_be_not_sent(
    home: Path, fake_llm: FakeLLM
) -> None:
    """A `chat -m` waits for the answer to an earlier question before it sends its own; the
    gateway is killed meanwhile. It says its message was not sent (before, that it was
    saved and would be answered), and does not start a gateway of its own in the place of
    `switchboard run` (which is being stopped or restarted on purpose)."""
    env = chat_env(home, fake_llm)
    fake_llm.queue(held(asyncio.Event(), "never delivered"))
    async with running_gateway(env) as gateway:
        first = await spawn("chat", "-m", "a long job", env=env)
        await fake_llm.wait_for_requests(1, timeout=30)
        second = await spawn("chat", "-m", "a quick one", env=env)
        await read_until(second.stderr, "still working on: a long job")
        gateway.send_signal(signal.SIGKILL)
        code, out, err = await finish(second)
        assert (code, out) == (1, ""), err
        assert "; your message was not sent" in err
        assert "saved" not in err
        await finish(first)
    assert [r.last_user_text for r in fake_llm.requests] == ["a long job"]


async def test_ctrl_c_in_run_waits_for_the_turn_then_stops_now(
    home: Path, fake_llm: FakeLLM
) -> None:
    env = chat_env(home, fake_llm)
    fake_llm.queue(held(asyncio.Event(), "never delivered"))
    async with running_gateway(env) as gateway:
        chat = await spawn("chat", "-m", "a long job", env=env)
        await fake_llm.wait_for_requests(1, timeout=30)
        gateway.send_signal(signal.SIGINT)
        await read_until(gateway.stderr, STOPPING)
        gateway.send_signal(signal.SIGINT)
        code, _, err = await finish(gateway)
        assert code == 0
        assert "Unclosed" not in err and "Traceback" not in err, err
        code, out, err = await finish(chat)
        assert code == 1
        assert "the gateway stopped; what you sent is saved" in err
    code, out, err = await switchboard("chat", "-m", "back again", env=env)
    assert code == 0, err
    assert "resuming your last question: a long job" in err
    assert "(earlier, undelivered) echo: a long job" in err
    assert out.splitlines() == ["echo: back again"]


# -- the terminal front end, under a pseudo-terminal ---------------------------------------

# An answer the model writes over half a minute: a stop must not wait for it.
WORDS = " ".join(f"word{i}" for i in range(300))
LONG = streamed(WORDS, chunks=150, over=30)
PROMPTLY = 10  # seconds: far less than the model takes to write LONG
STOPPING_ANSWER = "stopping the answer (Ctrl-C again leaves the chat)"


def terminal(home: Path, fake: FakeLLM, *args: str) -> pexpect.spawn:
    """``switchboard chat`` under a pseudo-terminal; all it writes is kept in
    ``child.logfile_read`` (a StringIO), for :func:`screen`."""
    env = chat_env(home, fake, TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "gateway", "chat", *args],
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 100),
    )
    child.logfile_read = io.StringIO()
    return child


def screen(child: pexpect.spawn) -> str:
    """Everything the chat wrote so far (escape codes included)."""
    return str(child.logfile_read.getvalue())


def plain(shown: str) -> str:
    """``shown`` without escape codes and carriage returns."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", shown)


async def expect(child: pexpect.spawn, pattern: str, timeout: float = 30) -> str:
    """Wait (without blocking the fake LLM) until the screen shows ``pattern``; return
    what came before it."""
    await child.expect_exact(pattern, async_=True, timeout=timeout)
    return str(child.before)


async def sent(child: pexpect.spawn, text: str) -> None:
    """Wait until the chat shows ``text`` as sent (above the prompt, which stays open)."""
    await child.expect(r"you› (?:\x1b\[[0-9;]*m)*" + re.escape(text), async_=True)


async def streaming(child: pexpect.spawn) -> None:
    """Wait until the answer being written shows, a second or two into LONG. (The prompt
    redraws only what changed on the screen, so a word, not a phrase, is looked for.)"""
    await child.expect(r"word1\d", async_=True)


async def leave(child: pexpect.spawn) -> int:
    """Ctrl-D, and the exit status."""
    child.sendcontrol("d")
    await child.expect_exact(pexpect.EOF, async_=True)
    child.close()
    assert child.exitstatus is not None
    return int(child.exitstatus)


async def test_terminal_chat_edits_streams_shows_tools_and_renders_markdown(
    home: Path, fake_llm: FakeLLM
) -> None:
    child = terminal(home, fake_llm)
    try:
        await expect(child, "you›")
        child.send("/sta\t")  # "/" commands complete
        await expect(child, "/status")
        child.sendcontrol("c")  # clears the line
        child.send("/help\r")  # the gateway's commands, and the terminal's own
        await expect(child, "/exit leave the chat")
        await expect(child, "/stop - ")
        fake_llm.queue(
            calls(("list_dir", {"path": "."})),
            streamed("Streaming **bold** answer\n\n- one\n- two", chunks=3, over=1),
        )
        child.send("show me\\\r")  # a trailing backslash continues on a new line
        child.send("the files\r")
        # the thinking line names the tool (the prompt may skip a space that was there already)
        await child.expect(r"running(?: |\x1b\[\d*C)list_dir", async_=True)
        assert "thinking…" in str(child.before)
        await expect(child, "Streaming \x1b[1mbold\x1b[0m answer")  # the answer, as markdown
        assert "**bold**" not in screen(child)
        assert screen(child).count("Streaming") >= 2  # streamed first, then the final answer
        assert await leave(child) == 0
    finally:
        child.close()
    assert fake_llm.requests[0].last_user_text == "show me\nthe files"
    assert "you› show me\n   … the files\n" in plain(screen(child))  # as it was typed

    history = home / "data" / "chat_history"
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    child = terminal(home, fake_llm)  # history survives the session
    try:
        await expect(child, "you›")
        child.send("\x1b[A")  # Up
        await expect(child, "the files")
        child.sendcontrol("c")
        assert await leave(child) == 0
    finally:
        child.close()


async def test_terminal_chat_says_it_resumes_before_answering(
    home: Path, fake_llm: FakeLLM
) -> None:
    env = chat_env(home, fake_llm)
    fake_llm.queue(held(asyncio.Event(), "never delivered"))
    cut = await spawn("chat", "-m", "what was I asking", env=env)
    await fake_llm.wait_for_requests(1, timeout=30)
    cut.send_signal(signal.SIGKILL)  # a crash mid-turn
    await finish(cut)

    child = terminal(home, fake_llm)
    try:
        banner = await expect(child, "resuming your last question: what was I asking")
        assert "Switchboard chat" in banner  # the banner first, then the notice
        await expect(child, "echo: what was I asking")
        assert await leave(child) == 0
    finally:
        child.close()


async def test_one_message_at_a_terminal_marks_an_earlier_answer(
    home: Path, fake_llm: FakeLLM
) -> None:
    env = chat_env(home, fake_llm)
    fake_llm.queue(held(asyncio.Event(), "never delivered"))
    cut = await spawn("chat", "-m", "what was I asking", env=env)
    await fake_llm.wait_for_requests(1, timeout=30)
    cut.send_signal(signal.SIGKILL)  # a crash mid-turn: its answer comes later
    await finish(cut)

    child = terminal(home, fake_llm, "-m", "and now this")
    try:
        await expect(child, "resuming your last question: what was I asking")
        await expect(child, "(earlier, undelivered)")
        await expect(child, "echo: what was I asking")
        await expect(child, "echo: and now this")
        await child.expect_exact(pexpect.EOF, async_=True)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert screen(child).count("(earlier, undelivered)") == 1  # its own answer is not marked


async def test_terminal_stop_typed_while_an_answer_streams_stops_it_at_once(
    home: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(LONG)
    child = terminal(home, fake_llm)
    try:
        await expect(child, "you›")
        child.send("write me something long\r")
        await streaming(child)
        child.send("/stop\r")  # typed while the answer streams
        await sent(child, "/stop")  # read at once, not after the answer
        partial = await expect(child, "Stopped. Nothing had been changed.", timeout=PROMPTLY)
        assert "\x1b[2mword0 word1" in partial  # what was written stays, dimmed, above it
        assert "word299" not in screen(child)
        child.send("still there?\r")
        await expect(child, "echo: still there?")  # the chat goes on
        assert await leave(child) == 0
    finally:
        child.close()
    assert [r.last_user_text for r in fake_llm.requests] == [
        "write me something long",
        "still there?",
    ]


async def test_terminal_message_typed_while_an_answer_streams_is_sent_at_once(
    home: Path, fake_llm: FakeLLM
) -> None:
    gate = asyncio.Event()
    fake_llm.queue(replace(streamed(WORDS, chunks=150, over=3), gate=gate, pause_after=20))
    child = terminal(home, fake_llm)
    try:
        await expect(child, "you›")
        child.send("write me something long\r")
        await streaming(child)
        child.send("and mention the weather\r")
        await sent(child, "and mention the weather")  # sent while the model writes
        gate.set()
        await expect(child, "echo: ")  # the message joined the turn: one more model call
        assert await leave(child) == 0
    finally:
        child.close()
    assert fake_llm.requests[-1].user_texts[-1] == "and mention the weather"


async def test_terminal_ctrl_c_stops_the_turn_and_a_second_leaves(
    home: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(LONG)
    child = terminal(home, fake_llm)
    try:
        await expect(child, "you›")
        child.send("take your time\r")
        await streaming(child)
        child.sendcontrol("c")
        await expect(child, STOPPING_ANSWER)
        partial = await expect(child, "Stopped. Nothing had been changed.", timeout=PROMPTLY)
        assert "\x1b[2mword0 word1" in partial  # the partial answer stays, marked stopped
        assert STOPPING not in screen(child)  # the chat did not stop: only the turn
        child.sendcontrol("c")  # a second Ctrl-C leaves
        await child.expect_exact(pexpect.EOF, async_=True)
        tail = str(child.before)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert "Unclosed" not in tail and "Traceback" not in tail, tail


@pytest.mark.timeout(120)  # the gateway's drain on a loaded machine (below)
async def test_terminal_two_ctrl_c_during_a_turn_leave(home: Path, fake_llm: FakeLLM) -> None:
    fake_llm.queue(held(asyncio.Event(), "never delivered"))
    child = terminal(home, fake_llm)
    try:
        await expect(child, "you›")
        child.send("take your time\r")
        await fake_llm.wait_for_requests(1, timeout=30)
        child.sendcontrol("c")
        await expect(child, STOPPING_ANSWER)
        child.sendcontrol("c")  # at once: leave, whether or not the stop went through yet
        # The in-process gateway stops: the /stop, taken or not yet, still stops the turn.
        await child.expect_exact(pexpect.EOF, timeout=60, async_=True)
        tail = str(child.before)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert "Unclosed" not in tail and "Traceback" not in tail, tail
    again = terminal(home, fake_llm, "-m", "hello again")
    try:
        await again.expect_exact(pexpect.EOF, async_=True)
    finally:
        again.close()
    first, shown = plain(screen(child)), plain(screen(again))
    # It ended when asked, and says so once: before the chat left, when the stop went
    # through first (which depends on the machine's timing), else at the next start.
    told_then, told_now = "Stopped." in first, "(earlier, undelivered)\nStopped." in shown
    assert told_then != told_now, (first, shown)
    assert "Stopped." not in shown.replace("(earlier, undelivered)\nStopped.", "")
    assert "resuming" not in shown  # not cut short by the stop: nothing to resume
    assert shown.rstrip().endswith("echo: hello again"), shown
    assert len(fake_llm.requests) == 2  # the stopped turn's one call, then the new message's


async def test_terminal_attached_chat_stops_a_turn_and_stays(home: Path, fake_llm: FakeLLM) -> None:
    env = chat_env(home, fake_llm)
    fake_llm.queue(LONG)
    async with running_gateway(env) as gateway:
        child = terminal(home, fake_llm)
        try:
            await expect(child, "attached")  # one word: a long line may wrap anywhere
            await expect(child, "you›")
            child.send("write me something long\r")
            await streaming(child)
            child.sendcontrol("c")
            await expect(child, "Stopped. Nothing had been changed.", timeout=PROMPTLY)
            child.send("/stop\r")  # nothing runs: the gateway says so, beside the queue
            await expect(child, "Nothing is running right now.")
            child.send("still there?\r")
            await expect(child, "echo: still there?")
            assert await leave(child) == 0
        finally:
            child.close()
        assert gateway.returncode is None  # only the turn stopped
