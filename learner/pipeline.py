"""The learning cycle as plain functions that take a run id: collect -> train -> evaluate ->
publish -> deploy. Celery tasks (learner/tasks.py) call them; so does `apprentice learn`
(`run_cycle`, in the foreground, no broker), and so do the tests.

    ctx = Context(settings, sessionmaker)
    run_id = create_cycle(ctx, trigger="cli", overrides={"train": {"max_steps": 20}})
    run = run_cycle(ctx, run_id)

Every step is recorded on the `learner_runs` row (status, timing, metrics) and is safe to
run again (a redelivered message): a step that already succeeded returns its recorded
metrics; a step of a finished run does nothing; files are written under a temporary name
and renamed. What a step produces lives in `$APPRENTICE_HOME/learner/runs/run-N/`
(dataset.json, candidate/) and, once published, in `adapters/policy-vN/`.
Expected ends raise `RunSkipped` (too little data) or `StepFailed` (gate refused; bad
config); anything else is a bug or an outage, recorded by `fail_run`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from agent_server.models.deployments import deployment_backend, serving_adapter
from apprentice.settings import Settings
from feedback.db import transaction
from feedback.models import Adapter, LearnerRun
from feedback.queries import (
    active_deployment,
    create_run,
    finish_run,
    get_run,
    next_adapter_version,
    publish_adapter,
    set_run_dataset,
    start_run,
    update_run_step,
)
from learner.config import LearnerConfig
from learner.deploy import Deployer, deploy_version, make_deployer, record_failed_deployment

log = logging.getLogger(__name__)
STEPS = ("collect", "train", "evaluate", "publish", "deploy")
FINAL = ("succeeded", "failed", "skipped")
Progress = Callable[[str, dict[str, Any]], None]  # (step, what happened)


class StepFailed(Exception):
    """An expected failure; the run fails with this reason (and these metrics)."""

    def __init__(self, reason: str, metrics: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.metrics = metrics or {}


class RunSkipped(Exception):
    """Nothing to learn from yet: the run ends `skipped` with this reason."""


@dataclass
class Context:
    """What every step needs; one per worker process."""

    settings: Settings
    db: sessionmaker[Session]
    defaults: LearnerConfig = field(default_factory=LearnerConfig)
    deployer: Callable[[Settings, Any], Deployer] = make_deployer
    progress: Progress | None = None

    def run_dir(self, run_id: int) -> Path:
        return self.settings.home / "learner" / "runs" / f"run-{run_id}"

    def report(self, step: str, info: dict[str, Any]) -> None:
        if self.progress is not None:
            self.progress(step, info)

    @property
    def deployment_backend(self) -> str:
        return deployment_backend(self.settings.model_backend)


def create_cycle(ctx: Context, *, trigger: str, overrides: dict[str, Any] | None = None) -> int:
    """A queued run whose `config` is the full resolved LearnerConfig."""
    config = ctx.defaults.with_overrides(overrides)
    with transaction(ctx.db) as db:
        return create_run(db, trigger=trigger, config=config.model_dump(mode="json")).id


def scheduled_run(ctx: Context) -> int | None:
    """What the schedule does: a queued run when `learner_min_feedback` decisive outcomes
    arrived since the last successful run and no run is in progress; else None.

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
        fresh = new_outcome_count(
            db, after_outcome_id=training_cursor(db), settle_s=ctx.defaults.data.settle_s
        )
    if busy is not None or fresh < ctx.settings.learner_min_feedback:
        log.info("no cycle: run %s in progress, %s new outcomes", busy, fresh)
        return None
    return create_cycle(ctx, trigger="schedule")


def run_config(run: LearnerRun) -> LearnerConfig:
    """The run's config: its stored dict (full, or partial overrides from the admin API)
    over the defaults. A bad value raises pydantic's ValidationError naming the field."""
    return LearnerConfig().with_overrides(run.config or {})


def _begin(ctx: Context, run_id: int, name: str) -> tuple[LearnerConfig, dict[str, Any] | None]:
    """(config, recorded metrics if the step already succeeded); None config: run is over."""
    with transaction(ctx.db) as db:
        run = get_run(db, run_id=run_id)
        if run is None:
            raise StepFailed(f"no learner run {run_id}")
        done = next((s for s in run.steps if s["name"] == name), None)
        if done is not None and done["status"] == "succeeded":
            return run_config(run), dict(done.get("metrics") or {})
        if run.status in FINAL:
            return run_config(run), {"run_finished": run.status}
        if run.status == "queued":
            start_run(db, run_id=run_id)
            run.config = run_config(run).model_dump(mode="json")  # record what it ran with
        update_run_step(db, run_id=run_id, name=name, status="running")
        return run_config(run), None


