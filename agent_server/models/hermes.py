"""Tool calls written as Hermes-style text: `<tool_call>{"name": .., "arguments": ..}</tool_call>`.

The vLLM server is started with `--tool-call-parser hermes` (vllm_command.py), which reads
this format out of the model's text. The embedded backend does the same with
`parse_tool_calls`, so a reply to a request with `tools` means the same on both backends:
the text before the first `<tool_call>` is the content, each block a `ToolCall`, and the
finish reason becomes "tool_calls". A block that is not valid JSON leaves the reply as plain
text, as vLLM's parser does.

`tools_in_system(messages, tools)` is the other half, for a chat template that ignores
`tools` (SmolLM2-135M-Instruct's does): the tool specs and this call format go into the
system message, earlier calls become <tool_call> text and tool results <tool_response> user
messages, so the model reads the same thing on both backends (chat_encoding.py decides).

Tested in tests/models/test_embedded_backend.py and tests/models/test_real_model.py.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from typing import Any

from agent_server.models.base import Message, ToolCall

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


TOOLS_PREAMBLE = (
    "You may call one or more functions. Function signatures are inside <tools></tools>:\n"
    "<tools>\n{specs}\n</tools>\n"
    "For each function call, return a JSON object with the function name and arguments "
    "within <tool_call></tool_call> tags:\n"
    '<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)


def tools_in_system(messages: list[Message], tools: list[dict[str, Any]]) -> list[Message]:
    """`messages` with `tools` written out for a model whose chat template ignores them."""
    specs = "\n".join(json.dumps(t.get("function", t), ensure_ascii=False) for t in tools)
    preamble = TOOLS_PREAMBLE.format(specs=specs)
    out: list[Message] = []
    for m in messages:
        if m.get("role") == "assistant" and m.get("tool_calls"):
            blocks = [_call_text(c.get("function") or {}) for c in m["tool_calls"]]
            content = "\n".join(filter(None, [m.get("content") or "", *blocks]))
            out.append({"role": "assistant", "content": content})
        elif m.get("role") == "tool":
            text = f"<tool_response>\n{m.get('content') or ''}\n</tool_response>"
            out.append({"role": "user", "content": text})
        else:
            out.append(dict(m))
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0].get('content') or ''}\n\n{preamble}".lstrip()
    else:
        out.insert(0, {"role": "system", "content": preamble})
    return out


def _call_text(function: dict[str, Any]) -> str:
    arguments = function.get("arguments", "{}")
    with contextlib.suppress(json.JSONDecodeError):  # else written back as the model wrote it
        arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
    call = {"name": function.get("name", ""), "arguments": arguments}
    return f"<tool_call>\n{json.dumps(call, ensure_ascii=False)}\n</tool_call>"
