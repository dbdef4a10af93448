"""Task cycles in the admin API: held-out solve rates per adapter, and the trajectories.

    GET /v1/admin/tasks/solve-rates?limit=200   each task / mixed run's held-out evaluation:
                                               the serving adapter's and the candidate's rates
    GET /v1/admin/runs/{id}/rollouts           the run's rollouts (reward, terms, status)
    GET /v1/admin/rollouts/{rollout_id}        one trajectory: its model calls, and its
                                               session's events (messages, tool calls and
                                               results, summaries) in order

Same auth as admin.py. The solve rates come from the `evaluate` step's metrics of the newest
`limit` runs; rollouts from `task_rollouts` and `session_events` (feedback/queries). Tests:
tests/api/test_admin_tasks.py.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query
from pydantic import BaseModel, ConfigDict, Field

from agent_server.api.deps import DbDep, DbInt, DbText, require_admin
from feedback.queries import get_rollout, list_events, list_rollouts, list_runs

router = APIRouter(prefix="/v1/admin", tags=["admin"], dependencies=[Depends(require_admin)])

MAX_EVENTS = 2000
TASK_KINDS = frozenset({"tasks", "mixed"})


class SolveRates(BaseModel):
    run_id: int
    created_at: dt.datetime
    status: str
    serving_version: int | None = Field(
        description="The adapter evaluated as serving (null: base)."
    )
    serving: float | None = Field(description="Its held-out solve rate.")
    candidate: float | None = Field(description="The candidate's held-out solve rate.")
    accepted: bool | None = Field(description="The gate's decision.")
    adapter_version: int | None = Field(description="The version the candidate was published as.")
    evaluated: int = Field(description="Held-out rollouts per adapter.")


class RolloutOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: str
    run_id: int | None
    session_id: str | None
    instance_id: str
    kind: str
    difficulty: str
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
    created_at: dt.datetime


class CallOut(BaseModel):
    seq: int
    kind: str = Field(description="agent | summary")
    completion_tokens: int
    adapter: str | None
    finish_reason: str | None
    constrained: bool = Field(description="Decoded under the action JSON schema.")


class EventOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    seq: int
    kind: str
    role: str | None
    payload: dict[str, Any]


class RolloutDetail(RolloutOut):
    diff: str
    calls: list[CallOut]
    events: list[EventOut] = Field(description=f"The session's events, the first {MAX_EVENTS}.")


def _rate(report: Any) -> float | None:
    value = report.get("solve_rate") if isinstance(report, dict) else None
    return float(value) if isinstance(value, int | float) else None


@router.get("/tasks/solve-rates")
def solve_rates(db: DbDep, limit: int = Query(default=200, ge=1, le=1000)) -> list[SolveRates]:
    """Held-out solve rates of the newest task and mixed runs that evaluated, newest first."""
    out = []
    for run in list_runs(db, limit=limit):
        if (run.config or {}).get("kind") not in TASK_KINDS:
            continue
        evaluate = next((s for s in run.steps or [] if s.get("name") == "evaluate"), None)
        metrics = (evaluate or {}).get("metrics") or {}
        tasks = metrics.get("tasks", metrics)  # a mixed run nests the task gate's figures
        if "candidate" not in tasks:
            continue
        candidate = tasks.get("candidate") or {}
        out.append(SolveRates(
            run_id=run.id, created_at=run.created_at, status=run.status,
            serving_version=tasks.get("serving_version"), serving=_rate(tasks.get("serving")),
            candidate=_rate(candidate), accepted=tasks.get("accepted"),
            adapter_version=run.adapter_version, evaluated=int(candidate.get("rollouts") or 0),
        ))  # fmt: skip
    return out


@router.get("/runs/{run_id}/rollouts")
def run_rollouts(run_id: DbInt, db: DbDep) -> list[RolloutOut]:
    return [RolloutOut.model_validate(r) for r in list_rollouts(db, run_id=run_id)]


@router.get("/rollouts/{rollout_id}")
def rollout(rollout_id: DbText, db: DbDep) -> RolloutDetail:
    row = get_rollout(db, rollout_id=rollout_id)
    if row is None:
        raise HTTPException(404, detail=f"no rollout {rollout_id!r}")
    events: list[EventOut] = []
    if row.session_id is not None:
        found = list_events(db, session_id=row.session_id, limit=MAX_EVENTS)
        events = [EventOut.model_validate(e) for e in found]
    calls = [CallOut(seq=c.seq, kind=c.kind, completion_tokens=len(c.completion_token_ids),
                     adapter=c.adapter, finish_reason=c.finish_reason,
                     constrained=c.constrained) for c in row.calls]  # fmt: skip
    fields = RolloutOut.model_validate(row).model_dump()
    return RolloutDetail(**fields, diff=row.diff, calls=calls, events=events)