def _step(
    ctx: Context, run_id: int, name: str, body: Callable[[LearnerConfig], dict[str, Any]]
) -> dict[str, Any]:
    config, recorded = _begin(ctx, run_id, name)
    if recorded is not None:
        return recorded  # a redelivery, or a step of a run that already ended
    ctx.report(name, {"status": "running"})
    metrics = body(config)
    with transaction(ctx.db) as db:
        update_run_step(db, run_id=run_id, name=name, status="succeeded", metrics=metrics)
    ctx.report(name, {"status": "succeeded", **metrics})
    return metrics


def _metrics_of(ctx: Context, run_id: int, name: str) -> dict[str, Any]:
    with transaction(ctx.db) as db:
        run = get_run(db, run_id=run_id)
        step = next((s for s in (run.steps if run else []) if s["name"] == name), None)
        return dict(step.get("metrics") or {}) if step else {}


# ---- the steps ------------------------------------------------------------------------------


def collect(ctx: Context, run_id: int) -> dict[str, Any]:
    def body(config: LearnerConfig) -> dict[str, Any]:
        from learner.data import collect_samples, ensure_split, training_cursor, write_snapshot

        timeout = ctx.settings.learner_visibility_timeout_s
        if config.train.max_seconds >= timeout:
            raise StepFailed(
                f"train.max_seconds={config.train.max_seconds} must be below the broker's "
                f"visibility timeout ({timeout} s), or a long train step is delivered twice: "
                "lower it or raise APPRENTICE_LEARNER_VISIBILITY_TIMEOUT_S"
            )
        with transaction(ctx.db) as db:
            cursor = training_cursor(db)
            samples, summary = collect_samples(
                db, config.data, tokenizer=_LazyTokenizer(ctx.settings.model_name),
                after_outcome_id=cursor,
            )  # fmt: skip
        samples = ensure_split(samples)
        train = [s for s in samples if not s.heldout]
        summary.update(train=len(train), heldout=len(samples) - len(train))
        with transaction(ctx.db) as db:
            set_run_dataset(db, run_id=run_id, dataset=summary)
        if len(samples) < config.data.min_samples:
            raise RunSkipped(f"{len(samples)} labelled samples, need {config.data.min_samples}")
        if not summary["desirable"] or not summary["undesirable"]:
            raise RunSkipped("needs both accepted and rejected suggestions to learn from")
        if not train or len(train) == len(samples):
            raise RunSkipped("too few samples for a training and a held-out split")
        write_snapshot(ctx.run_dir(run_id) / "dataset.json", samples)
        return summary

    return _step(ctx, run_id, "collect", body)


def train(ctx: Context, run_id: int) -> dict[str, Any]:
    def body(config: LearnerConfig) -> dict[str, Any]:
        from learner.data import read_snapshot
        from learner.train import load_base, make_policy, save_adapter, train_policy

        samples = [s for s in read_snapshot(ctx.run_dir(run_id) / "dataset.json") if not s.heldout]
        with transaction(ctx.db) as db:
            parent_version, parent_dir = serving_adapter(db, backend=ctx.deployment_backend)
        policy, used = make_policy(
            load_base(ctx.settings.model_name), config.train, parent_dir=parent_dir
        )

        def progress(step: int, total: int, loss: float) -> None:
            ctx.report("train", {"status": "progress", "step": step, "total": total, "loss": loss})

        result = train_policy(policy, samples, config.train, progress=progress)
        result.parent_used = used
        final = ctx.run_dir(run_id) / "candidate"
        tmp = final.with_name(f".candidate-{uuid.uuid4().hex[:8]}")
        save_adapter(policy, tmp)
        shutil.rmtree(final, ignore_errors=True)  # a complete one from an earlier attempt
        tmp.rename(final)
        return {**result.metrics(), "parent_version": parent_version if used else None}

    return _step(ctx, run_id, "train", body)


def evaluate(ctx: Context, run_id: int) -> dict[str, Any]:
    def body(config: LearnerConfig) -> dict[str, Any]:
        from learner.data import read_snapshot
        from learner.evaluate import adapter_is_finite, gate, score_adapters

        heldout = [s for s in read_snapshot(ctx.run_dir(run_id) / "dataset.json") if s.heldout]
        candidate = ctx.run_dir(run_id) / "candidate"
        with transaction(ctx.db) as db:
            serving_version, serving_dir = serving_adapter(db, backend=ctx.deployment_backend)
        finite = adapter_is_finite(candidate)
        scores = score_adapters(
            ctx.settings.model_name, heldout,
            {"candidate": candidate, "serving": serving_dir}, config.train,
        )  # fmt: skip
        decision = gate(scores["candidate"], scores["serving"], config.gate, finite=finite)
        metrics = {
            "candidate": scores["candidate"].as_dict(),
            "serving": scores["serving"].as_dict(),
            "serving_version": serving_version,
            "finite": finite,
            "accepted": decision.accepted,
            "reasons": decision.reasons,
        }
        if not decision.accepted:
            raise StepFailed("gate refused the adapter: " + "; ".join(decision.reasons), metrics)
        return metrics

    return _step(ctx, run_id, "evaluate", body)


