"""Tool calls written as Hermes-style text: `<tool_call>{"name": .., "arguments": ..}</tool_call>`.

The vLLM server is started with `--tool-call-parser hermes` (vllm_command.py), which reads
this format out of the model's text. The embedded backend does the same with
`parse_tool_calls`, so a reply to a request with `tools` means the same on both backends:
the text before the first `<tool_call>` is the content, each block a `ToolCall`, and the
finish reason becomes "tool_calls". A block that is not valid JSON leaves the reply as plain
text, as vLLM's parser does.

Tested in tests/models/test_embedded_backend.py.
"""

from __future__ import annotations

import json
import re
import uuid

from agent_server.models.base import ToolCall

_OPEN = "<tool_call>"
_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


def parse_tool_calls(text: str) -> tuple[str, list[ToolCall]]:
    """Split `text` into (content, tool calls); ([text], []) when it holds no valid call."""
    start = text.find(_OPEN)
    if start < 0:
        return text, []
    calls: list[ToolCall] = []
    for closed, unclosed in _BLOCK.findall(text):
        body = (closed or unclosed).strip()
        try:
            data = json.loads(body)
        except json.JSONDecodeError:
            return text, []
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return text, []
        arguments = data.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append(ToolCall(f"call-{uuid.uuid4().hex[:24]}", data["name"], arguments))
    return text[:start], calls
