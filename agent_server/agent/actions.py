"""The action format: a JSON schema a tiny constrained model can fill, and its parser.

The model answers each turn with exactly one action, either as a native tool call
(`Completion.tool_calls`, when the backend was given `TOOL_SPECS`) or as JSON text:

    {"thought": "...", "plan": "1. ... 2. ...", "tool": "edit",
     "args": {"path": "a.py", "search": "old", "replace": "new"}}

`action_schema()` is one `anyOf` branch per tool. The prose strings (`thought`, `plan`) and
`path` are bounded by `maxLength`, so a rambling model still closes the object inside
`max_tokens`; the strings that carry code or quoted text (`search`, `replace`, `command`,
`query`, `message`) are not: xgrammar (vLLM's grammar engine, and the embedded backend's)
drops JSON escapes from length-bounded strings (mlc-ai/xgrammar#800, open in 0.2.9), so under
a bound no `\"`, `\\` or `\n` can be written -- no edit of a line holding a string literal,
no multi-line edit. A reply cut off at `max_tokens` is a format error the loop explains. `plan`
is optional: the loop keeps the latest one and the summarizer carries it over verbatim.
`edit` also accepts `{"path", "blocks"}` with Aider SEARCH/REPLACE text, for models that
write that format (not offered in the schema: one shape is easier for a tiny model).

`parse_action` raises `FormatError` with a message written for the model, which the loop
sends back as the next observation. Run its tests: pytest tests/agent/test_loop.py -q
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agent_server.agent.exceptions import FormatError
from agent_server.models.base import Completion

# Tool name -> (required string args, optional string args, description).
TOOLS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "read_file": (("path",), (), "Read a text file of the workspace (paths are relative)."),
    "list_dir": ((), ("path",), "List a directory of the workspace ('.' is the root)."),
    "search": (("query",), ("path",), "Search file contents for a literal string."),
    "edit": (
        ("path",),
        ("search", "replace", "blocks"),
        "Replace the exact text `search` with `replace` in file `path` (search '' creates "
        "the file or appends to it).",
    ),
    "run_command": (("command",), (), "Run a shell command in the workspace root."),
    "finish": (("message",), (), "End the task; `message` is your answer to the user."),
}
MAX_LEN = {"thought": 600, "plan": 600, "path": 200}  # the others unbounded (module docstring)
# What the JSON schema offers for edit (the blocks form is accepted but not advertised).
SCHEMA_ARGS = {t: req + opt for t, (req, opt, _) in TOOLS.items()}
SCHEMA_ARGS["edit"] = ("path", "search", "replace")


@dataclass(frozen=True)
class Action:
    tool: str
    args: dict[str, str]
    thought: str = ""
    plan: str | None = None  # None: the plan did not change
    call_id: str | None = None  # set for native tool calls; the observation answers it


def _string(name: str) -> dict[str, Any]:
    bound = MAX_LEN.get(name)
    return {"type": "string"} | ({"maxLength": bound} if bound else {})


def action_schema() -> dict[str, Any]:
    """JSON schema of one action (for `ModelBackend.complete(schema=...)`)."""
    branches = []
    for tool, names in SCHEMA_ARGS.items():
        # list_dir/search `path` stays optional in text; the schema requires every arg so a
        # constrained model cannot stop early with an empty object.
        args = {"type": "object", "properties": {n: _string(n) for n in names}}
        args |= {"required": list(names), "additionalProperties": False}
        props = {"thought": _string("thought"), "plan": _string("plan")}
        props |= {"tool": {"const": tool}, "args": args}
        branches.append(
            {
                "type": "object",
                "properties": props,
                "required": ["thought", "tool", "args"],
                "additionalProperties": False,
            }
        )
    return {"anyOf": branches}


def tool_specs() -> list[dict[str, Any]]:
    """OpenAI-style function specs for backends with native tool calling."""
    specs = []
    for tool, (required, optional, description) in TOOLS.items():
        props = {n: _string(n) for n in required + optional}
        params = {"type": "object", "properties": props, "required": list(required)}
        specs.append(
            {
                "type": "function",
                "function": {"name": tool, "description": description, "parameters": params},
            }
        )
    return specs


EXAMPLE = '{"thought": "why", "tool": "read_file", "args": {"path": "README.md"}}'
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


def _loads(text: str) -> Any:
    text = text.strip()
    if m := _FENCE.match(text):
        text = m.group(1)
    try:
        return json.loads(text, strict=False)  # strict=False: raw newlines inside strings
    except json.JSONDecodeError as first:
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end:  # prose around one object: take the object
            try:
                return json.loads(text[start : end + 1], strict=False)
            except json.JSONDecodeError:
                pass
        raise FormatError(
            f"Your reply is not valid JSON ({first.msg} at line {first.lineno} column "
            f"{first.colno}). Answer with exactly one JSON action, for example: {EXAMPLE}"
        ) from None


def check_args(tool: str, args: Any) -> dict[str, str]:
    """Validate `args` for `tool`; returns them with only known string arguments."""
    if tool not in TOOLS:
        raise FormatError(f"Unknown tool {tool!r}. Use one of: {', '.join(TOOLS)}.")
    if not isinstance(args, dict):
        raise FormatError(f'"args" must be a JSON object, got {type(args).__name__}.')
    required, optional, _ = TOOLS[tool]
    missing = [n for n in required if n not in args]
    if missing:
        takes = ", ".join(required + optional)
        raise FormatError(f"Tool {tool!r} needs argument(s) {missing}; it takes: {takes}.")
    clean: dict[str, str] = {}
    for name in required + optional:
        if name in args:
            if not isinstance(args[name], str):
                raise FormatError(f"Argument {name!r} of {tool!r} must be a string.")
            clean[name] = args[name]
    pair = "search" in clean and "replace" in clean
    if tool == "edit" and not pair and "blocks" not in clean:
        raise FormatError('Tool "edit" needs "search" and "replace" (or "blocks").')
    return clean


def parse_action(completion: Completion) -> Action:
    """The one action in `completion`, or FormatError explaining what to fix."""
    try:
        return _parse(completion)
    except FormatError:
        if completion.finish_reason == "length":  # the likely cause; say so
            raise FormatError(
                "Your reply was cut off at the token limit. Write a shorter thought and one action."
            ) from None
        raise


def _parse(completion: Completion) -> Action:
    if completion.tool_calls:
        if len(completion.tool_calls) != 1:
            raise FormatError(f"Call exactly one tool per turn, not {len(completion.tool_calls)}.")
        call = completion.tool_calls[0]
        args = _loads(call.arguments or "{}")
        plan = args.pop("plan", None) if isinstance(args, dict) else None
        return Action(
            tool=call.name,
            args=check_args(call.name, args),
            thought=completion.text.strip(),
            plan=plan if isinstance(plan, str) and plan.strip() else None,
            call_id=call.id,
        )
    obj = _loads(completion.text)
    if not isinstance(obj, dict):
        raise FormatError(f"Your reply must be one JSON object, for example: {EXAMPLE}")
    tool = obj.get("tool")
    if not isinstance(tool, str):
        raise FormatError(f'Your action needs a "tool" string. For example: {EXAMPLE}')
    thought, plan = obj.get("thought", ""), obj.get("plan")
    return Action(
        tool=tool,
        args=check_args(tool, obj.get("args", {})),
        thought=thought if isinstance(thought, str) else str(thought),
        plan=plan if isinstance(plan, str) and plan.strip() else None,
    )
