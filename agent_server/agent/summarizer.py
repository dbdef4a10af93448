"""Self-summarization: the `Summarizer` strategy (OpenHands condenser shape) and the `View`.

The loop keeps a `View` (system prompt, task, plan, outlines of the files touched, the
latest summary, the turns since: `View.turns`, each a `Step` of the loop) and renders it
with `View.messages()`. Before every model call it asks `summarizer.should_summarize(view)`;
if yes, `await summarizer.summarize(view)` returns a smaller view. `ModelSummarizer` triggers
on tokens (`budget_ratio` x the backend's context window, measured with
`backend.count_tokens`), has the model itself write the summary from the fixed prompt in
prompts.py, and builds a new view that keeps the system prompt, the task VERBATIM, the plan,
the file outlines, the summary and the last turns, shrunk until it fits `target_ratio` x the
window (older turns dropped first, then long texts clipped).

`rebuild_view(events)` replays a stored trajectory into the view the loop had, so a session
resumes from its last summary.
Run its tests: .venv/bin/python -m pytest tests/agent/test_summarizer.py -q
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agent_server.agent import prompts
from agent_server.agent.events import Event, completion_to_dict
from agent_server.agent.exceptions import ContextOverflow
from agent_server.models.base import Completion, Message, ModelBackend, Sampling


@dataclass(frozen=True)
class Step:
    """One step of the loop in the view: the model's reply and what it observed (a person's
    task or follow-up, which runs many steps, is session.turns.Turn)."""

    step: int
    assistant: Message  # the model's reply as sent back to it
    observation: Message  # the result: role "user" (JSON actions) or "tool" (native calls)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        return cls(step=d["step"], assistant=d["assistant"], observation=d["observation"])


@dataclass
class View:
    """What the model sees; `messages()` renders it."""

    system: str
    task: str
    shown: str = ""  # the small files the task names, rendered (prompts.shown_files)
    examples: list[Message] = field(default_factory=list)  # few-shot turns before the task
    plan: str = ""
    files: dict[str, str] = field(default_factory=dict)  # path -> outline, oldest first
    summary: str = ""
    turns: list[Step] = field(default_factory=list)
    summaries: int = 0  # summarizations so far
    summary_completion: Completion | None = None  # the completion that wrote `summary`
    summary_request: list[Message] | None = None  # the prompt it answered

    def messages(self) -> list[Message]:
        first = prompts.first_user_message(
            self.task, self.plan, self.files, self.summary, self.shown
        )
        out: list[Message] = [{"role": "system", "content": self.system}, *self.examples]
        out.append({"role": "user", "content": first})
        for t in self.turns:
            out += [t.assistant, t.observation]
        return out

    def summary_data(self) -> dict[str, Any]:
        """The `summary` event's data: enough to rebuild this view (see rebuild_view)."""
        c = self.summary_completion
        return {
            "summary": self.summary,
            "plan": self.plan,
            "files": dict(self.files),
            "turns": [t.to_dict() for t in self.turns],
            "completion": completion_to_dict(c) if c is not None else None,
            "request": self.summary_request,
        }

    def touch(self, path: str, text: str) -> None:
        """Record that `path` was read or changed; its outline moves to the end (newest)."""
        self.files.pop(path, None)
        self.files[path] = outline(path, text)


def outline(path: str, text: str, max_lines: int = 20) -> str:
    """Top-level defs and classes (with methods) for Python, the first lines otherwise."""
    if path.endswith(".py"):
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            tree = None
        if tree is not None:
            lines = []
            for node in tree.body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines.append(f"  def {node.name}()  # line {node.lineno}")
                elif isinstance(node, ast.ClassDef):
                    fns = (ast.FunctionDef, ast.AsyncFunctionDef)
                    methods = ", ".join(n.name for n in node.body if isinstance(n, fns))
                    lines.append(f"  class {node.name}: {methods}  # line {node.lineno}")
            return "\n".join(lines[:max_lines]) or "  (no top-level definitions)"
    head = [f"  {line[:100]}" for line in text.splitlines()[: min(5, max_lines)]]
    return "\n".join(head) or "  (empty)"


