"""Rollouts (`task_rollouts`) and their model calls (`rollout_calls`): written and read here.

    rid = store_rollout(db, run_id=7, session_id=sid, instance_id="calc__revert-0-0", ...,
                        calls=[NewCall("agent", prompt_ids, ids, logprobs, constrained=True)])
    rollouts_with_calls(db, run_id=7)           # oldest first, each with its calls in order
    rollouts_of(db, run_ids=[7], instance_ids=ids, adapter="policy-v3")   # calls included
    solved_per_task(db, run_ids=[7, 9], instance_ids=ids, adapter=None)  # {id: [solved, n]}
    delete_rollouts(db, run_ids=[7], instance_ids=ids, adapter=None)     # a retry's leftovers

Plain data in and out: a caller hands in `NewCall`s (learner/synth/rollout.py makes them of the
agent's recorded calls) and reads back frozen `StoredRollout`s and `StoredCall`s, detached
from the session. A *scope* (`run_ids`, `instance_ids`, `adapter`) is the rollouts of these
runs, of these tasks, by this adapter (None: the base model).

**A rollout's model calls are recorded once, here.** `rollout_calls` is the complete, ordered
record of every model call of a rollout, agent steps and self-summaries alike (`seq` 1, 2,
...), with the exact prompt and completion ids, the behaviour logprobs, the adapter that
served it, and whether it was decoded under the action grammar (`constrained`); the learner
replays exactly that. The rollout's session keeps its events (the trajectory viewer reads
them) but gets no `suggestions` rows: those hold the completions behind edit proposals, a
subset of the calls kept for the outcomes people give, and a rollout never gets one. Writing
them too stored the same call twice in two shapes, and counted the learner's edits among
people's suggestions (learner/synth/rollout.py's `RolloutSink` leaves them out).

`constrained`: both backends log a call decoded under a JSON schema with the logprobs of the
masked distribution (agent_server/models/decoding.py), which the trainer does not reproduce;
learner/grpo.py leaves such calls out of the off-policy weight. Calls stored before the
column existed read as unconstrained. Tested in tests/feedback/test_rollout_queries.py.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, selectinload

from feedback.models import RolloutCall, RolloutCallKind, TaskRollout

MAX_MESSAGE_CHARS = 10_000  # a rollout's message (a crash's traceback) is cut to this


@dataclass(frozen=True)
class NewCall:
    """One model call to store with its rollout; its place in the list is its `seq`."""

    kind: RolloutCallKind  # "agent" | "summary"
    prompt_token_ids: list[int] | None
    completion_token_ids: list[int]
    logprobs: list[float]  # behaviour logprobs, one per completion id
    adapter: str | None = None  # None: the base model
    finish_reason: str | None = None
    constrained: bool = False  # decoded under a JSON schema (the action grammar)


@dataclass(frozen=True)
class StoredCall:
    """A stored call of a rollout, as `rollout_calls` holds it."""

    seq: int
    kind: str
    prompt_token_ids: list[int] | None
    completion_token_ids: list[int]
    logprobs: list[float]
    adapter: str | None
    finish_reason: str | None
    constrained: bool


@dataclass(frozen=True)
class StoredRollout:
    """A `task_rollouts` row; `calls` in order, empty where the reader leaves them out."""

    id: str
    run_id: int | None
    session_id: str | None
    instance_id: str
    kind: str
    difficulty: str
    statement: str
    model: str
    adapter: str | None
    status: str
    message: str | None
    reward: float
    reward_terms: dict[str, Any]
    truncated: bool
    steps: int
    tokens: int
    summaries: int
    wall_s: float
    diff: str
    created_at: dt.datetime
    calls: tuple[StoredCall, ...] = ()


_ROLLOUT_FIELDS = tuple(f.name for f in fields(StoredRollout) if f.name != "calls")
_CALL_FIELDS = tuple(f.name for f in fields(StoredCall))


def store_rollout(
    db: Session,
    *,
    run_id: int | None,
    session_id: str | None,
    instance_id: str,
    kind: str,
    difficulty: str,
    statement: str,
    model: str,
    adapter: str | None,
    status: str,
    message: str | None,
    reward: float,
    reward_terms: dict[str, Any],
    truncated: bool,
    steps: int,
    tokens: int,
    summaries: int,
    wall_s: float,
    diff: str,
    calls: Iterable[NewCall] = (),
) -> str:
    """One task_rollouts row and its rollout_calls (seq 1, 2, ... in the order given); its id."""
    row = TaskRollout(
        run_id=run_id, session_id=session_id, instance_id=instance_id, kind=kind,
        difficulty=difficulty, statement=statement, model=model, adapter=adapter,
        status=status, message=None if message is None else message[:MAX_MESSAGE_CHARS],
        reward=reward, reward_terms=reward_terms, truncated=truncated, steps=steps,
        tokens=tokens, summaries=summaries, wall_s=wall_s, diff=diff,
    )  # fmt: skip
    for seq, call in enumerate(calls, 1):
        row.calls.append(RolloutCall(
            seq=seq, kind=call.kind, prompt_token_ids=call.prompt_token_ids,
            completion_token_ids=list(call.completion_token_ids), logprobs=list(call.logprobs),
            adapter=call.adapter, finish_reason=call.finish_reason, constrained=call.constrained,
        ))  # fmt: skip
    db.add(row)
    db.flush()
    return row.id


def _stored(row: TaskRollout, with_calls: bool) -> StoredRollout:
    calls = tuple(
        StoredCall(**{n: getattr(c, n) for n in _CALL_FIELDS}) for c in row.calls
    ) if with_calls else ()  # fmt: skip
    return StoredRollout(**{n: getattr(row, n) for n in _ROLLOUT_FIELDS}, calls=calls)


def _read(db: Session, query: Any, with_calls: bool = True) -> list[StoredRollout]:
    if with_calls:
        query = query.options(selectinload(TaskRollout.calls))
    return [_stored(row, with_calls) for row in db.scalars(query)]


def _oldest_first(query: Any) -> Any:
    return query.order_by(TaskRollout.created_at, TaskRollout.id)


def rollouts_with_calls(
    db: Session, *, run_id: int | None = None, ids: Sequence[str] | None = None
) -> list[StoredRollout]:
    """The rollouts of run `run_id`, or with these ids (both: both hold; neither: every
    rollout), oldest first, each with its calls in order: what the learner's update reads."""
    query = select(TaskRollout)
    if run_id is not None:
        query = query.where(TaskRollout.run_id == run_id)
    if ids is not None:
        query = query.where(TaskRollout.id.in_(list(ids)))
    return _read(db, _oldest_first(query))


