"""The cycle's plain functions on the embedded defaults (SQLite, dev model, the embedded
deployer's canary): publish + deploy, continuing from the parent, rollback, redelivered
steps, the NaN gate, crashed publishes, skipped runs, and `apprentice learn`."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from safetensors.torch import load_file, save_file

from feedback.db import transaction
from feedback.queries import active_deployment, get_run, list_adapters, list_deployments
from learner import pipeline
from learner.config import DeployConfig
from learner.deploy import make_deployer, rollback
from learner.publish import MANIFEST, publish_files
from tests.fixtures.settings import run_cli
from tests.learner.conftest import FAST, NEWEST
from tests.learner.synthetic_feedback import seed_feedback


def run_steps(ctx: pipeline.Context, run_id: int, names: tuple[str, ...]) -> None:
    for name in names:
        pipeline.STEP_FUNCTIONS[name](ctx, run_id)


def state(ctx: pipeline.Context) -> tuple[list[Any], Any, list[Any]]:
    with transaction(ctx.db) as db:
        return (list_adapters(db), active_deployment(db, backend="embedded"),
                list_deployments(db))  # fmt: skip


def test_a_cycle_publishes_deploys_continues_and_rolls_back(
    ctx: pipeline.Context, dev_tokenizer: Any, dev_model_dir: Path
) -> None:
    seed_feedback(ctx.db, dev_tokenizer, dev_model_dir, 48)
    run = pipeline.run_cycle(ctx, pipeline.create_cycle(ctx, trigger="test", overrides=FAST))
    assert run.status == "succeeded", (run.error, run.steps)
    assert [s["name"] for s in run.steps] == list(pipeline.STEPS)
    assert all(s["status"] == "succeeded" and s["finished"] for s in run.steps)
    assert all(s["metrics"]["step_peak_rss_gb"] > 0 for s in run.steps)  # every step's memory
    steps = {s["name"]: s["metrics"] for s in run.steps}
    assert steps["collect"]["samples"] == 48 and steps["train"]["steps"] == 12
    assert steps["evaluate"]["accepted"] and steps["evaluate"]["serving_version"] is None
    assert steps["evaluate"]["decision"] == "deploy" and steps["evaluate"]["evidence"]["items"]
    assert run.adapter_version == 1 and run.config["train"]["max_steps"] == 12

    adapters, active, _ = state(ctx)
    (v1,) = adapters
    folder = Path(v1.path)
    assert (v1.name, v1.status, v1.run_id) == ("policy-v1", "published", run.id)
    assert folder == ctx.settings.adapters_dir.resolve() / "policy-v1"
    assert json.loads((folder / MANIFEST).read_text())["run_id"] == run.id
    assert not os.stat(folder / "adapter_model.safetensors").st_mode & stat.S_IWUSR
    assert active is not None and active.adapter_version == 1
    assert v1.metrics["effect"] > 0 and v1.metrics["p_value"] < 0.1  # the gate's evidence

    # A redelivered step returns what it recorded and publishes nothing new.
    assert pipeline.publish(ctx, run.id)["version"] == 1
    assert len(state(ctx)[0]) == 1

    # The next cycle learns from v1's feedback, continuing from v1. The gate asks whether v2
    # is surely better than v1, so the people judged something v1 has not learned yet, and
    # the gate reads the newest held-out outcomes: v2, trained on the new lesson alone, forgets
    # v1's (measured: every held-out accepted `return` item worse), which the whole pool
    # refuses or defers -- right, and not what this test is about.
    seed_feedback(ctx.db, dev_tokenizer, dev_model_dir, 48, seed=7, adapter_version=1, prop=1)
    newest = {**FAST, "gate": {**FAST["gate"], **NEWEST}}
    run2 = pipeline.run_cycle(ctx, pipeline.create_cycle(ctx, trigger="test", overrides=newest))
    assert run2.status == "succeeded", run2.error
    steps2 = {s["name"]: s["metrics"] for s in run2.steps}
    assert steps2["collect"]["samples"] == 48, "only feedback after the last run"
    assert steps2["collect"]["replayed"] > 0  # and v1's training samples again (data.replay)
    assert steps2["train"]["parent_version"] == 1 and steps2["evaluate"]["serving_version"] == 1
    adapters, active, _ = state(ctx)
    assert [a.version for a in adapters] == [1, 2] and adapters[1].parent_version == 1
    assert active.adapter_version == 2

    # Rollback to any published version is one call.
    deployer = make_deployer(ctx.settings, DeployConfig())
    back = asyncio.run(rollback(ctx.db, deployer, version=1, reason="test"))
    _, active, deployments = state(ctx)
    assert active.id == back.id and active.adapter_version == 1
    assert deployments[1].status == "rolled_back" and back.rollback_of == deployments[1].id
    base = asyncio.run(rollback(ctx.db, deployer, version=None, reason="test"))
    assert base.adapter_version is None


def test_a_nan_adapter_is_refused_by_the_gate(
    ctx: pipeline.Context, dev_tokenizer: Any, dev_model_dir: Path
) -> None:
    seed_feedback(ctx.db, dev_tokenizer, dev_model_dir, 32)
    run_id = pipeline.create_cycle(ctx, trigger="test", overrides=FAST)
    run_steps(ctx, run_id, ("collect", "train"))
    weights = ctx.run_dir(run_id) / "candidate" / "adapter_model.safetensors"
    tensors = load_file(weights)
    first = sorted(tensors)[0]
    tensors[first][0, 0] = float("nan")
    save_file(tensors, weights)

    with pytest.raises(pipeline.StepFailed, match="non-finite") as refused:
        pipeline.evaluate(ctx, run_id)
    pipeline.fail_run(ctx, run_id, "evaluate", str(refused.value), refused.value.metrics)
    with transaction(ctx.db) as db:
        run = get_run(db, run_id=run_id)
        assert run.status == "failed" and "non-finite" in run.error
        evaluate = next(s for s in run.steps if s["name"] == "evaluate")
        assert evaluate["status"] == "failed" and evaluate["metrics"]["finite"] is False
    # Later steps of a finished run do nothing.
    assert pipeline.publish(ctx, run_id) == {"run_finished": "failed"}
    adapters, active, _ = state(ctx)
    assert adapters == [] and active is None
    assert not ctx.settings.adapters_dir.exists() or not any(ctx.settings.adapters_dir.iterdir())


def test_crashed_publishes_are_never_listed_and_a_redelivery_completes(
    ctx: pipeline.Context, dev_tokenizer: Any, dev_model_dir: Path
) -> None:
    seed_feedback(ctx.db, dev_tokenizer, dev_model_dir, 32)
    run_id = pipeline.create_cycle(ctx, trigger="test", overrides=FAST)
    run_steps(ctx, run_id, ("collect", "train", "evaluate"))
    # A worker killed mid-copy leaves a hidden, partial folder behind...
    partial = ctx.settings.adapters_dir / ".tmp-policy-v1-deadbeef"
    partial.mkdir(parents=True)
    (partial / "adapter_config.json").write_text("{")
    # ...and one killed after the rename but before the database row, a complete folder.
    publish_files(ctx.run_dir(run_id) / "candidate", ctx.settings.adapters_dir, version=1,
                  run_id=run_id)  # fmt: skip
    assert state(ctx)[0] == [], "nothing is listed before its row is written"

    assert pipeline.publish(ctx, run_id)["version"] == 1  # the redelivery adopts its folder
    adapters, _, _ = state(ctx)
    assert [a.name for a in adapters] == ["policy-v1"]
    visible = [p.name for p in ctx.settings.adapters_dir.iterdir() if not p.name.startswith(".")]
    assert visible == ["policy-v1"]
    pipeline.deploy(ctx, run_id)
    assert state(ctx)[1].adapter_version == 1


def test_a_run_without_both_kinds_of_feedback_is_skipped(
    ctx: pipeline.Context, dev_tokenizer: Any, dev_model_dir: Path
) -> None:
    run = pipeline.run_cycle(ctx, pipeline.create_cycle(ctx, trigger="test", overrides=FAST))
    assert run.status == "skipped" and "need" in run.error
    assert state(ctx)[0] == []


def test_a_train_budget_above_the_visibility_timeout_is_refused(ctx: pipeline.Context) -> None:
    overrides = {"train": {"max_seconds": ctx.settings.learner_visibility_timeout_s}}
    run = pipeline.run_cycle(ctx, pipeline.create_cycle(ctx, trigger="test", overrides=overrides))
    assert run.status == "failed" and "VISIBILITY_TIMEOUT" in run.error


def test_too_little_evidence_defers_and_keeps_the_data_for_the_next_cycle(
    ctx: pipeline.Context, dev_tokenizer: Any, dev_model_dir: Path
) -> None:
    seed_feedback(ctx.db, dev_tokenizer, dev_model_dir, 48)
    # Held-out items short of min_per_class: deferred before any training.
    short = {**FAST, "gate": {"min_per_class": 100}}
    early = pipeline.run_cycle(ctx, pipeline.create_cycle(ctx, trigger="test", overrides=short))
    assert early.status == "deferred" and "held-out outcomes" in early.error, early.error
    assert [s["name"] for s in early.steps] == ["collect"]
    # Enough items, but no p-value of ~24 items reaches alpha 1e-4: trained, then deferred.
    strict = {**FAST, "gate": {"min_per_class": 3, "alpha": 1e-4}}
    run = pipeline.run_cycle(ctx, pipeline.create_cycle(ctx, trigger="test", overrides=strict))
    assert run.status == "deferred", (run.error, run.steps)
    evaluate = next(s for s in run.steps if s["name"] == "evaluate")
    assert evaluate["status"] == "deferred" and evaluate["metrics"]["decision"] == "defer"
    evidence = evaluate["metrics"]["evidence"]
    assert evidence["effect"] > 0 and evidence["p_value"] >= 1e-4 and evidence["needed"] >= 1
    assert "needs about" in run.error and run.adapter_version is None
    assert state(ctx)[0] == [] and state(ctx)[1] is None  # nothing published or deployed
    # The feedback stays for the next cycle, which decides on it.
    after = pipeline.run_cycle(ctx, pipeline.create_cycle(ctx, trigger="test", overrides=FAST))
    assert after.status == "succeeded", after.error
    assert after.steps[0]["metrics"]["samples"] == 48 and after.adapter_version == 1


def test_apprentice_learn_runs_one_cycle_with_the_learner_settings(
    learner_settings: Any, learner_db: Any, dev_tokenizer: Any, dev_model_dir: Path
) -> None:
    seed_feedback(learner_db, dev_tokenizer, dev_model_dir, 32)
    time.sleep(2.1)  # the default settle_s: outcomes younger than that wait for a later run
    learner_settings.home.mkdir(parents=True, exist_ok=True)
    (learner_settings.home / "config.toml").write_text(  # enough held out for the gate
        "[learner.data]\nheldout_fraction = 0.5\n[learner.gate]\nmin_per_class = 3\n"
    )
    env = {
        "APPRENTICE_HOME": str(learner_settings.home),
        "APPRENTICE_DATABASE_URL": learner_settings.database_url,
        "APPRENTICE_MODEL_NAME": str(dev_model_dir),
    }
    done = run_cli("learn", env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["status"] == "succeeded" and report["adapter_version"] == 1, report
    assert report["steps"]["evaluate"]["decision"] == "deploy"
    assert report["steps"]["evaluate"]["evidence"]["p_value"] < 0.1
    assert "deploy" in done.stderr  # the progress display


def test_apprentice_learn_tasks_needs_a_git_repository(
    learner_settings: Any, tmp_path: Path
) -> None:
    env = {"APPRENTICE_HOME": str(learner_settings.home),
           "APPRENTICE_DATABASE_URL": learner_settings.database_url}  # fmt: skip
    done = run_cli("learn", "--tasks", str(tmp_path), env=env, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "not a git repository" in " ".join(done.stderr.split())  # rich wraps lines