def clip(text: str, max_chars: int) -> str:
    """Keep the head and tail of `text`, marking what was cut (the tail holds errors)."""
    if len(text) <= max_chars:
        return text
    head = max_chars * 2 // 3
    tail = max_chars - head
    return f"{text[:head]}\n[... {len(text) - max_chars} characters cut ...]\n{text[-tail:]}"


def _clip_message(m: Message, max_chars: int) -> Message:
    return {**m, "content": clip(str(m.get("content") or ""), max_chars)}


@runtime_checkable
class Summarizer(Protocol):
    def should_summarize(self, view: View) -> bool: ...

    async def summarize(self, view: View) -> View: ...


@dataclass(frozen=True)
class SummarizerConfig:
    budget_ratio: float = 0.8
    """Summarize when the prompt exceeds this fraction of the context window."""
    target_ratio: float = 0.5
    """After summarizing, the view fits this fraction (headroom before the next trigger)."""
    keep_last_turns: int = 4
    """Turns kept verbatim after the summary (fewer if they do not fit)."""
    max_summary_tokens: int = 512
    """max_tokens of the summary completion."""
    temperature: float = 0.2
    """Sampling temperature of the summary completion (low: a summary is not creative)."""
    max_files: int = 30
    """Outlines of at most this many most recently touched files are kept."""

    def __post_init__(self) -> None:
        if not 0 < self.target_ratio < self.budget_ratio <= 1:
            raise ValueError(
                f"need 0 < target_ratio < budget_ratio <= 1, got target_ratio="
                f"{self.target_ratio}, budget_ratio={self.budget_ratio}; e.g. 0.5 and 0.8"
            )
        if self.keep_last_turns < 0:
            raise ValueError(f"keep_last_turns must be >= 0, got {self.keep_last_turns}")
        if self.max_summary_tokens < 16:
            raise ValueError(f"max_summary_tokens must be >= 16, got {self.max_summary_tokens}")
        if self.max_files < 0:
            raise ValueError(f"max_files must be >= 0, got {self.max_files}")


