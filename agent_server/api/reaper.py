"""The dead-worker reaper: while the agent server runs, every `reap_every_s` it fails the
learner runs whose running step stopped beating (feedback/queries/runs.py `reap_dead_runs`).

A learner worker stamps the step it runs every 10 s (learner/jobs.py `Heartbeat`). A worker
SIGKILLed mid-step stops stamping; what happens next depends on the broker:

- kombu's SQLAlchemy transport (the embedded default), or another that never hands an
  unacknowledged message back: nothing would ever run the step again, so the run is failed
  once its step is silent for `dead_worker_s` (60 s): a waiting `apprentice` bench, the
  dashboard and the admin API see `failed` and the reason instead of `running` for ever.
- Redis, RabbitMQ: the broker redelivers the step to another worker after the visibility
  timeout, so the reaper waits two visibility timeouts + `dead_worker_s` (time for the
  broker's sweep, and for a busy worker to finish the step before), then fails the run.

The agent server runs it because it is alive when the worker is dead (and `apprentice up`
runs both). A failed run is final: a step of it delivered late does nothing. Foreground
runs (`apprentice learn`) never beat and are left alone. Several servers on one database
may all reap: each run is read again under its row lock. Tests: tests/learner/
test_dead_worker.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy.orm import Session, sessionmaker

from agent_server.models.deployments import deployment_backend
from feedback.db import transaction
from feedback.queries.adapters import record_deployment
from feedback.queries.runs import get_run, reap_dead_runs
from ground.settings import Settings

log = logging.getLogger(__name__)
# Transports that never give a dead worker's unacknowledged message back (kombu's names).
NO_REDELIVERY = ("sqla+", "sqlalchemy+", "filesystem:", "memory:")


def redelivers(broker_url: str) -> bool:
    """Whether the broker hands a dead worker's unacknowledged step to another worker."""
    return not broker_url.startswith(NO_REDELIVERY)


def silence_limit_s(settings: Settings, dead_worker_s: float) -> float:
    """How long a running step may go without a heartbeat before its run is failed."""
    if redelivers(settings.broker_url):
        return 2 * settings.learner_visibility_timeout_s + dead_worker_s
    return dead_worker_s


def reap_once(settings: Settings, db: sessionmaker[Session], dead_worker_s: float) -> list[int]:
    """Fail the runs whose worker is dead (see the module docstring); their ids."""
    limit = silence_limit_s(settings, dead_worker_s)
    hint = (f", and the broker did not hand it to another worker within {limit:.0f} s"
            if redelivers(settings.broker_url) else "")  # fmt: skip
    with transaction(db) as s:
        reaped = reap_dead_runs(s, limit_s=limit, hint=hint)
        for run_id, step, reason in reaped:
            log.warning("learner run %s failed: %s: %s", run_id, step, reason)
            if step == "deploy":  # the attempt is on record, the active deployment unchanged
                record_deployment(s, adapter_version=_version(s, run_id), status="failed",
                                  backend=deployment_backend(settings.model_backend),
                                  reason=f"learner run {run_id}: {reason}"[:2000])  # fmt: skip
    return [run_id for run_id, _, _ in reaped]


def _version(s: Session, run_id: int) -> int | None:
    run = get_run(s, run_id=run_id)
    return run.adapter_version if run is not None else None


async def reap_forever(
    settings: Settings, db: sessionmaker[Session], *, every_s: float, dead_worker_s: float
) -> None:
    """`reap_once` every `every_s` seconds until cancelled; a failed pass is logged."""
    while True:
        await asyncio.sleep(every_s)
        try:
            await asyncio.to_thread(reap_once, settings, db, dead_worker_s)
        except Exception:
            log.exception("the dead-worker reaper's pass failed; trying again in %s s", every_s)


def start_reaper(
    settings: Settings, db: sessionmaker[Session], *, every_s: float, dead_worker_s: float
) -> asyncio.Task[None] | None:
    """The reaper as a task of the running loop; None when `every_s` is 0 (switched off)."""
    if every_s <= 0:
        return None
    return asyncio.create_task(
        reap_forever(settings, db, every_s=every_s, dead_worker_s=dead_worker_s),
        name="dead-worker-reaper",
    )


async def stop_reaper(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
