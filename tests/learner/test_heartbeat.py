"""The dead-worker rule, fast and without processes: a worker's Heartbeat keeps a long step
stamped; the reaper (agent_server/api/reaper.py over feedback/queries/runs.py) fails a run
whose running step went silent for 60 s where the broker never redelivers, for two
visibility timeouts more where it does, and leaves foreground runs, retries waiting their
countdown and finished runs alone; the agent server runs it. Killing real workers:
tests/learner/test_dead_worker.py."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy.orm import Session, sessionmaker

from agent_server.agent.scripted import ScriptedModel
from agent_server.api.config import ApiConfig
from agent_server.api.reaper import reap_once, redelivers, silence_limit_s
from feedback.db import transaction
from feedback.models import utcnow
from feedback.queries import get_run, list_deployments, start_run, update_run_step
from feedback.queries.runs import beat_run_step, reap_dead_runs, silent_for
from ground.settings import Settings
from learner import pipeline
from learner.jobs import Heartbeat, _log_progress
from learner.pipeline import Context, create_cycle
from tests.api.server import start_server

REDIS = "redis://127.0.0.1:6379/13"


def running(ctx: Context, step: str = "train", silent_s: float | None = None) -> int:
    """A run whose `step` is running, stamped `silent_s` seconds ago (None: never)."""
    run_id = create_cycle(ctx, trigger="test")
    with transaction(ctx.db) as s:
        start_run(s, run_id=run_id)
        update_run_step(s, run_id=run_id, name="collect", status="succeeded")
        update_run_step(s, run_id=run_id, name=step, status="running")
        if silent_s is not None:
            at = utcnow() - dt.timedelta(seconds=silent_s)
            assert beat_run_step(s, run_id=run_id, name=step, at=at)
    return run_id


def run_of(db: sessionmaker[Session], run_id: int) -> Any:
    with transaction(db) as s:
        return get_run(s, run_id=run_id)


def test_a_step_beats_while_it_runs_and_not_after(ctx: Context) -> None:
    run_id = create_cycle(ctx, trigger="test")
    ctx.progress = _log_progress  # what the worker's context reports through
    seen: list[str] = []

    def body(config: Any) -> dict[str, Any]:  # a long step: the thread keeps it fresh
        for _ in range(3):
            time.sleep(0.4)
            (step,) = run_of(ctx.db, run_id).steps
            seen.append(step["heartbeat"])
        return {}

    with Heartbeat(ctx, run_id, "collect", every_s=0.15) as heartbeat:
        pipeline.recorded_step(ctx, run_id, "collect", body)
    assert len(set(seen)) == 3 and seen == sorted(seen), seen
    assert heartbeat.beats >= 4  # one at once when marked running, then every 0.15 s
    (step,) = run_of(ctx.db, run_id).steps
    assert step["status"] == "succeeded" and step["heartbeat"] >= seen[-1]
    with transaction(ctx.db) as s:  # a finished step is never stamped again
        assert not beat_run_step(s, run_id=run_id, name="collect")
    assert Heartbeat.current is None


def test_the_rule_names_the_silent_step_and_spares_the_rest(ctx: Context) -> None:
    now = utcnow()
    dead = running(ctx, "train", silent_s=61)
    alive = running(ctx, "train", silent_s=50)
    foreground = running(ctx, "evaluate", silent_s=None)  # `apprentice learn`: never beats
    retrying = running(ctx, "collect", silent_s=300)
    with transaction(ctx.db) as s:  # a retry due in 20 s: quiet until then
        beat_run_step(s, run_id=retrying, name="collect", at=now - dt.timedelta(seconds=300),
                      retry_at=now + dt.timedelta(seconds=20))  # fmt: skip
    finished = running(ctx, "train", silent_s=500)
    pipeline.fail_run(ctx, finished, "train", "a real error")
    with transaction(ctx.db) as s:
        reaped = reap_dead_runs(s, limit_s=60, now=now)
    assert [(run_id, step) for run_id, step, _ in reaped] == [(dead, "train")]
    run = run_of(ctx.db, dead)
    assert run.status == "failed" and run.finished_at is not None
    assert run.error.startswith("train: the worker running step train stopped answering "
                                "(no heartbeat for 61 s): it was killed or lost; start a "
                                "worker and run the cycle again"), run.error  # fmt: skip
    train = next(s for s in run.steps if s["name"] == "train")
    assert train["status"] == "failed" and "killed or lost" in train["metrics"]["error"]
    for run_id in (alive, foreground, retrying):
        assert run_of(ctx.db, run_id).status == "running"
    assert run_of(ctx.db, finished).error == "train: a real error"
    # A step of the reaped run delivered again (a redelivered message) does nothing.
    assert pipeline.recorded_step(ctx, dead, "train", lambda c: {"ran": 1}) == {
        "run_finished": "failed"
    }
    step = next(s for s in run_of(ctx.db, retrying).steps if s["name"] == "collect")
    assert -21 < silent_for(step, now) < -19  # type: ignore[operator]


@pytest.mark.parametrize(
    ("broker", "limit"),
    [(None, 60.0), ("sqla+postgresql://db/broker", 60.0), (REDIS, 2 * 900 + 60.0),
     ("amqp://guest@rabbit//", 2 * 900 + 60.0)],
)  # fmt: skip
def test_the_limit_waits_for_redelivery_only_where_the_broker_redelivers(
    learner_settings: Settings, broker: str | None, limit: float
) -> None:
    changes: dict[str, Any] = {"learner_visibility_timeout_s": 900}
    if broker is not None:
        changes["broker_url"] = broker
    settings = learner_settings.model_copy(update=changes)
    assert redelivers(settings.broker_url) == (limit > 60)
    assert silence_limit_s(settings, 60.0) == limit


def test_on_redis_a_step_awaiting_redelivery_is_spared_then_reaped(ctx: Context) -> None:
    settings = ctx.settings.model_copy(
        update={"broker_url": REDIS, "learner_visibility_timeout_s": 30}
    )  # fmt: skip
    pending = running(ctx, "train", silent_s=100)  # past 60 s, within 2 x 30 + 60
    lost = running(ctx, "deploy", silent_s=125)
    assert reap_once(settings, ctx.db, 60.0) == [lost]
    assert run_of(ctx.db, pending).status == "running"
    run = run_of(ctx.db, lost)
    assert "did not hand it to another worker within 120 s" in run.error
    with transaction(ctx.db) as s:  # a deploy cut short is on record as a failed attempt
        (deployment,) = list_deployments(s)
    assert deployment.status == "failed" and f"learner run {lost}" in deployment.reason


def test_the_agent_server_reaps_while_it_runs(ctx: Context) -> None:
    dead = running(ctx, "train", silent_s=30)
    config = ApiConfig(reap_every_s=0.2, dead_worker_s=20)
    server = start_server(ctx.settings, backend=ScriptedModel([]), config=config)
    try:
        deadline = time.monotonic() + 20
        while run_of(ctx.db, dead).status == "running":
            assert time.monotonic() < deadline, "the server's reaper never failed the run"
            time.sleep(0.1)
    finally:
        server.stop()
    assert "stopped answering" in run_of(ctx.db, dead).error


def test_the_run_page_s_stream_takes_no_heartbeat_for_news(ctx: Context) -> None:
    run_id = running(ctx, "train", silent_s=0)
    admin = "admin-token-0123456789abcdef"
    settings = ctx.settings.model_copy(update={"admin_token": SecretStr(admin)})
    server = start_server(settings, backend=ScriptedModel([]))

    def beats_then_end() -> None:
        for _ in range(3):  # the stream reads the run every second
            time.sleep(1.1)
            with transaction(ctx.db) as s:
                assert beat_run_step(s, run_id=run_id, name="train")
        pipeline.fail_run(ctx, run_id, "train", "done beating")

    thread = threading.Thread(target=beats_then_end)
    url = f"{server.http_url}/v1/admin/runs/{run_id}/events"
    headers = {"Authorization": f"Bearer {admin}"}
    try:
        with httpx.stream("GET", url, headers=headers, timeout=30) as response:
            thread.start()
            seen = [json.loads(line[6:]) for line in response.iter_lines()
                    if line.startswith("data: ")]  # fmt: skip
    finally:
        thread.join()
        server.stop()
    assert [run["status"] for run in seen] == ["running", "failed"]