class ModelSummarizer:
    """The model summarizes its own context (the same backend that runs the agent)."""

    def __init__(self, backend: ModelBackend, config: SummarizerConfig | None = None) -> None:
        self.backend = backend
        self.config = config = config or SummarizerConfig()
        window = backend.context_window
        self.budget = int(config.budget_ratio * window)
        self.target = int(config.target_ratio * window)
        if config.max_summary_tokens * 2 > self.target:
            raise ValueError(
                f"max_summary_tokens={config.max_summary_tokens} must be at most half the "
                f"post-summary target ({self.target} tokens = target_ratio x context window "
                f"{window}): lower max_summary_tokens or raise target_ratio"
            )
        # The summary request plus its answer must fit the window, and stays inside the budget.
        self.request_limit = min(self.budget, window - config.max_summary_tokens)

    def tokens(self, view_or_messages: View | list[Message]) -> int:
        msgs = view_or_messages
        return self.backend.count_tokens(msgs.messages() if isinstance(msgs, View) else msgs)

    def should_summarize(self, view: View) -> bool:
        return self.tokens(view) > self.budget

    async def summarize(self, view: View) -> View:
        k = self.config.keep_last_turns
        old, keep = (view.turns[:-k], view.turns[-k:]) if k else (view.turns, [])
        if not old and len(keep) > 1:  # the kept turns alone are too big: summarize more
            old, keep = keep[:-1], keep[-1:]
        request = self._request(view, old)
        sampling = Sampling(
            max_tokens=self.config.max_summary_tokens, temperature=self.config.temperature
        )
        completion = await self.backend.complete(request, sampling=sampling)
        recent = list(view.files.items())[len(view.files) - self.config.max_files :]
        new = View(
            system=view.system,
            task=view.task,
            shown=view.shown,
            examples=list(view.examples),
            plan=view.plan,
            files=dict(recent),
            summary=completion.text.strip() or view.summary,
            turns=list(keep),
            summaries=view.summaries + 1,
            summary_completion=completion,
            summary_request=request,
        )
        return self._fit(new)

    def _request(self, view: View, old: list[Step]) -> list[Message]:
        """The summary prompt over `old`, clipped until it fits `request_limit`."""
        cap, previous, plan = 4000, view.summary, view.plan
        while True:
            transcript = "\n".join(_render_step(t, cap) for t in old) or "(no new turns)"
            request = prompts.summary_request(view.task, plan, previous, transcript)
            if self.tokens(request) <= self.request_limit:
                return request
            if cap > 100:
                cap //= 2
            elif len(old) > 1:  # still too long: the oldest turns go unsummarized
                old = old[1:]
            elif len(previous) > 200 or len(plan) > 200:
                previous, plan = clip(previous, len(previous) // 2), clip(plan, len(plan) // 2)
            else:
                raise ContextOverflow(
                    f"the task ({len(view.task)} characters) leaves no room to summarize in a "
                    f"{self.backend.context_window}-token window: shorten the task"
                )

    def _fit(self, view: View) -> View:
        """Shrink `view` to the target: drop older turns, clip, drop outlines, clip summary."""
        cap = 8000
        while self.tokens(view) > self.target:
            if len(view.turns) > 1:
                view.turns.pop(0)
            elif view.turns and cap > 100:
                cap //= 2
                t = view.turns[0]
                view.turns[0] = Step(
                    t.step, _clip_message(t.assistant, cap), _clip_message(t.observation, cap)
                )
            elif view.files:
                view.files.pop(next(iter(view.files)))
            elif view.shown:  # the small files shown with the task: read_file gets them again
                view.shown = ""
            elif view.examples:
                view.examples = []
            elif len(view.summary) > 200:
                view.summary = clip(view.summary, len(view.summary) // 2)
            elif len(view.plan) > 200:
                view.plan = clip(view.plan, len(view.plan) // 2)
            else:
                break
        if self.tokens(view) > self.budget:
            raise ContextOverflow(
                f"the system prompt and the task need {self.tokens(view)} tokens, more than the "
                f"context budget of {self.budget}: shorten the task or use a larger window"
            )
        return view


def default_summarizer(backend: ModelBackend, budget_ratio: float) -> ModelSummarizer:
    """The agent's default: trigger at `budget_ratio`, shrink to 5/8 of it, and a summary of
    at most 512 tokens or half that target (small windows)."""
    target = round(budget_ratio * 0.625, 3)
    most = min(512, int(target * backend.context_window) // 2)
    config = SummarizerConfig(budget_ratio, target_ratio=target, max_summary_tokens=most)
    return ModelSummarizer(backend, config)


def _render_step(t: Step, cap: int) -> str:
    said = str(t.assistant.get("content") or "")
    if calls := t.assistant.get("tool_calls"):
        said += " " + " ".join(str(c.get("function", c)) for c in calls)
    result = str(t.observation.get("content") or "")
    return f"[step {t.step}] agent: {clip(said, cap)}\n[step {t.step}] result: {clip(result, cap)}"


def rebuild_view(events: Iterable[Event]) -> View:
    """The view the loop had after `events` (in seq order): system, task, last summary, and
    the turns after it. Turns cut off mid-step (no observation yet) are dropped."""
    view: View | None = None
    pending: Message | None = None
    for e in sorted(events, key=lambda e: e.seq):
        d = e.data
        if e.kind == "run_started" and view is None:
            view = View(d["system"], d["task"], d.get("shown", ""), list(d.get("examples", [])))
        elif view is None:
            continue
        elif e.kind == "assistant":
            pending = d["message"]
        elif e.kind == "tool_call" and d.get("plan"):
            view.plan = d["plan"]
        elif e.kind == "observation" and pending is not None:
            view.turns.append(Step(e.step, pending, d["message"]))
            pending = None
            for path, text in d.get("files", {}).items():
                view.files.pop(path, None)
                view.files[path] = text
        elif e.kind == "summary":
            view = View(
                system=view.system,
                task=view.task,
                shown=view.shown,
                examples=view.examples,
                plan=d["plan"],
                files=dict(d["files"]),
                summary=d["summary"],
                turns=[Step.from_dict(t) for t in d["turns"]],
                summaries=view.summaries + 1,
            )
    if view is None:
        raise ValueError("no run_started event: these events do not begin a session")
    return view
