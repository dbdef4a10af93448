"""The learner's broker contract: task names, Celery options from Settings, a small client.

The Celery worker (learner/celery_app.py) and everything that only *sends* to it (the
agent server's admin API, tests, benches) read their Celery options from `celery_options`
here, so both sides agree on the queue, the serializer and the transport options, and the
agent server never imports the learner (arrows: learner -> agent_server, never back).

    task_id = send_cycle(settings, run_id)      # the worker runs collect -> ... -> deploy

Reliability options (STYLE.md 9): late acks (a task is acknowledged after it returns, so
a worker killed mid-step leaves it to be redelivered), prefetch 1 (a busy worker holds no
second message hostage), and a visibility timeout (`learner_visibility_timeout_s`) longer
than the longest step. On Redis, unacknowledged messages are swept back onto the queue
every `unacked_restore_interval` seconds once their visibility timeout has passed. kombu's
SQLAlchemy transport (the embedded default) has no such sweep: a message taken by a worker
killed with SIGKILL is not redelivered there. Nothing to run.
"""

from __future__ import annotations

from typing import Any

from ground.settings import Settings

TASK_CYCLE = "learner.cycle"  # args: [run_id]; starts the chain of steps
TASK_SCHEDULED = "learner.scheduled_cycle"  # no args; beat sends it


def celery_options(settings: Settings) -> dict[str, Any]:
    """Celery configuration shared by the worker, beat and every sender."""
    timeout = settings.learner_visibility_timeout_s
    transport: dict[str, Any] = {}
    if settings.broker_url.startswith(("redis://", "rediss://")):
        transport = {
            "visibility_timeout": timeout,
            # Sweep often enough that a redelivery waits about the timeout, not 10x it.
            "unacked_restore_interval": max(1, min(10, timeout // 5)),
            "unacked_restore_throttle": 1,
        }
    return {
        "broker_url": settings.broker_url,
        "result_backend": settings.result_backend,
        "broker_transport_options": transport,
        "result_backend_transport_options": transport,
        "broker_connection_retry_on_startup": True,
        "task_default_queue": settings.learner_queue,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_ignore_result": True,  # runs are read from learner_runs, not from results
        "timezone": "UTC",
    }


def make_client(settings: Settings) -> Any:
    """A Celery app that only sends (it defines no tasks)."""
    from celery import Celery

    client = Celery("apprentice-client", set_as_current=False)
    client.conf.update(celery_options(settings))
    return client


def send_cycle(settings: Settings, run_id: int, client: Any = None) -> str:
    """Ask a learner worker to run the cycle of queued run `run_id`; returns the task id."""
    client = client or make_client(settings)
    result = client.send_task(TASK_CYCLE, args=[run_id], queue=settings.learner_queue)
    return str(result.id)
