"""Learner runs: create, record each step's status and metrics, finish.

run = create_run(db, trigger="schedule", config={...})
update_run_step(db, run_id=run.id, name="train", status="running")
update_run_step(db, run_id=run.id, name="train", status="succeeded", metrics={"loss": 0.4})
finish_run(db, run_id=run.id, status="succeeded", adapter_version=3)

A step running in a learner worker beats: `beat_run_step` stamps its entry's `heartbeat`
every HEARTBEAT_S (learner/jobs.py); `reap_dead_runs` fails a running run whose running
step stopped beating (the agent server calls it: agent_server/api/reaper.py). A step run in
the foreground (`apprentice learn`) never beats and is never reaped.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from feedback.models import LearnerRun, utcnow

StepStatus = Literal["running", "succeeded", "failed", "skipped", "deferred"]
FINAL_RUN_STATUSES = ("succeeded", "failed", "skipped", "deferred")
HEARTBEAT_S = 10.0  # how often a worker stamps the step it runs (learner/jobs.py)
SILENT_LIMIT_S = 60.0  # no stamp for this long: the worker is dead (where nothing redelivers)
HEARTBEAT_KEYS = ("heartbeat", "retry_at")  # what beat_run_step writes in a step's entry


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


def list_runs(db: Session, *, limit: int = 50, before: int | None = None) -> list[LearnerRun]:
    """Newest first; with `before`, only the runs with a smaller id."""
    query = select(LearnerRun)
    if before is not None:
        query = query.where(LearnerRun.id < before)
    return list(db.scalars(query.order_by(LearnerRun.id.desc()).limit(limit)))


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


def beat_run_step(
    db: Session, *, run_id: int, name: str, at: dt.datetime | None = None,
    retry_at: dt.datetime | None = None,
) -> bool:  # fmt: skip
    """Stamp step `name` of run `run_id` alive (`heartbeat`: `at`, default now), and with
    `retry_at` say when a retry waiting its countdown is due (it is not silent till then).
    True if stamped; False, writing nothing, unless the step is running in a running run."""
    run = _locked_run(db, run_id)
    steps = [dict(step) for step in run.steps]
    step = next((s for s in steps if s["name"] == name), None)
    if run.status != "running" or step is None or step["status"] != "running":
        return False
    step["heartbeat"] = (at or utcnow()).isoformat()
    if retry_at is not None:
        step["retry_at"] = retry_at.isoformat()
    run.steps = steps
    db.flush()
    return True


def silent_for(step: dict[str, Any], now: dt.datetime) -> float | None:
    """Seconds since running `step` was last heard of (its heartbeat, or the retry it waits
    for); None for a step that never beats (run in the foreground) or is not running."""
    if step.get("status") != "running" or not step.get("heartbeat"):
        return None
    last = max(dt.datetime.fromisoformat(step[key]) for key in HEARTBEAT_KEYS if step.get(key))
    return (now - last).total_seconds()


def _silent_step(run: LearnerRun, now: dt.datetime, limit_s: float) -> tuple[str, float] | None:
    for step in run.steps or []:
        silent = silent_for(step, now) if isinstance(step, dict) else None
        if silent is not None and silent > limit_s:
            return str(step["name"]), silent
    return None


def reap_dead_runs(
    db: Session, *, limit_s: float, hint: str = "", now: dt.datetime | None = None
) -> list[tuple[int, str, str]]:
    """Fail every running run whose running step has not beaten for more than `limit_s`
    seconds: the worker running it was killed or lost. The step and the run are failed as
    learner/runs.py `fail_run` does (a failed run is final: a step of it delivered again
    does nothing). Returns (run id, step, reason) of each. `hint` ends the reason."""
    now = now or utcnow()
    ids = db.scalars(select(LearnerRun.id).where(LearnerRun.status == "running")).all()
    reaped = []
    for run_id in ids:
        run = _locked_run(db, run_id)  # read again under the lock: it may have moved on
        silent = _silent_step(run, now, limit_s) if run.status == "running" else None
        if silent is None:
            continue
        name, seconds = silent
        reason = (f"the worker running step {name} stopped answering (no heartbeat for "
                  f"{seconds:.0f} s): it was killed or lost{hint}; start a worker and run "
                  "the cycle again")  # fmt: skip
        update_run_step(db, run_id=run_id, name=name, status="failed", metrics={"error": reason})
        published = next((s for s in run.steps if s["name"] == "publish"), None)
        version = (published or {}).get("metrics", {}).get("version")
        finish_run(db, run_id=run_id, status="failed", adapter_version=version,
                   error=f"{name}: {reason}"[:4000])  # fmt: skip
        reaped.append((run_id, name, reason))
    return reaped
