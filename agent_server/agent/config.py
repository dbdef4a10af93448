"""`AgentConfig` (how one agent runs) and `RunResult` (how a run ended, with its model calls).

    config = AgentConfig(mode="autonomous", step_limit=20, sampling=Sampling(max_tokens=256))

Both are plain frozen dataclasses: the API, the language server and the learner's rollouts
build an `AgentConfig` (agent_server/session/turns.py fits max_tokens to the model's window)
and read a `RunResult` back; `RunResult.calls` holds every model call of the run in order,
each a `RecordedCall` saying whether it was an agent step or a summary and whether a schema
constrained it (the learner's rollouts store them). A bad value raises a ValueError that
names the knob.
Run its tests: .venv/bin/python -m pytest tests/agent/test_loop_limits.py -q
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_server.agent import actions
from agent_server.agent import exceptions as ex
from agent_server.agent.tools import ToolConfig
from agent_server.models.base import Completion, Sampling, Usage


@dataclass(frozen=True)
class AgentConfig:
    mode: Literal["interactive", "autonomous"] = "interactive"
    """interactive: edits go to the Reviewer and commands need its approval; autonomous
    (learner rollouts, benches): edits apply directly and commands run."""
    step_limit: int = 50
    """Model steps per run (summaries do not count); a resumed run gets a fresh allowance."""
    time_limit_s: float | None = None
    """Wall-clock limit of one run in seconds; None = none."""
    max_format_errors: int = 3
    """Model-fixable errors in a row (malformed actions, tool errors) that end the run."""
    command_timeout_s: float = 60.0
    """Timeout of one run_command."""
    max_output_chars: int = 8000
    """Cap on one observation (file text, command output); head and tail are kept."""
    sampling: Sampling = field(default_factory=lambda: Sampling(max_tokens=512))
    """Sampling of agent steps; max_tokens must fit beside the context budget."""
    structured_actions: bool = True
    """Pass the action JSON schema (constrained decoding where the backend supports it)."""
    native_tools: bool = False
    """Offer the tools as native function specs instead of JSON text actions."""
    action_schema: dict[str, Any] | None = None
    """With structured_actions: the JSON schema actions are decoded under; None = any tool
    (actions.action_schema()). A narrower one (still an action parse_action reads) limits
    what a model can do, e.g. only an edit of a.py: a test of an edit on a model too small
    to choose one (tests/api/test_prompt_ids.py)."""
    context_budget_ratio: float = 0.8
    """Prompt tokens allowed, as a fraction of the context window: the default summarizer
    condenses above it (a summarizer passed in brings its own config)."""
    few_shot: bool = True
    """Show example turns of good JSON actions before the task (prompts.few_shot; not with
    native_tools). Small models copy an example's shape: SmolLM2-135M chose list_dir or
    search for "fix the bug in calc.py" without them, edit with them."""
    show_file_chars: int = 3000
    """Files the task names (calc.py, src/a.js) up to this many characters together are shown
    with the task, and a file this small is shown again after an edit applies (small models
    cannot be relied on to read first, or to see what their edit did); 0 = never."""

    def __post_init__(self) -> None:
        if self.mode not in ("interactive", "autonomous"):
            raise ValueError(f"mode must be 'interactive' or 'autonomous', got {self.mode!r}")
        if min(self.step_limit, self.max_format_errors) < 1:
            raise ValueError("step_limit and max_format_errors must be >= 1")
        if self.time_limit_s is not None and self.time_limit_s <= 0:
            raise ValueError(f"time_limit_s must be > 0 or None, got {self.time_limit_s}")
        if not 0.2 <= self.context_budget_ratio <= 0.95:
            raise ValueError(f"context_budget_ratio {self.context_budget_ratio} not in [0.2, 0.95]")
        if self.show_file_chars < 0:
            raise ValueError(f"show_file_chars must be >= 0, got {self.show_file_chars}")
        self.tool_config()  # validates those

    def tool_config(self) -> ToolConfig:
        return ToolConfig(
            self.mode, self.command_timeout_s, self.max_output_chars, self.show_file_chars
        )

    def decoding_schema(self) -> dict[str, Any] | None:
        """The schema of the model's action text; None: unconstrained (or native tools)."""
        if not self.structured_actions or self.native_tools:
            return None
        return self.action_schema or actions.action_schema()

    def room(self, context_window: int) -> int:
        """Tokens left for one completion beside the context budget of `context_window`."""
        return context_window - int(self.context_budget_ratio * context_window)


CallKind = Literal["agent", "summary"]


@dataclass(frozen=True)
class RecordedCall:
    """One model call of a run: an agent step ("agent") or a summary ("summary"), and
    whether it was decoded under a JSON schema (`constrained`: both backends then report
    the masked distribution's logprobs, agent_server/models/decoding.py)."""

    kind: CallKind
    completion: Completion
    constrained: bool = False


@dataclass(frozen=True)
class RunResult:
    status: ex.RunStatus
    message: str  # the final answer (finished) or why the run ended
    steps: int  # model steps of this run
    usage: Usage  # tokens of this run's model calls, summaries included
    model_calls: int
    calls: tuple[RecordedCall, ...] = ()  # every model call of this run, in order

    @classmethod
    def of(
        cls, status: ex.RunStatus, message: str, steps: int, calls: Sequence[RecordedCall]
    ) -> RunResult:
        """The result of a run whose model calls (summaries included) were `calls`."""
        prompt = sum(r.completion.usage.prompt_tokens for r in calls)
        usage = Usage(prompt, sum(r.completion.usage.completion_tokens for r in calls))
        return cls(status, message, steps, usage, len(calls), tuple(calls))
