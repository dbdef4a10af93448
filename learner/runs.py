"""A learner run's bookkeeping: the Context steps share, creating a run, starting and
recording a step, failing or skipping a run, and the schedule's decision.

    ctx = Context(settings, sessionmaker)
    run_id = create_cycle(ctx, trigger="cli", overrides={"train": {"max_steps": 20}})
    metrics = recorded_step(ctx, run_id, "train", body)   # body(config) -> metrics

`recorded_step` makes every step safe to run again (a redelivered message): a step that
already succeeded returns its recorded metrics, a step of a finished run does nothing. It
also moves the run's files through the artifact store (learner/storage.py): pulled into
`ctx.run_dir(run_id)` before the step, pushed after it, so the next step may run on another
host (nothing to move with the default local store).
learner/pipeline.py holds the steps themselves. Nothing to run.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from agent_server.models.base import ModelBackend
from agent_server.models.deployments import deployment_backend, serving_record
from agent_server.models.factory import build_backend
from feedback.db import transaction
from feedback.models import LearnerRun
from feedback.queries import create_run, finish_run, get_run, start_run, update_run_step
from ground.settings import Settings
from learner.config import LearnerConfig
from learner.deploy import Deployer, make_deployer, record_failed_deployment
from learner.memory import PeakRss
from learner.storage import ArtifactStore, make_store

log = logging.getLogger(__name__)
FINAL = ("succeeded", "failed", "skipped", "deferred")
Progress = Callable[[str, dict[str, Any]], None]  # (step, what happened)


class StepFailed(Exception):
    """An expected failure; the run fails with this reason (and these metrics)."""

    def __init__(self, reason: str, metrics: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.metrics = metrics or {}


class RunSkipped(Exception):
    """Nothing to learn from yet: the run ends `skipped` with this reason."""


class RunDeferred(RunSkipped):
    """Too little evidence to decide yet: the run ends `deferred` with this reason (and these
    metrics), deploys nothing and keeps its feedback for the next cycle."""

    def __init__(self, reason: str, metrics: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.metrics = metrics or {}


@dataclass
class Context:
    """What every step needs; one per worker process."""

    settings: Settings
    db: sessionmaker[Session]
    defaults: LearnerConfig | None = None  # None: learner_defaults(settings)
    deployer: Callable[[Settings, Any], Deployer] = make_deployer
    backend: Callable[[Settings], ModelBackend] = build_backend  # what task rollouts run on
    progress: Progress | None = None

    def __post_init__(self) -> None:
        if self.defaults is None:
            self.defaults = learner_defaults(self.settings)

    @property
    def config(self) -> LearnerConfig:
        """The learner's settings for every cycle (`defaults`, never None after init)."""
        assert self.defaults is not None
        return self.defaults

    @functools.cached_property
    def artifacts(self) -> ArtifactStore:
        """The store `settings.artifacts_url` names (made when a step first needs it)."""
        return make_store(self.settings)

    def run_dir(self, run_id: int) -> Path:
        """The run's working folder on this host (the stored folder itself when local)."""
        return self.settings.home / run_key(run_id)

    def report(self, step: str, info: dict[str, Any]) -> None:
        if self.progress is not None:
            self.progress(step, info)

    @property
    def deployment_backend(self) -> str:
        return deployment_backend(self.settings.model_backend)

    def adapter_folder(self, version: int, recorded: str) -> Path:
        """Published `version` (its `adapters.path`) as a folder on this host."""
        from learner.publish import fetch_adapter

        return fetch_adapter(self.artifacts, version=version, recorded=recorded,
                             adapters_dir=self.settings.adapters_dir)  # fmt: skip

    def serving_adapter(self) -> tuple[int | None, Path | None]:
        """(version, local folder) of the adapter now serving; (None, None): the base model.
        The folder is None if the version has no adapter row."""
        with transaction(self.db) as db:
            version, recorded = serving_record(db, backend=self.deployment_backend)
        if version is None or recorded is None:
            return version, None
        return version, self.adapter_folder(version, recorded)


