"""Native tools for a chat template that ignores `tools` (SmolLM2-135M-Instruct's): the specs
and the Hermes call format go into the system message, earlier calls become <tool_call>
text, tool results <tool_response> user messages (hermes.tools_in_system); a template that
reads `tools` (the dev model's) gets them unchanged (chat_encoding.with_tools).
Run: .venv/bin/python -m pytest tests/models/test_tools_fallback.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

from agent_server.models.chat_encoding import load_tokenizer, reads_tools, with_tools
from agent_server.models.hermes import parse_tool_calls, tools_in_system

TOOL = {"type": "function", "function": {"name": "read_file", "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}  # fmt: skip
CALL = {"id": "c1", "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}  # fmt: skip
MESSAGES = [
    {"role": "user", "content": "Read a.py"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "x = 1\n"},
]


def test_the_tools_and_the_history_become_text() -> None:
    out = tools_in_system(MESSAGES, [TOOL])
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert json.dumps(TOOL["function"]) in out[0]["content"] and "<tool_call>" in out[0]["content"]
    text, calls = parse_tool_calls(out[2]["content"])  # written as the model should write it
    assert (text, [(c.name, json.loads(c.arguments)) for c in calls]) == (
        "", [("read_file", {"path": "a.py"})])  # fmt: skip
    assert "tool_calls" not in out[2]
    assert out[3]["content"] == "<tool_response>\nx = 1\n\n</tool_response>"
    with_system = tools_in_system([{"role": "system", "content": "Be brief."}], [TOOL])
    assert with_system[0]["content"].startswith("Be brief.\n\nYou may call")
    assert MESSAGES[1]["tool_calls"] == [CALL]  # the caller's messages are left alone


def test_a_template_that_reads_tools_gets_them_unchanged(dev_model_dir: Path) -> None:
    tokenizer = load_tokenizer(dev_model_dir)
    assert reads_tools(tokenizer)
    assert with_tools(tokenizer, MESSAGES, [TOOL]) == (MESSAGES, [TOOL])


def test_one_that_ignores_them_gets_them_in_the_system_message(real_model_dir: Path) -> None:
    tokenizer = load_tokenizer(real_model_dir)
    assert not reads_tools(tokenizer)
    messages, tools = with_tools(tokenizer, MESSAGES, [TOOL])
    assert tools is None and messages == tools_in_system(MESSAGES, [TOOL])
