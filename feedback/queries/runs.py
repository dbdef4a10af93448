"""Learner runs: create, record each step's status and metrics, finish.

run = create_run(db, trigger="schedule", config={...})
update_run_step(db, run_id=run.id, name="train", status="running")
update_run_step(db, run_id=run.id, name="train", status="succeeded", metrics={"loss": 0.4})
finish_run(db, run_id=run.id, status="succeeded", adapter_version=3)
"""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from feedback.models import LearnerRun, utcnow

StepStatus = Literal["running", "succeeded", "failed", "skipped", "deferred"]
FINAL_RUN_STATUSES = ("succeeded", "failed", "skipped", "deferred")


class UnknownRun(LookupError):
    """No learner run with that id."""


def create_run(db: Session, *, trigger: str, config: dict[str, Any] | None = None) -> LearnerRun:
    """A `queued` run; the worker that picks it up calls `start_run`."""
    run = LearnerRun(trigger=trigger, config=config or {}, steps=[], status="queued")
    db.add(run)
    db.flush()
    return run


def get_run(db: Session, *, run_id: int) -> LearnerRun | None:
    return db.get(LearnerRun, run_id)


def list_runs(db: Session, *, limit: int = 50) -> list[LearnerRun]:
    """Newest first."""
    return list(db.scalars(select(LearnerRun).order_by(LearnerRun.id.desc()).limit(limit)))


def _locked_run(db: Session, run_id: int) -> LearnerRun:
    run = db.scalars(
        select(LearnerRun)
        .where(LearnerRun.id == run_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).one_or_none()
    if run is None:
        raise UnknownRun(run_id)
    return run


def start_run(db: Session, *, run_id: int) -> LearnerRun:
    run = _locked_run(db, run_id)
    run.status = "running"
    run.started_at = utcnow()
    db.flush()
    return run


def update_run_step(
    db: Session,
    *,
    run_id: int,
    name: str,
    status: StepStatus,
    metrics: dict[str, Any] | None = None,
) -> LearnerRun:
    """Add step `name` or update it in place; metrics are merged into what it had."""
    run = _locked_run(db, run_id)
    now = utcnow().isoformat()
    steps = [dict(step) for step in run.steps]  # a new list: JSON columns track reassignment
    step = next((s for s in steps if s["name"] == name), None)
    if step is None:
        step = {"name": name, "status": status, "started": now, "finished": None, "metrics": {}}
        steps.append(step)
    step["status"] = status
    step["metrics"] = {**step.get("metrics", {}), **(metrics or {})}
    if status != "running":
        step["finished"] = now
    run.steps = steps
    db.flush()
    return run


def set_run_dataset(db: Session, *, run_id: int, dataset: dict[str, Any]) -> LearnerRun:
    """Record what the run trains on (outcome id range, counts, synthetic task ids)."""
    run = _locked_run(db, run_id)
    run.dataset = dataset
    db.flush()
    return run


def finish_run(
    db: Session,
    *,
    run_id: int,
    status: str,
    adapter_version: int | None = None,
    error: str | None = None,
) -> LearnerRun:
    if status not in FINAL_RUN_STATUSES:
        raise ValueError(f"finish_run status {status!r}: use one of {FINAL_RUN_STATUSES}")
    run = _locked_run(db, run_id)
    run.status = status
    run.adapter_version = adapter_version
    run.error = error
    run.finished_at = utcnow()
    db.flush()
    return run
