"""The Celery app's reliability settings, its beat schedule, and the schedule's decision.

The real worker is exercised in test_admin_api.py (embedded broker) and test_e2e_vllm.py
(Redis); here: what the app is configured with, and `pipeline.scheduled_run`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from feedback.db import transaction
from feedback.models import LearnerRun
from feedback.queries import finish_run, set_run_dataset
from ground.broker import TASK_CYCLE, TASK_SCHEDULED, celery_options
from ground.settings import Settings
from learner import pipeline
from learner.celery_app import make_app
from learner.config import CYCLES, DataConfig, LearnerConfig
from tests.learner.synthetic_feedback import seed_feedback


def test_the_worker_acks_late_one_task_at_a_time_with_a_visibility_timeout(
    tmp_path: Path,
) -> None:
    settings = Settings(home=tmp_path, broker_url="redis://127.0.0.1:6379/9",
                        learner_visibility_timeout_s=900, learner_queue="q1")  # fmt: skip
    conf = make_app(settings).conf
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1 and conf.worker_concurrency == 1
    assert conf.worker_pool == "solo" and conf.task_default_queue == "q1"
    assert conf.broker_transport_options["visibility_timeout"] == 900
    assert conf.broker_transport_options["unacked_restore_interval"] <= 900 / 5
    embedded = celery_options(Settings(home=tmp_path))
    assert embedded["broker_url"] == f"sqla+sqlite:///{tmp_path / 'broker.db'}"
    assert embedded["broker_transport_options"] == {}


def test_beat_sends_the_scheduled_cycle_every_interval(tmp_path: Path) -> None:
    app = make_app(Settings(home=tmp_path, learner_interval_s=120, learner_queue="q2"))
    entry = app.conf.beat_schedule["learner-cycle"]
    assert (entry["task"], entry["schedule"], entry["options"]) == (
        TASK_SCHEDULED, 120.0, {"queue": "q2"})  # fmt: skip
    assert make_app(Settings(home=tmp_path, learner_interval_s=0)).conf.beat_schedule == {}


def test_the_tasks_are_registered_by_name() -> None:
    from learner import jobs  # noqa: F401  (registers them)
    from learner.celery_app import app

    steps = {*pipeline.STEPS, *pipeline.TASK_STEPS}
    names = {f"learner.{s}" for s in steps} | {TASK_CYCLE, TASK_SCHEDULED}
    assert names <= set(app.tasks)


def test_the_schedule_waits_for_enough_new_feedback_and_for_a_running_cycle(
    tmp_path: Path, sqlite_head_url: str, dev_model_dir: Path, dev_tokenizer: Any
) -> None:
    from feedback.db import make_engine, make_sessionmaker

    settings = Settings(home=tmp_path, database_url=sqlite_head_url, learner_min_feedback=10,
                        model_name=str(dev_model_dir))  # fmt: skip
    engine = make_engine(sqlite_head_url)
    now = LearnerConfig(data=DataConfig(settle_s=0.0))  # count outcomes at once
    ctx = pipeline.Context(settings, make_sessionmaker(engine), defaults=now)
    seed_feedback(ctx.db, dev_tokenizer, dev_model_dir, 8)
    assert pipeline.scheduled_run(ctx) is None  # 8 < 10 new outcomes
    seed_feedback(ctx.db, dev_tokenizer, dev_model_dir, 4, seed=2)
    run_id = pipeline.scheduled_run(ctx)
    assert run_id is not None
    assert pipeline.scheduled_run(ctx) is None  # that run is still queued
    with transaction(ctx.db) as db:
        set_run_dataset(db, run_id=run_id, dataset={"max_outcome_id": 10_000})
        finish_run(db, run_id=run_id, status="succeeded")
    assert pipeline.scheduled_run(ctx) is None  # done, and nothing new since
    engine.dispose()


def test_with_a_task_repo_the_schedule_runs_a_task_cycle_when_feedback_is_short(
    tmp_path: Path, sqlite_head_url: str, dev_model_dir: Path, dev_tokenizer: Any
) -> None:
    from feedback.db import make_engine, make_sessionmaker

    settings = Settings(
        home=tmp_path, database_url=sqlite_head_url, learner_min_feedback=10,
        model_name=str(dev_model_dir), learner_task_repo=tmp_path / "repo",
    )  # fmt: skip
    engine = make_engine(sqlite_head_url)
    now = LearnerConfig(data=DataConfig(settle_s=0.0))
    ctx = pipeline.Context(settings, make_sessionmaker(engine), defaults=now)
    seed_feedback(ctx.db, dev_tokenizer, dev_model_dir, 4)
    run_id = pipeline.scheduled_run(ctx)  # 4 < 10 new outcomes: a task cycle instead
    assert run_id is not None
    with transaction(ctx.db) as db:
        config = pipeline.run_config(db.get(LearnerRun, run_id))
    assert config.kind == "tasks" and config.tasks.repo == str(tmp_path / "repo")
    assert config.cycle.steps == pipeline.TASK_STEPS
    assert pipeline.scheduled_run(ctx) is None  # that run is still queued
    engine.dispose()


def test_train_and_rollouts_go_to_the_accel_queue_the_rest_to_the_learner_queue(
    tmp_path: Path,
) -> None:
    from learner.cli import worker_queues
    from learner.jobs import step_chain

    split = Settings(home=tmp_path, learner_queue="cpu", learner_accel_queue="gpu")
    routed = {s.task.removeprefix("learner."): s.options["queue"]
              for s in step_chain(7, CYCLES["mixed"].steps, split).tasks}  # fmt: skip
    assert routed == {"collect": "cpu", "tasks": "cpu", "rollouts": "gpu", "train": "gpu",
                      "evaluate": "cpu", "publish": "cpu", "deploy": "cpu"}  # fmt: skip
    one = Settings(home=tmp_path, learner_queue="all")
    assert {s.options["queue"] for s in step_chain(7, pipeline.STEPS, one).tasks} == {"all"}
    # A worker consumes both queues unless told which; an unknown name is refused.
    assert worker_queues(split) == ["cpu", "gpu"] and worker_queues(split, ["gpu"]) == ["gpu"]
    assert worker_queues(one) == ["all"]
    with pytest.raises(ValueError, match="'cpu' \\(collect.*'gpu' \\(train, rollouts\\)"):
        worker_queues(split, ["gpu", "nope"])
    with pytest.raises(ValueError, match="has one, 'all'"):
        worker_queues(one, ["gpu"])
