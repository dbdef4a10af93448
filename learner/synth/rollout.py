"""One rollout: the product's own agent, in autonomous mode, on a task in a sealed sandbox.

    result = await run_rollout(task, backend, repo="/path/to/repo", adapter="policy-v3",
                               config=RolloutConfig(statement="vague"), db=sessionmaker)
    result.reward, result.terms, result.truncated, result.rollout_id

The agent is the one a person's session runs: `agent_server.session.turns.Turn` builds the
same `Agent` (loop, tools, edit applier, summarizer) with the config fitted to the model's
window, on the sandbox's `SandboxWorkspace` (sandbox.py), with the task's problem statement
(precise or vague) as the message, a step limit and a wall-clock budget (the loop's
`time_limit_s`, which also stops a hung command or model call; a backstop `wait_for` of
budget + grace stops a backend that ignores cancellation, recorded as "time_limit").
With a database (`db`), the trajectory's events go through production's recorder into a
`sessions` row (client "learner"), and the rollout is stored in `task_rollouts` with every
model call in `rollout_calls` (prompt and completion token ids, behaviour logprobs, adapter,
kind "agent" | "summary", whether decoded under the action schema, in order), through
feedback/queries/rollouts.py, which reads them back too. The calls are recorded there alone:
`RolloutSink` is production's `RecordingSink` less the `suggestions` rows (why: that module's
docstring). Grading restores the tests and runs them (Sandbox.grade); reward.py turns it into
the reward and its terms.
Tested in tests/learner/synth/test_rollout.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from sqlalchemy.orm import Session, sessionmaker

from agent_server.agent.config import AgentConfig, RecordedCall
from agent_server.agent.events import EditProposal, Event, InMemorySink
from agent_server.agent.summarizer import SummarizerConfig
from agent_server.models.base import Completion, Message, ModelBackend, Sampling
from agent_server.session.recorder import RecordingSink
from agent_server.session.store import Store
from agent_server.session.turns import Turn
from feedback import queries
from feedback.db import transaction
from learner.synth.records import STYLES, TaskRecord, starting_tree
from learner.synth.reward import RewardConfig, RewardInputs, reward_terms
from learner.synth.sandbox import Grade, Sandbox, SandboxConfig

GRACE_S = 30.0  # past the wall budget, the backstop cancels the run


@dataclass(frozen=True)
class RolloutConfig:
    statement: Literal["dictated", "located", "precise", "vague"] = "precise"  # statements.py
    step_limit: int = 30
    wall_s: float = 600.0  # the agent run's wall-clock budget (grading comes after)
    max_tokens: int = 1024  # per agent step; lowered to fit the model's window
    temperature: float = 0.7
    agent: AgentConfig = field(default_factory=AgentConfig)  # the other knobs of the loop
    summarizer: SummarizerConfig | None = None  # None: the agent's default summarizer
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    run_id: int | None = None  # the learner run this rollout belongs to (stored)

    def __post_init__(self) -> None:
        if self.statement not in STYLES:
            raise ValueError(f"statement must be one of {STYLES}, got {self.statement!r}")
        if self.step_limit < 1 or self.wall_s <= 0 or self.max_tokens < 1:
            raise ValueError("step_limit, wall_s and max_tokens must be positive")

    def agent_config(self) -> AgentConfig:
        sampling = dataclasses.replace(
            self.agent.sampling, max_tokens=self.max_tokens, temperature=self.temperature
        )
        return dataclasses.replace(
            self.agent, mode="autonomous", step_limit=self.step_limit,
            time_limit_s=self.wall_s, sampling=sampling,
        )  # fmt: skip


@dataclass(frozen=True)
class RolloutResult:
    instance_id: str
    kind: str
    difficulty: str
    statement: str
    model: str
    adapter: str | None
    status: str  # the agent run's status, or "crashed"
    message: str
    reward: float
    terms: dict[str, Any]
    truncated: bool
    steps: int
    tokens: int  # prompt + completion tokens of every call, summaries included
    summaries: int
    wall_s: float  # the whole rollout: sandbox, agent, grading
    diff: str
    outcomes: dict[str, str]
    calls: tuple[RecordedCall, ...] = ()
    rollout_id: str | None = None  # the task_rollouts row, when stored
    session_id: str | None = None  # the sessions row of the trajectory, when stored

    def summary(self) -> dict[str, Any]:
        """The JSON-able result without the calls and the diff."""
        skip = {"calls", "diff"}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in skip}  # fmt: skip


async def run_rollout(
    task: TaskRecord,
    backend: ModelBackend,
    *,
    files: Mapping[str, str] | None = None,
    repo: str | os.PathLike[str] | None = None,
    adapter: str | None = None,
    config: RolloutConfig | None = None,
    db: sessionmaker[Session] | None = None,
) -> RolloutResult:
    """Run the agent on `task` (its starting files given, or rebuilt from `repo`), grade
    it, score it and, with `db`, store it; see the module docstring."""
    cfg = config or RolloutConfig()
    if files is None:
        if repo is None:
            raise ValueError("run_rollout needs the task's starting files or its repo path")
        files = await asyncio.to_thread(starting_tree, task, repo)
    if adapter is not None and backend.adapter != adapter:
        backend.use_adapter(adapter)
    started = time.monotonic()
    box = await asyncio.to_thread(Sandbox, files, cfg.sandbox)
    try:
        sink, session_id = await _sink(db, task, str(box.root))
        text = task.statement(cfg.statement) or task.problem_statement
        turn = Turn(backend, box.workspace, cfg.agent_config(), cast(RolloutSink, sink),
                    summarizer=cfg.summarizer)  # fmt: skip
        calls: tuple[RecordedCall, ...] = ()
        try:
            run = await asyncio.wait_for(turn.run(text), cfg.wall_s + GRACE_S)
            status, message, steps, calls = run.status, run.message, run.steps, run.calls
        except TimeoutError:
            status, message, steps = "time_limit", f"stopped past {cfg.wall_s:g}s + grace", 0
        except Exception as exc:  # a bug in the loop or a tool: recorded, never fatal
            status, message, steps = "crashed", f"{type(exc).__name__}: {exc}", 0
        if session_id is not None and db is not None:
            await Store(db).set_session(session_id, status="closed")
        grade: Grade = await asyncio.to_thread(box.grade, task)
    finally:
        await asyncio.to_thread(box.close)
    events: list[Event] = sink.events
    inputs = RewardInputs(
        status=status, outcomes=grade.run.outcomes, fail_to_pass=task.FAIL_TO_PASS,
        pass_to_pass=task.PASS_TO_PASS, diff=grade.diff,
        completion_tokens=sum(c.completion.usage.completion_tokens for c in calls),
        tool_calls=sum(e.kind == "tool_call" for e in events),
        format_errors=sum(e.kind == "format_error" for e in events),
        tests_timed_out=grade.run.timed_out,
    )  # fmt: skip
    terms = reward_terms(inputs, cfg.reward) | {"reverted_test_paths": list(grade.reverted)}
    if grade.run.timed_out:
        message += f" | grading: tests ran past {cfg.sandbox.test_timeout_s:g}s and were killed"
    out = RolloutResult(
        task.instance_id, task.kind, task.difficulty, cfg.statement, backend.model_name,
        adapter if adapter is not None else backend.adapter, status, message,
        terms["reward"], terms, terms["truncated"], steps,
        sum(c.completion.usage.total_tokens for c in calls),
        sum(c.kind == "summary" for c in calls), round(time.monotonic() - started, 3),
        grade.diff, dict(grade.run.outcomes), calls, session_id=session_id,
    )  # fmt: skip
    if db is not None:
        rid = await asyncio.to_thread(store_rollout, db, out, cfg.run_id)
        out = dataclasses.replace(out, rollout_id=rid)
    return out


class RolloutSink(RecordingSink):
    """Production's recorder for a rollout's session: every event is stored (the trajectory
    viewer reads them), but no `suggestions` row. A rollout's model calls, the edits' among
    them, are recorded once, complete and in order, in `rollout_calls` (store_rollout); a
    suggestion row waits for a person's outcome, which a rollout never gets."""

    async def record_suggestion(
        self, completion: Completion, proposal: EditProposal, *, prompt: list[Message],
        sampling: Sampling,
    ) -> None:  # fmt: skip
        return None


