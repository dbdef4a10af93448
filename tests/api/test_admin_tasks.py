"""Task cycles in the admin API: held-out solve rates per run and adapter, and a stored
trajectory (a real rollout through the agent harness, scripted model) read back with its
calls and session events. Real server, PostgreSQL.

Run: .venv/bin/python -m pytest tests/api/test_admin_tasks.py -q
"""

from __future__ import annotations

import dataclasses

import httpx
import pytest

from agent_server.agent.scripted import ScriptedModel
from feedback.db import transaction
from feedback.queries import create_run, finish_run, update_run_step
from learner.synth.rollout import run_rollout
from tests.api.server import ADMIN_TOKEN as ADMIN
from tests.learner.synth.test_rollout import CONFIG, FILES, FINISH, FIX, TASK, act

pytestmark = pytest.mark.postgres


@pytest.fixture
def server(admin_server):
    return admin_server


def get(server, path: str) -> httpx.Response:
    return httpx.get(f"{server.http_url}{path}", headers={"Authorization": f"Bearer {ADMIN}"})


def evaluated_run(db, kind: str, serving: float, candidate: float, accepted: bool) -> int:
    report = {"serving_version": None, "accepted": accepted, "reasons": [],
              "serving": {"solve_rate": serving, "rollouts": 4},
              "candidate": {"solve_rate": candidate, "rollouts": 4}}  # fmt: skip
    metrics = report if kind == "tasks" else {"tasks": report, "accepted": accepted}
    with transaction(db) as s:
        run = create_run(s, trigger="test", config={"kind": kind})
        update_run_step(s, run_id=run.id, name="evaluate", status="succeeded", metrics=metrics)
        finish_run(s, run_id=run.id, status="succeeded" if accepted else "failed")
        return run.id


def test_solve_rates_of_task_and_mixed_runs(server) -> None:
    db = server.services.db
    first = evaluated_run(db, "tasks", 0.25, 0.5, True)
    second = evaluated_run(db, "mixed", 0.5, 0.25, False)
    with transaction(db) as s:
        create_run(s, trigger="test", config={})  # a feedback run: not listed
    rates = get(server, "/v1/admin/tasks/solve-rates").json()
    assert [r["run_id"] for r in rates] == [second, first]
    assert (rates[1]["serving"], rates[1]["candidate"], rates[1]["accepted"]) == (0.25, 0.5, True)
    assert (rates[0]["serving"], rates[0]["candidate"], rates[0]["accepted"]) == (0.5, 0.25, False)
    assert rates[0]["evaluated"] == 4


async def test_a_trajectory_reads_back_with_its_calls_and_events(server) -> None:
    db = server.services.db
    with transaction(db) as s:
        run_id = create_run(s, trigger="test", config={"kind": "tasks"}).id
    model = ScriptedModel([act("read_file", path="calc.py"), FIX, FINISH])
    config = dataclasses.replace(CONFIG, run_id=run_id)
    result = await run_rollout(TASK, model, files=FILES, config=config, db=db)
    assert result.reward == 1.0, result.message
    (listed,) = get(server, f"/v1/admin/runs/{run_id}/rollouts").json()
    assert listed["id"] == result.rollout_id and listed["reward"] == 1.0
    assert listed["reward_terms"]["solved"] in (True, 1)
    detail = get(server, f"/v1/admin/rollouts/{result.rollout_id}").json()
    assert [c["kind"] for c in detail["calls"]] == ["agent", "agent", "agent"]
    assert all(c["constrained"] for c in detail["calls"])  # structured actions: the schema
    assert "return a + b" in detail["diff"]
    kinds = [e["kind"] for e in detail["events"]]
    assert "tool_call" in kinds and "tool_result" in kinds
    assert get(server, "/v1/admin/rollouts/nope").status_code == 404
    assert get(server, "/v1/admin/runs/999/rollouts").json() == []
