"""The learner's Celery app, `app`, configured from Settings (the broker contract lives in
ground/broker.py). Entry points:

    apprentice worker                                   # = the worker below, from Settings
    celery -A learner.celery_app worker --pool=solo -Q learner --concurrency=1
    celery -A learner.celery_app beat                   # one learning cycle per interval

The worker runs one task at a time in its own process (`--pool=solo`): torch keeps its
thread pools and memory across tasks, and nothing forks after torch has started. The beat
schedule sends `learner.scheduled_cycle` every `learner_interval_s` seconds (0: no
schedule); that task starts a cycle only when enough new feedback has arrived.
"""

from __future__ import annotations

from celery import Celery

from ground.broker import TASK_SCHEDULED, celery_options
from ground.settings import Settings


def make_app(settings: Settings) -> Celery:
    app = Celery("apprentice-learner", include=["learner.jobs"])
    app.conf.update(celery_options(settings))
    app.conf.update(
        worker_concurrency=1,
        worker_pool="solo",
        # A step can run for minutes; the worker's own heartbeat must not give up on it.
        worker_cancel_long_running_tasks_on_connection_loss=False,
        beat_schedule=(
            {
                "learner-cycle": {
                    "task": TASK_SCHEDULED,
                    "schedule": float(settings.learner_interval_s),
                    "options": {"queue": settings.learner_queue},
                }
            }
            if settings.learner_interval_s > 0
            else {}
        ),
    )
    return app


settings = Settings()  # this module is an entry point: the one place it reads the environment
app = make_app(settings)