def learner_defaults(settings: Settings) -> LearnerConfig:
    """The built-in defaults with `settings.learner` (config.toml's `[learner]` tables or
    APPRENTICE_LEARNER) merged in. A bad value raises a ValueError that names the field."""
    try:
        return LearnerConfig().with_overrides(settings.learner)
    except ValidationError as exc:
        errors = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'learner'}: {e['msg']}"
                           f" (got {e['input']!r})" for e in exc.errors())  # fmt: skip
        raise ValueError(f"the learner settings ([learner] in config.toml, or "
                         f"APPRENTICE_LEARNER) are not valid: {errors}") from None  # fmt: skip


def run_key(run_id: int) -> str:
    """The run's files in the artifact store (and under $APPRENTICE_HOME)."""
    return f"learner/runs/run-{run_id}"


def create_cycle(ctx: Context, *, trigger: str, overrides: dict[str, Any] | None = None) -> int:
    """A queued run whose `config` is the full resolved LearnerConfig."""
    config = ctx.config.with_overrides(overrides)
    with transaction(ctx.db) as db:
        return create_run(db, trigger=trigger, config=config.model_dump(mode="json")).id


def scheduled_run(ctx: Context) -> int | None:
    """What the schedule does: a queued run when `learner_min_feedback` decisive outcomes
    arrived since the last successful or deferred run and no run is in progress; with fewer,
    a task cycle on `learner_task_repo` when it is set; else None.

    A run still queued or running after 5 visibility timeouts is taken for dead (its worker
    was killed on a broker that does not redeliver) and no longer blocks the schedule.
    """
    from learner.data import new_outcome_count, training_cursor

    window = 5 * ctx.settings.learner_visibility_timeout_s
    recent = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=window)
    with transaction(ctx.db) as db:
        busy = db.scalars(
            select(LearnerRun.id).where(
                LearnerRun.status.in_(("queued", "running")), LearnerRun.created_at > recent
            )
        ).first()
        seen = training_cursor(db, ("succeeded", "deferred"))  # a deferral waits for more
        fresh = new_outcome_count(db, after_outcome_id=seen, settle_s=ctx.config.data.settle_s)
    if (
        busy is None
        and fresh < ctx.settings.learner_min_feedback
        and ctx.settings.learner_task_repo
    ):
        log.info("%s new outcomes: a task cycle on %s", fresh, ctx.settings.learner_task_repo)
        tasks = {"kind": "tasks", "tasks": {"repo": str(ctx.settings.learner_task_repo)}}
        return create_cycle(ctx, trigger="schedule", overrides=tasks)
    if busy is not None or fresh < ctx.settings.learner_min_feedback:
        log.info("no cycle: run %s in progress, %s new outcomes", busy, fresh)
        return None
    return create_cycle(ctx, trigger="schedule")


def run_config(run: LearnerRun, defaults: LearnerConfig | None = None) -> LearnerConfig:
    """The run's config: its stored dict (full, or partial overrides from the admin API)
    over `defaults` (the learner settings; None: the built-in defaults). A bad value raises
    pydantic's ValidationError naming the field."""
    return (defaults or LearnerConfig()).with_overrides(_recorded(run.config or {}))


def _recorded(config: dict[str, Any]) -> dict[str, Any]:
    """A stored config as today's LearnerConfig reads it: runs recorded before the one update
    loop (learner/update.py) stored `tasks.update.lr` and `.max_steps`, which are gone (a new
    override naming them is an error that says where they went)."""
    update = (config.get("tasks") or {}).get("update")
    if not isinstance(update, dict) or not {"lr", "max_steps"} & update.keys():
        return config
    kept = {k: v for k, v in update.items() if k not in ("lr", "max_steps")}
    return {**config, "tasks": {**config["tasks"], "update": kept}}


