"""A dead worker never hangs a run: a real `apprentice worker` SIGKILLed mid-train beside a
real agent server (its dead-worker reaper: agent_server/api/reaper.py).

1. Embedded broker (kombu's SQLite transport, which never redelivers): the run is failed
   within 120 s of the kill with the reason, on the server's default reaper settings.
2. Redis (short visibility timeout): the train step is redelivered to a second worker and the
   run finishes; the reaper, on a silence limit shorter than the redelivery takes, leaves it
   alone because Redis redelivers.
The rule itself, fast: tests/learner/test_heartbeat.py.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from agent_server.agent.scripted import ScriptedModel
from agent_server.api.config import ApiConfig
from feedback.db import make_engine, make_sessionmaker
from feedback.models import utcnow
from feedback.queries.runs import silent_for
from ground.settings import Settings
from tests.api.server import TOKEN, RunningServer, start_server
from tests.learner.synthetic_feedback import seed_feedback
from tests.learner.worker import Worker, start_worker, wait_for

pytestmark = pytest.mark.slow
ADMIN = "admin-token-0123456789abcdef"
REDIS_URL = "redis://127.0.0.1:6379/13"
FINAL = ("succeeded", "failed", "skipped", "deferred")
# Outcomes readable at once and evidence enough for the gate (tests/learner/conftest.py FAST);
# a train step long enough to be killed in the middle.
CONFIG = {
    "data": {"settle_s": 0.0, "heldout_fraction": 0.5},
    "gate": {"min_per_class": 3},
    "train": {"max_steps": 200, "max_seconds": 60, "lr": 1e-3},
    "retries": 1,
    "retry_backoff_s": 0.5,
}


class Stack:
    """A real agent server (scripted model: nothing here is served) and its workers."""

    def __init__(self, settings: Settings, tmp: Path, config: ApiConfig | None = None) -> None:
        self.settings, self.tmp = settings, tmp
        self.server: RunningServer = start_server(
            settings, backend=ScriptedModel([]), config=config
        )  # fmt: skip

    def env(self) -> dict[str, str]:
        s = self.settings
        values = {
            "HOME": str(s.home), "DATABASE_URL": s.database_url, "BROKER_URL": s.broker_url,
            "RESULT_BACKEND": s.result_backend, "MODEL_NAME": s.model_name,
            "LEARNER_QUEUE": s.learner_queue,
            "LEARNER_VISIBILITY_TIMEOUT_S": str(s.learner_visibility_timeout_s),
        }  # fmt: skip
        return {f"APPRENTICE_{k}": v for k, v in values.items()}

    def worker(self, name: str) -> Worker:
        return start_worker(self.env(), self.tmp / f"{name}.log")

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=self.server.http_url, timeout=60,
                            headers={"Authorization": f"Bearer {ADMIN}"})  # fmt: skip

    def trigger(self, **overrides: Any) -> int:
        with self.api() as api:
            reply = api.post("/v1/admin/runs", json={"config": CONFIG | overrides})
            assert reply.status_code == 202, reply.text
            return int(reply.json()["id"])

    def run(self, run_id: int) -> dict[str, Any]:
        with self.api() as api:
            return dict(api.get(f"/v1/admin/runs/{run_id}").json())

    def step(self, run_id: int, name: str) -> dict[str, Any]:
        return next(s for s in self.run(run_id)["steps"] if s["name"] == name)


def seeded(settings: Settings, tokenizer: Any, model_dir: Path) -> None:
    engine = make_engine(settings.database_url)
    seed_feedback(make_sessionmaker(engine), tokenizer, model_dir, 40)
    engine.dispose()


def settings_for(tmp: Path, database_url: str, model_dir: Path, **more: Any) -> Settings:
    return Settings(home=tmp / "home", database_url=database_url, model_name=str(model_dir),
                    token=TOKEN, admin_token=ADMIN, **more)  # fmt: skip


@pytest.fixture
def embedded(tmp_path: Path, sqlite_head_url: str, dev_model_dir: Path) -> Iterator[Stack]:
    stack = Stack(settings_for(tmp_path, sqlite_head_url, dev_model_dir), tmp_path)
    yield stack
    stack.server.stop()


def test_on_the_embedded_broker_a_killed_worker_s_run_fails_within_120_s(
    embedded: Stack, dev_tokenizer: Any, dev_model_dir: Path
) -> None:
    assert embedded.settings.broker_url.startswith("sqla+sqlite")
    seeded(embedded.settings, dev_tokenizer, dev_model_dir)
    worker = embedded.worker("worker-killed")
    try:
        run_id = embedded.trigger()
        worker.wait_for_log("train step 10/200", timeout=180)  # logged every 10 steps
        train = embedded.step(run_id, "train")
        assert train["status"] == "running" and train["heartbeat"], train  # it beats
        worker.kill()
        killed = time.monotonic()
        run = wait_for(lambda: (r := embedded.run(run_id))["status"] in FINAL and r,
                       timeout=120, what=f"run {run_id} failed by the reaper")  # fmt: skip
        took = time.monotonic() - killed
    finally:
        worker.stop()
    assert run["status"] == "failed", run
    assert run["error"].startswith("train: the worker running step train stopped answering "
                                   "(no heartbeat for "), run["error"]  # fmt: skip
    assert "it was killed or lost; start a worker and run the cycle again" in run["error"]
    train = embedded.step(run_id, "train")
    assert train["status"] == "failed" and "killed or lost" in train["metrics"]["error"]
    print(f"run {run_id} failed {took:.0f} s after the kill")


@pytest.mark.redis
def test_on_redis_a_killed_worker_s_step_is_redelivered_and_the_run_finishes(
    tmp_path: Path, sqlite_head_url: str, dev_model_dir: Path, dev_tokenizer: Any
) -> None:
    # Redis gives the step back 40-48 s after it was delivered; train.max_seconds stays
    # below that. On an embedded broker the reaper would fail it after 11 s of silence.
    visibility, silence = 40, 11.0
    queue = f"learner-dead-{uuid.uuid4().hex[:8]}"
    settings = settings_for(
        tmp_path, sqlite_head_url, dev_model_dir, broker_url=REDIS_URL,
        result_backend=REDIS_URL, learner_queue=queue, learner_visibility_timeout_s=visibility,
    )  # fmt: skip
    seeded(settings, dev_tokenizer, dev_model_dir)
    stack = Stack(settings, tmp_path, ApiConfig(reap_every_s=1.0, dead_worker_s=silence))
    workers: list[Worker] = []
    try:
        workers.append(stack.worker("worker-killed"))
        run_id = stack.trigger(train={"max_steps": 200, "max_seconds": 20, "lr": 1e-3})
        workers[0].wait_for_log("train step 10/200", timeout=180)
        workers[0].kill()
        workers.append(stack.worker("worker-second"))
        silent = 0.0  # the longest the train step went unheard of before it came back

        def finished() -> dict[str, Any] | None:
            nonlocal silent
            run = stack.run(run_id)
            train = next(s for s in run["steps"] if s["name"] == "train")
            silent = max(silent, silent_for(train, utcnow()) or 0.0)
            return run if run["status"] in FINAL else None

        run = wait_for(finished, timeout=240, what=f"run {run_id}", worker=workers[1])
        log = workers[1].log(10_000)
    finally:
        for worker in workers:
            worker.stop()
        stack.server.stop()
        redis.Redis.from_url(REDIS_URL).delete(queue)
    # Past the embedded broker's limit, yet not reaped: Redis gave the step back.
    assert silent > silence, silent
    assert "learner.train" in log, "the train task came back to the second worker"
    train = next(s for s in run["steps"] if s["name"] == "train")
    assert train["status"] == "succeeded", (train, log[-3000:])
    # It ran to the end: deployed, or the gate's verdict (deferred, or refused at evaluate).
    verdict = run["status"] != "failed" or run["error"].startswith("evaluate: ")
    assert verdict and "stopped answering" not in (run["error"] or ""), run["error"]
    print(f"run {run_id}: {run['status']}, the train step silent {silent:.0f} s at most")