def publish(ctx: Context, run_id: int) -> dict[str, Any]:
    def body(config: LearnerConfig) -> dict[str, Any]:
        from learner.publish import VersionTaken, publish_files, sweep_temporary

        adapters_dir = ctx.settings.adapters_dir
        with transaction(ctx.db) as db:
            mine = db.scalars(select(Adapter).where(Adapter.run_id == run_id)).first()
            if mine is not None:  # recorded before a crash, the step not marked yet
                return {"version": mine.version, "name": mine.name, "path": mine.path}
            version = next_adapter_version(db)
        sweep_temporary(adapters_dir)
        while True:
            try:
                folder = publish_files(
                    ctx.run_dir(run_id) / "candidate", adapters_dir, version=version,
                    run_id=run_id,
                )  # fmt: skip
                break
            except VersionTaken:
                version += 1  # another run's folder; its row may not be written yet
        evaluation = _metrics_of(ctx, run_id, "evaluate")
        trained = _metrics_of(ctx, run_id, "train")
        with transaction(ctx.db) as db:
            row = publish_adapter(
                db, version=version, path=str(folder.resolve()),
                base_model=ctx.settings.model_name, parent_version=trained.get("parent_version"),
                metrics=evaluation.get("candidate", {}), run_id=run_id,
            )  # fmt: skip
            return {"version": row.version, "name": row.name, "path": row.path}

    return _step(ctx, run_id, "publish", body)


def deploy(ctx: Context, run_id: int) -> dict[str, Any]:
    def body(config: LearnerConfig) -> dict[str, Any]:
        published = _metrics_of(ctx, run_id, "publish")
        version, path = int(published["version"]), Path(published["path"])

        async def go() -> dict[str, Any]:
            deployer = ctx.deployer(ctx.settings, config.deploy)
            try:
                with transaction(ctx.db) as db:
                    active = active_deployment(db, backend=deployer.backend)
                    if active is not None and active.adapter_version == version:
                        return {"version": version, "deployment_id": active.id, "already": True}
                row, details = await deploy_version(
                    ctx.db, deployer, version=version, path=path, reason=f"learner run {run_id}"
                )
                return {"version": version, "deployment_id": row.id,
                        "backend": deployer.backend, **details}  # fmt: skip
            finally:
                await deployer.aclose()

        return asyncio.run(go())

    metrics = _step(ctx, run_id, "deploy", body)
    with transaction(ctx.db) as db:
        run = get_run(db, run_id=run_id)
        if run is not None and run.status not in FINAL:
            finish_run(db, run_id=run_id, status="succeeded", adapter_version=metrics["version"])
    return metrics


STEP_FUNCTIONS: dict[str, Callable[[Context, int], dict[str, Any]]] = {
    "collect": collect, "train": train, "evaluate": evaluate, "publish": publish,
    "deploy": deploy,
}  # fmt: skip


# ---- ends of a run ----------------------------------------------------------------------------


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


def skip_run(ctx: Context, run_id: int, step: str, reason: str) -> None:
    with transaction(ctx.db) as db:
        run = get_run(db, run_id=run_id)
        if run is None or run.status in FINAL:
            return
        update_run_step(db, run_id=run_id, name=step, status="skipped", metrics={"reason": reason})
        finish_run(db, run_id=run_id, status="skipped", error=reason)
    ctx.report(step, {"status": "skipped", "reason": reason})


def run_cycle(ctx: Context, run_id: int) -> LearnerRun:
    """All steps in this process, in order (`apprentice learn`); returns the finished run."""
    for name in STEPS:
        try:
            STEP_FUNCTIONS[name](ctx, run_id)
        except RunSkipped as exc:
            skip_run(ctx, run_id, name, str(exc))
            break
        except StepFailed as exc:
            fail_run(ctx, run_id, name, str(exc), exc.metrics)
            break
        except Exception as exc:
            fail_run(ctx, run_id, name, f"{type(exc).__name__}: {exc}")
            break
    with transaction(ctx.db) as db:
        run = get_run(db, run_id=run_id)
        assert run is not None
        return run


class _LazyTokenizer:
    """Loads the model's tokenizer only if a suggestion lacks its prompt token ids."""

    def __init__(self, model_dir: str) -> None:
        self.model_dir = model_dir
        self._tok: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._tok is None:
            from transformers import AutoTokenizer

            self._tok = AutoTokenizer.from_pretrained(self.model_dir)
        return getattr(self._tok, name)
