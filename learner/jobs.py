"""Thin Celery tasks over learner/pipeline.py: each takes a run id and calls a plain function.
(jobs.py: in this project a "task" is a mined task, learner/synth/.)

    learner.cycle(run_id)          -> starts the chain of the run's steps: collect | train |
                                      evaluate | publish | deploy, or for a task cycle
                                      tasks | rollouts | train | evaluate | publish | deploy
    learner.collect(run_id) ...    -> one step each (immutable signatures: they take the id only)
    learner.scheduled_cycle()      -> beat: a new cycle when enough new feedback has arrived,
                                      else a task cycle when APPRENTICE_LEARNER_TASK_REPO is set

A step that already succeeded returns at once (a redelivered message); a transient error
(database, model server or broker unreachable) is retried `config.retries` times with
exponential backoff; after that, or on any other error, the run is marked failed with the
reason, and the chain stops (`Ignore`: nothing after a failed step runs). Train and rollouts
go to `settings.accel_queue`, the rest to `settings.learner_queue` (`queue_of`). While a step
runs, a `Heartbeat` thread stamps it every HEARTBEAT_S (feedback/queries/runs.py); the agent
server fails a run whose step stopped beating (its worker was killed: agent_server/api/
reaper.py). Tests: tests/learner/test_admin_api.py (real worker, embedded broker),
test_e2e_vllm.py (real worker, Redis, SIGKILL redelivery), test_dead_worker.py (SIGKILL on
either broker).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import datetime as dt
import functools
import gc
import logging
import threading
from collections.abc import Sequence
from typing import Any

from celery import Signature, Task, chain
from celery.exceptions import Ignore
from sqlalchemy.exc import OperationalError

from agent_server.models.base import BackendUnavailable
from feedback.db import make_engine, make_sessionmaker, transaction
from feedback.models import LearnerRun, utcnow
from feedback.queries.runs import HEARTBEAT_S, beat_run_step
from ground.broker import TASK_CYCLE, TASK_SCHEDULED
from ground.settings import Settings
from learner import pipeline
from learner.celery_app import app, settings

log = logging.getLogger(__name__)
# Worth another try: the thing we talk to may be back soon.
TRANSIENT: tuple[type[BaseException], ...] = (
    BackendUnavailable, OperationalError, ConnectionError, TimeoutError,
)  # fmt: skip


@functools.cache
def context() -> pipeline.Context:
    """One Context per worker process, built on first use."""
    settings.ensure_home()
    ctx = pipeline.Context(settings, make_sessionmaker(make_engine(settings.database_url)))
    ctx.progress = _log_progress
    return ctx


def _log_progress(step: str, info: dict[str, Any]) -> None:
    if info.get("status") == "running" and Heartbeat.current is not None:
        Heartbeat.current.poke()  # the step is marked running: stamp it now
    if info.get("status") == "progress" and "line" in info:  # a rollout ended
        log.info("%s %s", step, info["line"])
    elif info.get("status") == "progress":
        if info["step"] == info["total"] or info["step"] % 10 == 0:
            log.info("train step %s/%s loss %.4f", info["step"], info["total"], info["loss"])
    else:
        log.info("%s: %s", step, info)


def _retries(ctx: pipeline.Context, run_id: int) -> tuple[int, float]:
    with transaction(ctx.db) as db:
        run = db.get(LearnerRun, run_id)
        config = pipeline.run_config(run, ctx.config) if run is not None else ctx.config
    return config.retries, config.retry_backoff_s


def release_memory() -> None:
    """Hand freed memory back to the system after a step. The worker is one long-lived
    process (solo pool): glibc keeps what a train step freed (a 13 GB resident set after
    one step on the real model), which the model server beside it may need."""
    gc.collect()
    libc = ctypes.util.find_library("c")
    if libc and hasattr(ctypes.CDLL(libc), "malloc_trim"):
        ctypes.CDLL(libc).malloc_trim(0)


class Heartbeat:
    """While a step runs in this worker: a thread stamping it alive every `every_s` seconds
    (`beat_run_step`), at once when it is marked running (`poke`, from the progress report).
    A thread, so a step busy for minutes in torch (train) keeps beating; the worker runs one
    task at a time (solo pool), so one Heartbeat at most is `current`."""

    current: Heartbeat | None = None

    def __init__(self, ctx: pipeline.Context, run_id: int, name: str,
                 every_s: float = HEARTBEAT_S) -> None:  # fmt: skip
        self.ctx, self.run_id, self.name, self.every_s = ctx, run_id, name, every_s
        self.beats = 0  # stamps written
        self._wake, self._stopped = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name=f"heartbeat-{name}-{run_id}")  # fmt: skip

    def __enter__(self) -> Heartbeat:
        Heartbeat.current = self
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        Heartbeat.current = None
        self._stopped.set()
        self._wake.set()
        self._thread.join()

    def poke(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        while True:
            self._wake.wait(self.every_s)
            self._wake.clear()
            if self._stopped.is_set():
                return
            self.beat()

    def beat(self, retry_at: dt.datetime | None = None) -> None:
        try:
            with transaction(self.ctx.db) as db:
                self.beats += beat_run_step(db, run_id=self.run_id, name=self.name,
                                            retry_at=retry_at)  # fmt: skip
        except Exception as exc:  # a missed beat is no reason to stop the step
            log.warning("heartbeat of %s of run %s: %s", self.name, self.run_id, exc)


def run_step(task: Task, name: str, run_id: int) -> None:
    ctx = context()
    try:
        with Heartbeat(ctx, run_id, name) as heartbeat:
            _run_step(task, ctx, name, run_id, heartbeat)
    finally:
        release_memory()


def _run_step(
    task: Task, ctx: pipeline.Context, name: str, run_id: int, heartbeat: Heartbeat
) -> None:
    try:
        pipeline.STEP_FUNCTIONS[name](ctx, run_id)
    except pipeline.RunSkipped as exc:
        pipeline.skip_run(ctx, run_id, name, exc)
        raise Ignore() from None
    except pipeline.StepFailed as exc:
        pipeline.fail_run(ctx, run_id, name, str(exc), exc.metrics)
        raise Ignore() from None
    except TRANSIENT as exc:
        retries, backoff = _retries(ctx, run_id)
        attempt = task.request.retries
        if attempt < retries:
            log.warning("%s of run %s: %s; retry %s/%s", name, run_id, exc, attempt + 1, retries)
            countdown = backoff * 2**attempt
            # Quiet till the retry is due; a worker lost before then is reaped after it.
            heartbeat.beat(retry_at=utcnow() + dt.timedelta(seconds=countdown))
            raise task.retry(exc=exc, countdown=countdown, max_retries=retries) from exc
        pipeline.fail_run(ctx, run_id, name, f"{type(exc).__name__}: {exc} (after {retries} "
                          "retries)")  # fmt: skip
        raise Ignore() from None
    except Exception as exc:
        pipeline.fail_run(ctx, run_id, name, f"{type(exc).__name__}: {exc}")
        raise


def _step_task(name: str) -> Task:
    def step(self: Task, run_id: int) -> None:
        run_step(self, name, run_id)

    step.__name__ = name
    step.__doc__ = f"The {name} step of learner run `run_id` (learner.pipeline.{name})."
    return app.task(bind=True, name=f"learner.{name}", acks_late=True,
                    reject_on_worker_lost=True)(step)  # fmt: skip


collect = _step_task("collect")
tasks = _step_task("tasks")
rollouts = _step_task("rollouts")
train = _step_task("train")
evaluate = _step_task("evaluate")
publish = _step_task("publish")
deploy = _step_task("deploy")


STEP_TASKS = {"collect": collect, "tasks": tasks, "rollouts": rollouts, "train": train,
              "evaluate": evaluate, "publish": publish, "deploy": deploy}  # fmt: skip


def start_chain(run_id: int) -> None:
    ctx = context()
    try:
        with transaction(ctx.db) as db:
            run = db.get(LearnerRun, run_id)
            names = pipeline.run_config(run).cycle.steps if run else pipeline.STEPS
    except ValueError:  # a bad stored config: the first step records the error on the run
        names = pipeline.STEPS
    step_chain(run_id, names, settings).apply_async()


ACCELERATED = ("train", "rollouts")  # the steps a GPU helps (rollouts: a local backend's)


def queue_of(step: str, settings: Settings) -> str:
    """The queue a step is sent to: `settings.accel_queue` for train and rollouts, the
    learner queue for the others (each is its own message: a chain's steps may run on
    different workers, and hand each other files through the artifact store)."""
    return settings.accel_queue if step in ACCELERATED else settings.learner_queue


def step_chain(run_id: int, names: Sequence[str], settings: Settings) -> Signature:
    """The Celery chain of a run's steps, each signature routed to its queue."""
    return chain(*(STEP_TASKS[n].si(run_id).set(queue=queue_of(n, settings)) for n in names))


@app.task(name=TASK_CYCLE, acks_late=True)
def cycle(run_id: int) -> None:
    """Start the chain of steps of queued run `run_id`."""
    start_chain(run_id)


@app.task(name=TASK_SCHEDULED, acks_late=True)
def scheduled_cycle() -> int | None:
    """A new cycle when enough new feedback has arrived and no cycle is in progress."""
    run_id = pipeline.scheduled_run(context())
    if run_id is not None:
        start_chain(run_id)
    return run_id
