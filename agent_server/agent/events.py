"""The trajectory: events the agent loop emits, the sink that receives them, edit proposals.

Every run is a sequence of `Event`s (JSON-serializable: `Event.to_dict` / `Event.from_dict`).
They are what the API stores in the feedback database, what the learner reads (every model
`Completion` is in an `assistant` or `summary` event, with its token ids and logprobs), and
what a session is rebuilt from (`summarizer.rebuild_view`).

Kinds and their `data`:
  run_started      {"system", "task", "mode", "resumed"}
  assistant        {"message", "completion"}           one model reply (a step)
  tool_call        {"tool", "args", "thought", "plan"}  the parsed action
  format_error     {"error"}                            a malformed action (reflected)
  edit_proposed    {"proposal"}                         EditProposal.to_dict()
  edit_decision    {"proposal_id", "decision"}          EditDecision.to_dict()
  command_approval {"command", "approved"}
  observation      {"message", "files", "error"}        what goes back to the model
  summary          {"summary", "plan", "files", "turns", "completion", "prompt_tokens"}
  run_finished     {"status", "message", "steps"}

The `EventSink` is the recorder seam: `agent_server.session.recorder.RecordingSink` stores
into the feedback DB (for the API, the language server and rollouts alike); `InMemorySink`
is for tests and benches. `record_suggestion` is called with the completion that produced
an edit proposal, the exact prompt it was sampled from and the sampling, BEFORE any
reviewer sees the proposal.

Run its tests: .venv/bin/python -m pytest tests/agent/test_loop.py -q
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from agent_server.agent.edits.diff import Hunk
from agent_server.models.base import Completion, Message, Sampling, ToolCall, Usage
from feedback.vocab import DecisionKind

EventKind = Literal[
    "run_started",
    "assistant",
    "tool_call",
    "format_error",
    "edit_proposed",
    "edit_decision",
    "command_approval",
    "observation",
    "summary",
    "run_finished",
]


@dataclass(frozen=True)
class Event:
    kind: EventKind
    step: int  # the model step this belongs to (0 before the first call)
    data: dict[str, Any]  # JSON-serializable
    seq: int = 0  # position in the session, assigned by the loop; continues across resumes
    ts: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Event:
        return cls(kind=d["kind"], step=d["step"], data=d["data"], seq=d["seq"], ts=d["ts"])


def completion_to_dict(c: Completion) -> dict[str, Any]:
    return dataclasses.asdict(c)


def completion_from_dict(d: dict[str, Any]) -> Completion:
    return Completion(
        **{
            **d,
            "usage": Usage(**d["usage"]),
            "tool_calls": [ToolCall(**t) for t in d.get("tool_calls", [])],
        }
    )


@dataclass(frozen=True)
class EditProposal:
    """One proposed edit of one file, as the reviewer (the person) sees it."""

    id: str  # also the suggestion id in the feedback DB
    step: int
    path: str
    before: str  # file text before the edit ("" for a new file)
    after: str  # file text if every hunk is accepted
    diff: str  # unified diff before -> after
    hunks: list[Hunk]  # the diff split into hunks; a partial accept names them by index
    thought: str = ""  # the model's reason, shown beside the diff

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class EditDecision:
    """What the person did with a proposal. Build with accept() / reject() / partial()."""

    verdict: DecisionKind
    reason: str = ""  # for rejections: goes back to the model verbatim
    hunks: tuple[int, ...] = ()  # for partial accepts: indices into EditProposal.hunks

    def __post_init__(self) -> None:
        if self.verdict == "partially_accepted" and not self.hunks:
            raise ValueError("a partial accept must name at least one hunk index")
        if any(i < 0 for i in self.hunks):
            raise ValueError(f"hunk indices must be >= 0, got {self.hunks}")

    @classmethod
    def accept(cls) -> EditDecision:
        return cls("accepted")

    @classmethod
    def reject(cls, reason: str = "") -> EditDecision:
        return cls("rejected", reason=reason)

    @classmethod
    def partial(cls, hunks: list[int] | tuple[int, ...]) -> EditDecision:
        return cls("partially_accepted", hunks=tuple(hunks))

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reason": self.reason, "hunks": list(self.hunks)}


@runtime_checkable
class EventSink(Protocol):
    """Receives the trajectory. Implementations must not reorder calls."""

    async def emit(self, event: Event) -> None: ...

    async def record_suggestion(
        self,
        completion: Completion,
        proposal: EditProposal,
        *,
        prompt: list[Message],
        sampling: Sampling,
    ) -> None:
        """Persist the completion that produced `proposal` (before the person sees it),
        with the messages it was sampled from and how."""
        ...


class InMemorySink:
    """Keeps everything in lists; `log` interleaves events and suggestions in call order."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.suggestions: list[tuple[Completion, EditProposal]] = []
        self.prompts: list[tuple[list[Message], Sampling]] = []  # one per suggestion
        self.log: list[tuple[str, str]] = []  # ("event", kind) | ("suggestion", proposal id)

    async def emit(self, event: Event) -> None:
        self.events.append(event)
        self.log.append(("event", event.kind))

    async def record_suggestion(
        self,
        completion: Completion,
        proposal: EditProposal,
        *,
        prompt: list[Message],
        sampling: Sampling,
    ) -> None:
        self.suggestions.append((completion, proposal))
        self.prompts.append((prompt, sampling))
        self.log.append(("suggestion", proposal.id))

    def of_kind(self, kind: EventKind) -> list[Event]:
        return [e for e in self.events if e.kind == kind]
