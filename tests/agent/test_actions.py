"""The action parser: what any written action parses back to, what small models get away
with, and what a malformed action is told to fix.
Run: .venv/bin/python -m pytest tests/agent/test_actions.py -q
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_server.agent.actions import parse_action
from agent_server.agent.exceptions import FormatError
from agent_server.models.base import Completion, ToolCall
from tests.agent.loop_kit import FINISH, reply


@settings(max_examples=200, deadline=None)
@given(thought=st.text(), path=st.text(), search=st.text(), replace=st.text())
def test_any_written_action_parses_back(thought: str, path: str, search: str, replace: str) -> None:
    args = {"path": path, "search": search, "replace": replace}
    text = json.dumps({"thought": thought, "tool": "edit", "args": args})
    action = parse_action(reply(text))
    assert (action.tool, action.args, action.thought) == ("edit", args, thought)


def test_parser_tolerates_what_small_models_write() -> None:
    assert parse_action(reply(FINISH, finish="length")).tool == "finish"  # closed just in time
    # Raw control characters inside strings (seen from vLLM's xgrammar): strict=False takes them.
    raw_newline = '{"thought": "a\nb", "tool": "finish", "args": {"message": "x\ny"}}'
    assert parse_action(reply(raw_newline)).args == {"message": "x\ny"}
    fenced = "```json\n" + FINISH + "\n```"
    assert parse_action(reply(fenced)).tool == "finish"
    prose = "Sure! " + FINISH + " Hope that helps."
    assert parse_action(reply(prose)).args == {"message": "done"}


@pytest.mark.parametrize(
    ("completion", "needle"),
    [
        (reply(FINISH[:30], finish="length"), "cut off"),
        (reply("[1, 2]"), "one JSON object"),
        (reply('{"args": {}}'), '"tool"'),
        (reply('{"tool": "read_file", "args": {"path": 3}}'), "must be a string"),
        (reply('{"tool": "read_file", "args": "a.py"}'), "JSON object"),
        (
            reply("", calls=[ToolCall("1", "list_dir", "{}"), ToolCall("2", "list_dir", "{}")]),
            "one",
        ),
    ],
)
def test_malformed_actions_say_what_to_fix(completion: Completion, needle: str) -> None:
    with pytest.raises(FormatError, match=needle):
        parse_action(completion)
