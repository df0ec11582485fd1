"""Guard pieces in isolation: the parser tiers, loop patterns, review rules, cleanup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from agent.guards.cleanup import failed_attempts
from agent.guards.loops import LoopAction, LoopDetector
from agent.guards.parser import decode_arguments, parse_response
from agent.guards.prompts import guidance
from agent.guards.review import Code, ToolStep, review
from agent.llm.types import LLMResponse, ToolCall
from agent.tools.base import asked_for
from agent.tools.cron import SCHEDULE_INTENT
from agent.tools.files import FILE_INTENT

TOOLS = {"read_file", "web_search", "write_file", "exec"}


@pytest.mark.parametrize(
    ("raw", "expected", "error"),
    [
        ('{"a": 1}', {"a": 1}, None),
        ('"{\\"a\\": 1}"', {"a": 1}, None),  # double-encoded
        ('{"a": 1}{"a": 1}', {"a": 1}, None),  # repeated object
        ("null", {}, None),
        ("", {}, None),
        ('{"a": 1,', None, "not valid JSON"),
        ("[1, 2]", None, "not list"),
        ('"just text"', None, "not a string"),
    ],
)
def test_argument_decoding(raw: str, expected: dict[str, Any] | None, error: str | None) -> None:
    args, problem, _ = decode_arguments(raw)
    assert args == expected
    if error:
        assert problem is not None and error.split()[0] in problem


def test_native_calls_win_and_names_are_repaired() -> None:
    response = LLMResponse("", (ToolCall("c1", "web_searchweb_search", '{"query": "x"}'),))
    parsed = parse_response(response, TOOLS, call_prefix="p")
    assert parsed.tier == "native"
    assert parsed.calls[0].call.name == "web_search"


def test_bare_json_that_is_the_whole_message_is_a_call() -> None:
    parsed = parse_response(
        LLMResponse(' {"name": "read_file", "parameters": {"path": "a"}}\n'),
        TOOLS,
        call_prefix="p",
    )
    assert parsed.tier == "json"
    assert parsed.calls[0].args == {"path": "a"}
    assert parsed.text == ""


@pytest.mark.parametrize(
    "said",
    [
        # an example shown in prose (it ran, and vanished from the answer)
        'To make it you would run {"name": "exec", "arguments": {"command": "touch x"}} there.',
        'Sure. {"name": "read_file", "parameters": {"path": "a"}} ok',
        'Like this:\n```json\n{"tool": "exec", "arguments": {"command": "ls"}}\n```\nthen check.',
        # a block quoted from a memory or a page, with prose around it
        "Your notes say:\naction: write_file\npath: a.txt\ncontent: hi\nShall I do it?",
        "I found:\naction: write_file\npath: a.txt\ncontent: hi",
    ],
)
def test_a_call_in_the_middle_of_prose_is_an_example_not_a_call(said: str) -> None:
    parsed = parse_response(LLMResponse(said), TOOLS, call_prefix="p")
    assert parsed.calls == () and parsed.tier == "none"
    assert parsed.text == said  # shown as written


def test_json_about_something_else_is_not_a_call() -> None:
    parsed = parse_response(LLMResponse('The config is {"debug": true}.'), TOOLS, call_prefix="p")
    assert parsed.calls == () and parsed.tier == "none"


def test_same_tool_without_progress_hints_then_stops() -> None:
    detector = LoopDetector()
    verdicts = [detector.observe("exec", f"exec:{i}", "exit code 1") for i in range(6)]
    assert [v.action for v in verdicts] == [
        LoopAction.NONE,
        LoopAction.NONE,
        LoopAction.HINT,
        LoopAction.NONE,
        LoopAction.NONE,
        LoopAction.STOP,
    ]


def test_progress_is_not_a_loop() -> None:
    detector = LoopDetector()
    verdicts = [detector.observe("read_file", f"read_file:{i}", f"content {i}") for i in range(10)]
    assert {v.action for v in verdicts} == {LoopAction.NONE}


def test_repeating_sequence_is_a_cycle() -> None:
    detector = LoopDetector()
    actions = [
        detector.observe(t, t, f"r{i}").pattern
        for i, t in enumerate(["a", "b", "c", "a", "b", "c"])
    ]
    assert actions[-1] == "cycle"


@pytest.mark.parametrize(
    ("final", "sent", "steps", "code"),
    [
        ("", [], [], Code.NO_SEND),
        ("Sure!", [], [], Code.NO_SUBSTANTIVE),
        ("Let me search for that.", [], [], Code.ACK_ONLY),
        ("Done.", [], [ToolStep("web_search", False, True)], Code.UNSENT_RESULTS),
        ("All set.", [], [ToolStep("web_search", True, True)], Code.ERROR_UNRESOLVED),
        ("The search failed: timeout.", [], [ToolStep("web_search", True, True)], None),
        (
            "Here are three flights: ...",
            ["Searching now"],
            [ToolStep("web_search", False, True)],
            None,
        ),
        ("", ["The answer is 4."], [], None),
    ],
)
def test_review_rules(
    final: str, sent: list[str], steps: list[ToolStep], code: Code | None
) -> None:
    finding = review(final_text=final, sent_texts=sent, steps=steps, unattended=False)
    assert (finding.code if finding else None) == code


def test_autopilot_may_be_silent_but_not_ask_unless_it_is_a_check_in() -> None:
    assert review(final_text="", sent_texts=[], steps=[], unattended=True) is None
    finding = review(final_text="Should I remind you?", sent_texts=[], steps=[], unattended=True)
    assert finding is not None and finding.code is Code.ASKS_ABSENT
    assert "Nobody is waiting for this reply" in finding.fix
    asked = review(
        final_text="Should I remind you?", sent_texts=[], steps=[], unattended=True, check_in=True
    )
    assert asked is None


@dataclass
class D:
    id: int
    body: dict[str, Any]


def test_cleanup_drops_only_failed_attempts_that_were_retried() -> None:
    drafts = [
        D(1, {"role": "user", "content": "go"}),
        D(
            2,
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "a", "name": "read_file", "arguments": "{}"}],
            },
        ),
        D(
            3,
            {
                "role": "tool",
                "tool_call_id": "a",
                "name": "read_file",
                "is_error": True,
                "content": "no",
            },
        ),
        D(
            4,
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "b", "name": "exec", "arguments": "{}"}],
            },
        ),
        D(
            5,
            {
                "role": "tool",
                "tool_call_id": "b",
                "name": "exec",
                "is_error": True,
                "content": "no",
            },
        ),
        D(
            6,
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c", "name": "read_file", "arguments": "{}"}],
            },
        ),
        D(7, {"role": "tool", "tool_call_id": "c", "name": "read_file", "content": "yes"}),
    ]
    assert failed_attempts(drafts) == [2, 3]  # exec never succeeded: its failure stays


def test_prompt_helpers_only_when_needed() -> None:
    offered = ["web_search", "web_fetch", "cron", "exec"]
    assert guidance(["hi there"], offered) == []
    assert [h.name for h in guidance(["search the latest news"], offered)] == ["research"]
    assert [h.name for h in guidance(["remind me tomorrow"], offered)] == ["scheduling"]
    assert guidance(["email this to dana"], offered) == []  # no send_email tool offered


def test_the_users_words_must_ask_for_the_action_as_whole_words() -> None:
    """(A hint for the approver, never an authorisation: agent.policy.)"""
    assert asked_for(["Please save milk to my list"], FILE_INTENT)
    assert asked_for(["remind me at 9"], SCHEDULE_INTENT)
    assert asked_for(["emailed the reminders?"], ("email", "remind"))
    assert asked_for(["can you check with the research agent"], ("check with",))
    assert not asked_for(["what is the address of this page?"], ("add",))
    assert not asked_for(["summarise this profile"], FILE_INTENT)  # "file" inside a word
    assert not asked_for(["what's in the page"], SCHEDULE_INTENT)  # "in " alone is no schedule
