"""The learning cycle as plain functions that take a run id: collect -> train -> evaluate ->
publish -> deploy for people's feedback; tasks -> rollouts -> train -> evaluate -> publish ->
deploy for a task cycle (`kind: tasks`; the agent's own rollouts of mined tasks, trained on
with learner/grpo.py, gated on held-out tasks: learner/taskcycle.py). Celery tasks
(learner/jobs.py) call them; so does `apprentice learn` (`run_cycle`, in the foreground, no
broker), and so do the tests.

    ctx = Context(settings, sessionmaker)
    run_id = create_cycle(ctx, trigger="cli", overrides={"train": {"max_steps": 20}})
    run = run_cycle(ctx, run_id)

Every step is recorded on the `learner_runs` row (status, timing, metrics) and is safe to
run again (a redelivered message): a step that already succeeded returns its recorded
metrics; a step of a finished run does nothing; files are written under a temporary name
and renamed. What a step produces lives in `$APPRENTICE_HOME/learner/runs/run-N/`
(dataset.json, candidate/) and, once published, in `adapters/policy-vN/`.
Expected ends raise `RunSkipped` (too little data), `RunDeferred` (too little evidence for
the gate: held-out items short of `gate.min_per_class`, or a candidate not surely better;
the run ends `deferred`, deploys nothing and its feedback stays for the next cycle, since
the training cursor moves only with a deployed run) or `StepFailed` (gate refused; bad
config); anything else is a bug or an outage, recorded by `fail_run` (learner/runs.py, the
bookkeeping, re-exported here). Collect trains on the new feedback that is not held out, with
as many earlier training samples again (`data.replay`: a cycle continues the serving adapter
and would forget earlier lessons), and scores the held-out pool of every cycle so far
(learner/data.py `replay_samples`, `heldout_pool`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from feedback.db import transaction
from feedback.models import Adapter, LearnerRun
from feedback.queries import (
    active_deployment,
    finish_run,
    get_run,
    next_adapter_version,
    publish_adapter,
    set_run_dataset,
)
from feedback.vocab import WRITTEN
from learner.config import CYCLES, LearnerConfig
from learner.deploy import deploy_version
from learner.runs import (  # noqa: F401  (re-exported: the steps' vocabulary)
    FINAL,
    Context,
    RunDeferred,
    RunSkipped,
    StepFailed,
    create_cycle,
    fail_run,
    recorded_step,
    run_config,
    save_candidate,
    scheduled_run,
    skip_run,
    step_metrics,
)

STEPS = CYCLES["feedback"].steps
TASK_STEPS = CYCLES["tasks"].steps


# ---- the steps ------------------------------------------------------------------------------


def collect(ctx: Context, run_id: int) -> dict[str, Any]:
    def body(config: LearnerConfig) -> dict[str, Any]:
        from learner.data import (
            collect_samples,
            heldout_pool,
            replay_samples,
            training_cursor,
            write_snapshot,
        )
        from learner.demos import Encoder, collect_demonstrations

        timeout = ctx.settings.learner_visibility_timeout_s
        if config.train.max_seconds >= timeout:
            raise StepFailed(
                f"train.max_seconds={config.train.max_seconds} must be below the broker's "
                f"visibility timeout ({timeout} s), or a long train step is delivered twice: "
                "lower it or raise APPRENTICE_LEARNER_VISIBILITY_TIMEOUT_S"
            )
        encoder = Encoder.of(ctx.settings.model_name)
        with transaction(ctx.db) as db:
            cursor = training_cursor(db)
            samples, summary = collect_samples(db, config.data, after_outcome_id=cursor)
            train = [s for s in samples if not s.heldout]
            replayed = replay_samples(db, config.data, cursor=cursor, new=len(train))
            pool = heldout_pool(db, config.data, cap=config.gate.max_heldout)
            demos, demo_summary = collect_demonstrations(
                db, config.data, encoder, after_outcome_id=cursor,
                upto_outcome_id=summary["max_outcome_id"])  # fmt: skip
            pool += collect_demonstrations(db, config.data, encoder, heldout=True,
                                           cap=config.gate.max_heldout)[0]  # fmt: skip
        pooled = {"accepted": sum(s.desirable for s in pool if s.outcome != WRITTEN),
                  "rejected": sum(not s.desirable for s in pool),
                  WRITTEN: sum(s.outcome == WRITTEN for s in pool)}  # fmt: skip
        summary.update(train=len(train), replayed=len(replayed), heldout_new=summary["heldout"],
                       heldout=len(pool), heldout_pool=pooled,
                       demonstrations=demo_summary)  # fmt: skip
        with transaction(ctx.db) as db:
            set_run_dataset(db, run_id=run_id, dataset=summary)
        short = shortfall(train, demos, pooled, config)
        if short and config.cycle.objectives == ("feedback",):
            raise short
        samples = train + demos + replayed + pool
        if short:  # a cycle with other objectives goes on without this one
            samples, summary["left_out"] = [], str(short)
        write_snapshot(ctx.run_dir(run_id) / "dataset.json", samples)
        return summary

    return recorded_step(ctx, run_id, "collect", body)


def shortfall(train: list[Any], demos: list[Any], pooled: dict[str, int],
              config: LearnerConfig) -> RunSkipped | None:  # fmt: skip
    """Why a feedback cycle cannot train or cannot be judged yet (None: it can): too few
    samples; only one verdict and nothing written to learn the other side from; or the
    held-out pool short of what the gate tests (learner/gate.py `feedback_strata`)."""
    from learner.gate import feedback_strata

    need = config.gate.min_per_class
    if len(train) + len(demos) < config.data.min_samples:
        return RunSkipped(f"{len(train)} labelled samples and {len(demos)} demonstrations to "
                          f"train on, need {config.data.min_samples}")  # fmt: skip
    if not demos and (not any(s.desirable for s in train) or all(s.desirable for s in train)):
        return RunSkipped("needs both accepted and rejected suggestions (or what people wrote "
                          "instead) to learn from")  # fmt: skip
    missing = {k: need - pooled[k] for k in feedback_strata(pooled, need) if pooled[k] < need}
    if missing:
        return RunDeferred(
            f"deferred: {pooled['accepted']} accepted, {pooled['rejected']} rejected and "
            f"{pooled[WRITTEN]} written held-out outcomes; the gate needs {need} rejected and "
            f"{need} accepted or written, about {max(missing.values())} more",
            {"heldout_pool": pooled},
        )  # fmt: skip
    return None


def tasks(ctx: Context, run_id: int) -> dict[str, Any]:
    def body(config: LearnerConfig) -> dict[str, Any]:
        from learner.taskcycle import prepare_tasks

        ctx.run_dir(run_id).mkdir(parents=True, exist_ok=True)
        return prepare_tasks(ctx.settings, config.tasks, ctx.run_dir(run_id), run_id)

    return recorded_step(ctx, run_id, "tasks", body)


def rollouts(ctx: Context, run_id: int) -> dict[str, Any]:
    def body(config: LearnerConfig) -> dict[str, Any]:
        from learner.taskcycle import read_plan, roll_out, rollout_metrics, serving

        records, plan = read_plan(ctx.run_dir(run_id))
        version, adapter = serving(ctx)
        chosen = [records[i] for i in plan["chosen"]]
        report = roll_out(ctx, run_id, chosen, config=config.tasks, adapter=adapter,
                          samples=config.tasks.samples)  # fmt: skip
        name = adapter[0] if adapter else None
        metrics = rollout_metrics(ctx.db, run_id=run_id, instance_ids=plan["chosen"],
                                  adapter=name)  # fmt: skip
        return {**metrics, "serving_version": version, "wall_s": report["wall_s"]}

    return recorded_step(ctx, run_id, "rollouts", body)


def train(ctx: Context, run_id: int) -> dict[str, Any]:
    def body(config: LearnerConfig) -> dict[str, Any]:
        from learner.candidate import train_candidate

        def progress(step: int, total: int, loss: float) -> None:
            ctx.report("train", {"status": "progress", "step": step, "total": total, "loss": loss})

        return train_candidate(ctx, run_id, config, progress)

    return recorded_step(ctx, run_id, "train", body)


def evaluate(ctx: Context, run_id: int) -> dict[str, Any]:
    def body(config: LearnerConfig) -> dict[str, Any]:
        from learner.candidate import judge_candidate

        metrics = judge_candidate(ctx, run_id, config)
        if metrics.get("decision") == "defer":
            raise RunDeferred("; ".join(metrics["reasons"]), metrics)
        if metrics["reasons"]:
            raise StepFailed("gate refused the adapter: " + "; ".join(metrics["reasons"]), metrics)
        return metrics

    return recorded_step(ctx, run_id, "evaluate", body)


def publish(ctx: Context, run_id: int) -> dict[str, Any]:
    def body(config: LearnerConfig) -> dict[str, Any]:
        from learner.publish import VersionTaken, publish_to_store, sweep_temporary

        adapters_dir = ctx.settings.adapters_dir
        with transaction(ctx.db) as db:
            mine = db.scalars(select(Adapter).where(Adapter.run_id == run_id)).first()
            if mine is not None:  # recorded before a crash, the step not marked yet
                return {"version": mine.version, "name": mine.name, "path": mine.path}
            version = next_adapter_version(db)
        sweep_temporary(adapters_dir)
        while True:
            try:
                where = publish_to_store(
                    ctx.artifacts, ctx.run_dir(run_id) / "candidate", adapters_dir,
                    version=version, run_id=run_id,
                )  # fmt: skip
                break
            except VersionTaken:
                version += 1  # another run's folder; its row may not be written yet
        evaluation = step_metrics(ctx, run_id, "evaluate")
        trained = step_metrics(ctx, run_id, "train")
        with transaction(ctx.db) as db:
            row = publish_adapter(
                db, version=version, path=where,
                base_model=ctx.settings.model_name, parent_version=trained.get("parent_version"),
                metrics=evaluation.get("candidate", {}), run_id=run_id,
            )  # fmt: skip
            return {"version": row.version, "name": row.name, "path": row.path}

    return recorded_step(ctx, run_id, "publish", body)


def deploy(ctx: Context, run_id: int) -> dict[str, Any]:
    def body(config: LearnerConfig) -> dict[str, Any]:
        published = step_metrics(ctx, run_id, "publish")
        version = int(published["version"])
        path = ctx.adapter_folder(version, published["path"])  # where vLLM can read it

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

    metrics = recorded_step(ctx, run_id, "deploy", body)
    with transaction(ctx.db) as db:
        run = get_run(db, run_id=run_id)
        if run is not None and run.status not in FINAL:
            finish_run(db, run_id=run_id, status="succeeded", adapter_version=metrics["version"])
    return metrics


STEP_FUNCTIONS: dict[str, Callable[[Context, int], dict[str, Any]]] = {
    "collect": collect, "tasks": tasks, "rollouts": rollouts, "train": train,
    "evaluate": evaluate, "publish": publish, "deploy": deploy,
}  # fmt: skip


def run_cycle(ctx: Context, run_id: int) -> LearnerRun:
    """All steps in this process, in order (`apprentice learn`); returns the finished run."""
    with transaction(ctx.db) as db:
        run = get_run(db, run_id=run_id)
        steps = run_config(run).cycle.steps if run is not None else STEPS
    for name in steps:
        try:
            STEP_FUNCTIONS[name](ctx, run_id)
        except RunSkipped as exc:
            skip_run(ctx, run_id, name, exc)
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