async def _sink(
    db: sessionmaker[Session] | None, task: TaskRecord, root: str
) -> tuple[InMemorySink | RolloutSink, str | None]:
    """A RolloutSink on a new learner session (with a db), else in memory."""
    if db is None:
        return InMemorySink(), None
    store = Store(db)
    row = await store.create_session(
        mode="autonomous", title=f"rollout {task.instance_id}", workspace=root,
        client="learner", owner="learner-rollout",
    )  # fmt: skip
    return RolloutSink(store, row.id, []), row.id


def stored_calls(calls: Sequence[RecordedCall]) -> list[queries.NewCall]:
    """The agent's recorded calls as rollout_calls stores them."""
    return [queries.NewCall(
        call.kind, call.completion.prompt_token_ids, list(call.completion.token_ids),
        list(call.completion.logprobs), call.completion.adapter, call.completion.finish_reason,
        call.constrained,
    ) for call in calls]  # fmt: skip


def store_rollout(db: sessionmaker[Session], result: RolloutResult, run_id: int | None) -> str:
    """One task_rollouts row and its rollout_calls (seq 1, 2, ... in call order); its id."""
    fields = {f: getattr(result, f) for f in STORED}
    with transaction(db) as s:
        return queries.store_rollout(s, **fields, reward_terms=result.terms, run_id=run_id,
                                     calls=stored_calls(result.calls))  # fmt: skip


STORED = ("session_id", "instance_id", "kind", "difficulty", "statement", "model", "adapter",
          "status", "message", "reward", "truncated", "steps", "tokens", "summaries", "wall_s",
          "diff")  # fmt: skip  # the RolloutResult fields task_rollouts keeps as they are
