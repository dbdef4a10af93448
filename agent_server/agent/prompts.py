"""The fixed texts the agent and the summarizer show the model, and how a view is rendered.

Kept in one file so a prompt change is one diff, and so the learner (which trains on these
exact prompts through the same harness) and the tests (which detect the summary prompt by
its first line) read the same strings. Nothing to run here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from agent_server.agent.actions import TOOLS
from agent_server.models.base import Completion, Message

SYSTEM_PROMPT = """\
You are Apprentice, a coding agent working in the user's project. You act one step at a time:
each reply is exactly one action, and the result comes back as the next message.
{actions}
Rules: paths are relative to the project root. Read a file before editing it. An edit replaces
the exact text `search` (copied from the file, enough lines to be unique) with `replace`.
Keep `plan` as a short numbered todo list and update it when it changes. Call `finish` with a
short answer to the user when the task is done or cannot be done."""

JSON_ACTIONS = """\
Answer with one JSON object and nothing else:
{{"thought": "<why>", "plan": "<todo list, optional>", "tool": "<tool>", "args": {{...}}}}
Tools and their args:
{tools}"""

NATIVE_ACTIONS = "Call exactly one of the provided tools per reply."

# The first line identifies a summary request (ScriptedModel and tests key on it).
SUMMARY_SYSTEM = """\
You summarize the earlier part of a coding agent's session so that it can continue working.
Write a concise summary of what was done and learned: files read or changed and why, facts
found, commands run and their results, decisions, errors and how they were handled, and what
remains to do. Do not repeat the task or the plan: they are kept separately. Plain text only."""

SUMMARY_REQUEST = """\
The task (kept verbatim):
{task}

The current plan:
{plan}

The summary of the session before these turns:
{previous}

The turns to summarize:
{transcript}

Write the new summary, covering the previous summary and these turns."""

CONTEXT_BLOCK = """\


--- Session context (earlier turns were summarized) ---
Plan:
{plan}

Files touched (outlines):
{files}

Summary of the work so far:
{summary}
--- End of session context; the latest turns follow ---"""


def system_prompt(native_tools: bool) -> str:
    if native_tools:
        return SYSTEM_PROMPT.format(actions=NATIVE_ACTIONS)
    lines = []
    for name, (required, optional, description) in TOOLS.items():
        optional = ("search", "replace") if name == "edit" else tuple(f"{o}?" for o in optional)
        args = ", ".join(required + optional)
        lines.append(f"- {name}({args}): {description}")
    return SYSTEM_PROMPT.format(actions=JSON_ACTIONS.format(tools="\n".join(lines)))


def first_user_message(task: str, plan: str, files: dict[str, str], summary: str) -> str:
    """The task verbatim; after a summarization, followed by the carried-over context."""
    if not summary:
        return task
    outlines = "\n".join(f"{path}:\n{outline}" for path, outline in files.items()) or "(none)"
    return task + CONTEXT_BLOCK.format(plan=plan or "(none)", files=outlines, summary=summary)


def summary_request(task: str, plan: str, previous: str, transcript: str) -> list[Message]:
    content = SUMMARY_REQUEST.format(
        task=task, plan=plan or "(none)", previous=previous or "(none)", transcript=transcript
    )
    return [{"role": "system", "content": SUMMARY_SYSTEM}, {"role": "user", "content": content}]


def is_summary_request(messages: Sequence[Message]) -> bool:
    return bool(messages) and str(messages[0].get("content", "")).startswith(
        SUMMARY_SYSTEM.split("\n", 1)[0]
    )


def rejected_edit(path: str, reason: str) -> str:
    why = f" Their reason: {reason}" if reason else " They gave no reason."
    return f"The user rejected your edit of {path}; the file is unchanged.{why}"


def partial_edit(path: str, accepted: Sequence[int], total: int) -> str:
    return (
        f"The user accepted hunks {list(accepted)} of {total} of your edit of {path}; only "
        "those were applied. Read the file again before editing it further."
    )


COMMAND_DECLINED = "The user declined to run this command. Do something else or ask via finish."


def assistant_message(c: Completion, answered_call: bool) -> Message:
    """The model's reply as it goes back into the context. With `answered_call`, its (single)
    native tool call is kept so the tool result can answer it; otherwise calls become text."""
    if not answered_call:
        calls = [{"name": t.name, "arguments": t.arguments} for t in c.tool_calls]
        return {"role": "assistant", "content": c.text or (json.dumps(calls) if calls else "")}
    call = c.tool_calls[0]
    fn = {"name": call.name, "arguments": call.arguments}
    return {
        "role": "assistant",
        "content": c.text,
        "tool_calls": [{"id": call.id, "type": "function", "function": fn}],
    }


def observation_message(text: str, call_id: str | None) -> Message:
    """A tool result answers its native call; otherwise it is the next user message."""
    if call_id is None:
        return {"role": "user", "content": text}
    return {"role": "tool", "tool_call_id": call_id, "content": text}
