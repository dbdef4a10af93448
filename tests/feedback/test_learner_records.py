"""Learner runs, adapters and deployments (with rollback) on both databases.

Run: .venv/bin/python -m pytest tests/feedback/test_learner_records.py -q
"""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from feedback.db import transaction
from feedback.queries import (
    NothingToRollBack,
    UnknownRun,
    active_deployment,
    create_run,
    finish_run,
    get_adapter,
    get_run,
    list_adapters,
    list_deployments,
    list_runs,
    next_adapter_version,
    publish_adapter,
    record_deployment,
    rollback_deployment,
    set_run_dataset,
    start_run,
    update_run_step,
)


def test_run_lifecycle(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        run = create_run(s, trigger="manual", config={"lr": 1e-4})
        assert run.status == "queued" and run.started_at is None
    with transaction(db) as s:
        start_run(s, run_id=run.id)
        update_run_step(s, run_id=run.id, name="collect", status="running")
        update_run_step(s, run_id=run.id, name="collect", status="succeeded", metrics={"n": 40})
        update_run_step(s, run_id=run.id, name="train", status="running", metrics={"step": 1})
    with transaction(db) as s:  # a later transaction sees and extends the stored steps
        update_run_step(s, run_id=run.id, name="train", status="succeeded", metrics={"loss": 0.3})
        set_run_dataset(s, run_id=run.id, dataset={"outcome_ids": [3, 40], "count": 38})
        finish_run(s, run_id=run.id, status="succeeded", adapter_version=1)
    with db() as s:
        loaded = get_run(s, run_id=run.id)
        assert loaded is not None
        assert loaded.status == "succeeded" and loaded.adapter_version == 1
        assert loaded.started_at is not None and loaded.finished_at is not None
        assert loaded.finished_at >= loaded.started_at
        assert [(x["name"], x["status"]) for x in loaded.steps] == [
            ("collect", "succeeded"),
            ("train", "succeeded"),
        ]
        assert loaded.steps[0]["metrics"] == {"n": 40}
        assert loaded.steps[1]["metrics"] == {"step": 1, "loss": 0.3}
        assert all(x["finished"] is not None for x in loaded.steps)
        assert loaded.dataset == {"outcome_ids": [3, 40], "count": 38}


def test_run_errors(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        run = create_run(s, trigger="schedule")
        finish_run(s, run_id=run.id, status="failed", error="Traceback: boom")
        create_run(s, trigger="schedule")
    with pytest.raises(ValueError, match="use one of"), transaction(db) as s:
        finish_run(s, run_id=run.id, status="running")
    with pytest.raises(UnknownRun), transaction(db) as s:
        update_run_step(s, run_id=999_999, name="x", status="running")
    with db() as s:
        runs = list_runs(s)
        assert [r.id for r in runs] == sorted((r.id for r in runs), reverse=True)
        assert runs[-1].error == "Traceback: boom"


def test_adapters(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        assert next_adapter_version(s) == 1
        run = create_run(s, trigger="manual")
        publish_adapter(
            s,
            version=1,
            path="/ad/policy-v1",
            base_model="dev",
            run_id=run.id,
            metrics={"reward": 0.1},
        )
        assert next_adapter_version(s) == 2
        publish_adapter(
            s, version=2, path="/ad/policy-v2", base_model="dev", parent_version=1, status="refused"
        )
        assert next_adapter_version(s) == 3  # refused versions keep their number
    with pytest.raises(IntegrityError), transaction(db) as s:
        publish_adapter(s, version=2, path="/elsewhere", base_model="dev")
    with db() as s:
        v1 = get_adapter(s, version=1)
        assert v1 is not None and v1.name == "policy-v1" and v1.metrics == {"reward": 0.1}
        assert [a.version for a in list_adapters(s)] == [1, 2]
        assert [a.version for a in list_adapters(s, status="published")] == [1]
        assert get_adapter(s, version=7) is None


def test_deploy_supersede_and_roll_back(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        for v in (1, 2, 3):
            publish_adapter(s, version=v, path=f"/ad/policy-v{v}", base_model="dev")
        base = record_deployment(s, adapter_version=None, backend="vllm", reason="first start")
        record_deployment(s, adapter_version=1, backend="vllm")
        record_deployment(s, adapter_version=1, backend="embedded")
        record_deployment(s, adapter_version=2, backend="vllm")
        record_deployment(s, adapter_version=3, backend="vllm", status="failed", reason="OOM")
        d3 = record_deployment(s, adapter_version=3, backend="vllm")
    with db() as s:
        active = active_deployment(s, backend="vllm")
        assert active is not None and active.id == d3.id and active.adapter_version == 3
        embedded = active_deployment(s, backend="embedded")
        assert embedded is not None and embedded.adapter_version == 1
        statuses = [d.status for d in list_deployments(s, backend="vllm")]
        assert statuses == ["active", "failed", "superseded", "superseded", "superseded"]
    with transaction(db) as s:
        back = rollback_deployment(s, backend="vllm", reason="acceptance dropped")
        assert back.adapter_version == 2 and back.rollback_of == d3.id
    with transaction(db) as s:
        assert rollback_deployment(s, backend="vllm", reason="again").adapter_version == 1
    with transaction(db) as s:
        to_base = rollback_deployment(s, backend="vllm", reason="back to the base model")
        assert to_base.adapter_version is None
    with pytest.raises(NothingToRollBack), transaction(db) as s:
        rollback_deployment(s, backend="vllm", reason="nothing older")
    with db() as s:
        assert active_deployment(s, backend="vllm").adapter_version is None  # type: ignore[union-attr]
        assert [d.status for d in list_deployments(s, backend="vllm")].count("active") == 1
        assert {d.id for d in list_deployments(s, backend="vllm") if d.status == "rolled_back"} >= {
            d3.id
        }
        assert base.status == "superseded"
    with pytest.raises(NothingToRollBack), transaction(db) as s:
        rollback_deployment(s, backend="nowhere", reason="no deployments")


def test_one_active_deployment_per_backend_is_enforced(db: sessionmaker[Session]) -> None:
    from feedback.models import Deployment

    with transaction(db) as s:
        record_deployment(s, adapter_version=None, backend="vllm")
    with pytest.raises(IntegrityError), transaction(db) as s:
        s.add(Deployment(adapter_version=None, backend="vllm", status="active"))


def test_deployment_of_an_unknown_adapter_is_refused(db: sessionmaker[Session]) -> None:
    with pytest.raises(IntegrityError), transaction(db) as s:
        record_deployment(s, adapter_version=42, backend="vllm")


def test_rollback_after_a_new_deploy_returns_to_the_good_version(
    db: sessionmaker[Session],
) -> None:
    with transaction(db) as s:
        for v in (1, 2, 3):
            publish_adapter(s, version=v, path=f"/ad/policy-v{v}", base_model="dev")
        record_deployment(s, adapter_version=1, backend="vllm")
        record_deployment(s, adapter_version=2, backend="vllm")
        assert rollback_deployment(s, backend="vllm", reason="v2 bad").adapter_version == 1
        record_deployment(s, adapter_version=3, backend="vllm")
        # v2 was rolled back away from: never a target again, even though it is newer.
        assert rollback_deployment(s, backend="vllm", reason="v3 bad").adapter_version == 1
