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
Rules: paths are relative to the project root. Read a file before editing it (a file the task
names is shown with the task when it is small: do not read it again). An edit replaces the
exact text `search` (copied from the file, enough lines to be unique) with `replace`.
Keep `plan` as a short numbered todo list and update it when it changes. Call `finish` with a
short answer to the user when the task is done or cannot be done. Never repeat an action that
failed or was declined: change it or do something else."""

JSON_ACTIONS = """\
Answer with one JSON object and nothing else:
{{"thought": "<why>", "plan": "<todo list, optional>", "tool": "<tool>", "args": {{...}}}}
Tools and their args:
{tools}"""

# Few-shot examples of good JSON actions, shown as earlier turns before the task (small
# models copy the shape of a previous reply far better than they follow a description; with
# SmolLM2-135M the first action went from list_dir/search/finish to edit). Compact JSON, as
# constrained decoding writes it. Their files are in no bench: an example must not be an answer.
# Their files sit in folders, as a project's do (with bare names, SmolLM2 dropped the folder
# from every path it edited); the last one reads like a located statement (statements.py).
_EXAMPLES = (
    (
        "Fix the bug in geo/shapes.py: perimeter(w, h) should return 2 * (w + h).",
        {"geo/shapes.py": "def perimeter(w, h):\n    return w + h\n"},
        ("perimeter must double the sum", "geo/shapes.py", "    return w + h",
         "    return 2 * (w + h)"),
    ),
    (
        "Fix the bug in people/names.py: initials(first, last) should return first[0] + last[0].",
        {
            "people/names.py": 'def full(first, last):\n    return first + " " + last\n\n\n'
            "def initials(first, last):\n    return first[1] + last[1]\n"
        },
        ("initials must use index 0", "people/names.py", "    return first[1] + last[1]",
         "    return first[0] + last[0]"),
    ),
    (
        "Fix the bug in stats/mean.py: mean([2, 4]) should be 3.\n\n"
        "The faulty line: `return sum(values) * len(values)`",
        {"stats/mean.py": 'def mean(values):\n    """The average."""\n'
         "    return sum(values) * len(values)\n"},
        ("the sum must be divided by the count", "stats/mean.py",
         "    return sum(values) * len(values)", "    return sum(values) / len(values)"),
    ),
)  # fmt: skip


def few_shot() -> list[Message]:
    """The example turns shown before the task (JSON actions only; AgentConfig.few_shot)."""
    out: list[Message] = []
    for task, files, (thought, path, search, replace) in _EXAMPLES:
        args = {"path": path, "search": search, "replace": replace}
        action = {"thought": thought, "tool": "edit", "args": args}
        out.append({"role": "user", "content": task + shown_files(files)})
        out.append({"role": "assistant", "content": json.dumps(action, separators=(",", ":"))})
    return out


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


def shown_files(files: dict[str, str]) -> str:
    """The text of small files the task names, as shown after the task (task_files.py)."""
    return "".join(
        f"\n\nThe file {path}:\n```\n{text.rstrip()}\n```" for path, text in files.items()
    )


def first_user_message(
    task: str, plan: str, files: dict[str, str], summary: str, shown: str = ""
) -> str:
    """The task verbatim, then the small files it names; after a summarization, followed by
    the carried-over context."""
    if not summary:
        return task + shown
    outlines = "\n".join(f"{path}:\n{outline}" for path, outline in files.items()) or "(none)"
    context = CONTEXT_BLOCK.format(plan=plan or "(none)", files=outlines, summary=summary)
    return task + shown + context


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


def edit_applied(path: str, text: str, show_chars: int) -> str:
    """After an applied edit: the file as it is now when it is small, and what to do next."""
    if len(text) > show_chars:
        return f"The edit of {path} was applied."
    return (
        f"The edit of {path} was applied. The file now reads:\n```\n{text.rstrip()}\n```\n"
        "If the task is done, call finish; otherwise take the next step."
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
