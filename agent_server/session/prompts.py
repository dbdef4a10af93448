"""The words every transport hands the agent: the task, a follow-up, the completion prompt.

- `task_text(text, context)`: the person's message plus what their editor shows.
- `follow_up(events, text, context)`: the events that give a later message of a chat to the
  agent as its next observation (prefixed with `FOLLOW_UP`, so a transcript can tell it
  from a tool result).
- `completion_prompt(...)` / `fit_prompt(...)`: the fill-in-the-middle chat prompt of an
  inline completion, cut (far ends first) until it fits beside max_tokens.
Nothing to run; tests/session/test_prompts.py checks them.
"""

from __future__ import annotations

from agent_server.agent.events import Event
from agent_server.models.base import Message, ModelBackend
from agent_server.protocol.messages import EditorContext

FOLLOW_UP = "New message from the user:\n"  # how a later message reaches the agent
SYSTEM = (
    "You complete code at the cursor. Reply with only the code that belongs at <CURSOR>: "
    "no explanation, no code fences, nothing that is already before or after the cursor."
)
CURSOR = "<CURSOR>"


def task_text(text: str, context: EditorContext) -> str:
    """The person's message plus what their editor shows, as the agent's task."""
    parts = [text]
    if context.path:
        lang = f" ({context.language})" if context.language else ""
        parts.append(f"Open file: {context.path}{lang}")
    if context.selection and context.selection.text:
        s = context.selection
        parts.append(f"Selected (lines {s.start.line + 1}-{s.end.line + 1}):\n```\n{s.text}\n```")
    if context.diagnostics:
        lines = [
            f"- {d.path or context.path or '?'}:{d.line + 1} {d.severity}: {d.message}"
            for d in context.diagnostics[:50]
        ]
        parts.append("Diagnostics:\n" + "\n".join(lines))
    return "\n\n".join(parts)


def follow_up(events: list[Event], text: str, context: EditorContext) -> list[Event]:
    """Events that hand a later message to the agent: it arrives as the next observation.

    `rebuild_view` pairs an observation with the assistant reply before it; when the last
    run ended without one pending (a limit, a cancel), a short assistant note stands in.
    """
    seq = max((e.seq for e in events), default=0)
    step = max((e.step for e in events), default=0)
    pending = False
    last_finish: Event | None = None
    for e in events:
        if e.kind == "assistant":
            pending = True
        elif e.kind == "observation":
            pending = False
        elif e.kind == "run_finished":
            last_finish = e
    out: list[Event] = []
    if not pending:
        status = last_finish.data.get("status", "stopped") if last_finish else "stopped"
        note = last_finish.data.get("message", "") if last_finish else ""
        seq += 1
        content = f"(the previous request ended: {status}. {note})"
        message = {"role": "assistant", "content": content}
        out.append(Event("assistant", step, {"message": message, "completion": None}, seq))
    seq += 1
    content = FOLLOW_UP + task_text(text, context)
    observation = {"message": {"role": "user", "content": content}, "files": {}, "error": False}
    out.append(Event("observation", step, observation, seq))
    return out


def completion_prompt(path: str, language: str, prefix: str, suffix: str) -> list[Message]:
    lang = f" ({language})" if language else ""
    user = f"File: {path}{lang}\n\n{prefix}{CURSOR}{suffix}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def fit_prompt(
    backend: ModelBackend, path: str, language: str, prefix: str, suffix: str, max_tokens: int
) -> list[Message]:
    """The prompt with prefix/suffix cut (far ends first) until it fits beside max_tokens."""
    budget = backend.context_window - max_tokens
    while True:
        prompt = completion_prompt(path, language, prefix, suffix)
        if backend.count_tokens(prompt) <= budget or (not prefix and not suffix):
            return prompt
        # Halve the longer side, keeping the text next to the cursor.
        if len(prefix) >= len(suffix):
            prefix = prefix[len(prefix) // 2 :] if len(prefix) > 1 else ""
        else:
            suffix = suffix[: len(suffix) // 2] if len(suffix) > 1 else ""