def get_rollout(db: Session, *, rollout_id: str) -> StoredRollout | None:
    """One rollout with its calls in order; None when there is no such rollout."""
    found = _read(db, select(TaskRollout).where(TaskRollout.id == rollout_id))
    return found[0] if found else None


def list_rollouts(db: Session, *, run_id: int) -> list[StoredRollout]:
    """The rollouts of run `run_id`, oldest first, without their calls."""
    query = select(TaskRollout).where(TaskRollout.run_id == run_id)
    return _read(db, _oldest_first(query), with_calls=False)


def _scope(run_ids: Sequence[int], instance_ids: Sequence[str], adapter: str | None) -> Any:
    return (
        TaskRollout.run_id.in_(list(run_ids)),
        TaskRollout.instance_id.in_(list(instance_ids)),
        TaskRollout.adapter.is_(None) if adapter is None else TaskRollout.adapter == adapter,
    )


def rollouts_of(
    db: Session, *, run_ids: Sequence[int], instance_ids: Sequence[str], adapter: str | None
) -> list[StoredRollout]:
    """The scope's rollouts (module docstring), oldest first, each with its calls in order."""
    query = select(TaskRollout).where(*_scope(run_ids, instance_ids, adapter))
    return _read(db, _oldest_first(query))


def rollout_models(
    db: Session, *, run_ids: Sequence[int], instance_ids: Sequence[str], adapter: str | None
) -> list[str]:
    """The models the scope's rollouts ran on, sorted: one name when they measure one model."""
    query = select(TaskRollout.model).where(*_scope(run_ids, instance_ids, adapter)).distinct()
    return sorted(db.scalars(query).all())


def solved_per_task(
    db: Session, *, run_ids: Sequence[int], instance_ids: Sequence[str], adapter: str | None
) -> dict[str, list[int]]:
    """Per task of `instance_ids` (every one, none rolled out too), [solved, rollouts] of the
    scope; solved: the reward terms say `solved`."""
    out = {i: [0, 0] for i in instance_ids}
    query = select(TaskRollout.instance_id, TaskRollout.reward_terms)
    for instance_id, terms in db.execute(query.where(*_scope(run_ids, instance_ids, adapter))):
        out[instance_id][0] += bool((terms or {}).get("solved"))
        out[instance_id][1] += 1
    return out


def delete_rollouts(
    db: Session, *, run_ids: Sequence[int], instance_ids: Sequence[str], adapter: str | None
) -> int:
    """Delete the scope's rollouts and their calls; how many rollouts. (Their sessions stay:
    a session is the trajectory's record, whatever became of the rollout.)"""
    ids = list(db.scalars(select(TaskRollout.id).where(*_scope(run_ids, instance_ids, adapter))))
    if ids:
        db.execute(delete(RolloutCall).where(RolloutCall.rollout_id.in_(ids)))
        db.execute(delete(TaskRollout).where(TaskRollout.id.in_(ids)))
    db.flush()
    return len(ids)