def _begin(ctx: Context, run_id: int, name: str) -> tuple[LearnerConfig, dict[str, Any] | None]:
    """(config, None) for a step to run now; (config, metrics) for one to skip: it already
    succeeded (its metrics), or the run is over ({"run_finished": status})."""
    with transaction(ctx.db) as db:
        run = get_run(db, run_id=run_id)
        if run is None:
            raise StepFailed(f"no learner run {run_id}")
        done = next((s for s in run.steps if s["name"] == name), None)
        config = run_config(run, ctx.config)
        if done is not None and done["status"] == "succeeded":
            return config, dict(done.get("metrics") or {})
        if run.status in FINAL:
            return config, {"run_finished": run.status}
        if run.status == "queued":
            start_run(db, run_id=run_id)
            run.config = config.model_dump(mode="json")  # record what it ran with
        update_run_step(db, run_id=run_id, name=name, status="running")
        return config, None


def recorded_step(
    ctx: Context, run_id: int, name: str, body: Callable[[LearnerConfig], dict[str, Any]]
) -> dict[str, Any]:
    config, recorded = _begin(ctx, run_id, name)
    if recorded is not None:
        return recorded  # a redelivery, or a step of a run that already ended
    ctx.report(name, {"status": "running"})
    ctx.artifacts.pull(run_key(run_id), ctx.run_dir(run_id))
    with PeakRss(every=0.25) as rss:  # every step's memory, on the run (and at /metrics)
        metrics = body(config)
    metrics = {**metrics, "step_peak_rss_gb": round(rss.peak_gb, 3)}
    ctx.artifacts.push(run_key(run_id), ctx.run_dir(run_id))
    with transaction(ctx.db) as db:
        update_run_step(db, run_id=run_id, name=name, status="succeeded", metrics=metrics)
    ctx.report(name, {"status": "succeeded", **metrics})
    return metrics


def step_metrics(ctx: Context, run_id: int, name: str) -> dict[str, Any]:
    with transaction(ctx.db) as db:
        run = get_run(db, run_id=run_id)
        step = next((s for s in (run.steps if run else []) if s["name"] == name), None)
        return dict(step.get("metrics") or {}) if step else {}


def fail_run(ctx: Context, run_id: int, step: str, reason: str,
             metrics: dict[str, Any] | None = None) -> None:  # fmt: skip
    """Record the step and the run as failed; a failed deploy also gets a `failed` row."""
    with transaction(ctx.db) as db:
        run = get_run(db, run_id=run_id)
        if run is None or run.status in FINAL:
            return
        update_run_step(db, run_id=run_id, name=step, status="failed",
                        metrics={**(metrics or {}), "error": reason[:2000]})  # fmt: skip
        published = next((s for s in run.steps if s["name"] == "publish"), None)
        version = (published or {}).get("metrics", {}).get("version")
        finish_run(db, run_id=run_id, status="failed", adapter_version=version,
                   error=f"{step}: {reason}"[:4000])  # fmt: skip
    if step == "deploy":
        record_failed_deployment(ctx.db, backend=ctx.deployment_backend, version=version,
                                 reason=f"learner run {run_id}: {reason}")  # fmt: skip
    ctx.report(step, {"status": "failed", "error": reason})


def skip_run(ctx: Context, run_id: int, step: str, reason: str | RunSkipped) -> None:
    """End the run `skipped` (nothing to learn from), or `deferred` for a RunDeferred (too
    little evidence to decide: its metrics say what the gate saw)."""
    deferred = isinstance(reason, RunDeferred)
    status = "deferred" if deferred else "skipped"
    metrics = {**reason.metrics, "reason": str(reason)} if deferred else {"reason": str(reason)}
    with transaction(ctx.db) as db:
        run = get_run(db, run_id=run_id)
        if run is None or run.status in FINAL:
            return
        update_run_step(db, run_id=run_id, name=step, status=status, metrics=metrics)
        finish_run(db, run_id=run_id, status=status, error=str(reason))
    ctx.report(step, {"status": status, "reason": str(reason)})


def save_candidate(ctx: Context, run_id: int, policy: Any) -> None:
    """The trained adapter as run-N/candidate, whole or not at all (a temporary name)."""
    from learner.train import save_whole

    save_whole(policy, ctx.run_dir(run_id) / "candidate")
