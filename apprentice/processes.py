"""The learner beside `apprentice up`: a worker and the schedule as child processes.

    with start_learner(settings):       # apprentice worker + celery beat, stopped on exit
        serve(settings)

The children read the same environment (and TOML file) as this process, so they share its
database and broker (the embedded defaults: SQLite files under $APPRENTICE_HOME). They run
in their own process groups and log to $APPRENTICE_HOME/logs/{worker,beat}.log; on exit
they get SIGTERM (a worker finishes nothing half-way: its task is acknowledged late) and
SIGKILL after `grace_s`. The schedule is left out when `learner_interval_s` is 0. Tested
through `apprentice up` in tests/api/test_cli.py and tests/learner/test_up.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from ground.settings import Settings


def learner_commands(settings: Settings) -> dict[str, list[str]]:
    """name -> argv of the learner's processes for these settings."""
    commands = {"worker": [sys.executable, "-m", "apprentice.cli", "worker"]}
    if settings.learner_interval_s > 0:
        commands["beat"] = [
            sys.executable, "-m", "celery", "-A", "learner.celery_app", "beat",
            f"--schedule={settings.home / 'celerybeat-schedule'}",
            f"--loglevel={settings.log_level}",
        ]  # fmt: skip
    return commands


@contextmanager
def start_learner(settings: Settings, *, grace_s: float = 15.0) -> Iterator[dict[str, int]]:
    """Run the learner's processes for the duration of the block; yields name -> pid."""
    logs = settings.ensure_home() / "logs"
    logs.mkdir(exist_ok=True)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, argv in learner_commands(settings).items():
            with (logs / f"{name}.log").open("ab") as log:
                procs[name] = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
        started = ", ".join(f"{name} (pid {proc.pid})" for name, proc in procs.items())
        print(f"learner: {started} started, logs in {logs}", file=sys.stderr, flush=True)
        yield {name: p.pid for name, p in procs.items()}
    finally:
        for proc in procs.values():
            _signal(proc, signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _signal(proc, signal.SIGKILL)
                proc.wait(timeout=10)


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    if proc.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
