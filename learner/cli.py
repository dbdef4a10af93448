"""What `apprentice worker` and `apprentice learn` run (apprentice/cli.py calls these).

    apprentice worker        # a Celery worker on the learner queue (--pool=solo, 1 task)
    apprentice learn [--tasks REPO]  # one cycle in the foreground (a task cycle with
                             # --tasks): progress on stderr, metrics JSON
                             # on stdout; exit 0 succeeded/skipped, 1 failed, 2 no database

`run_worker(settings, beat=True)` also runs the schedule inside the worker process (what
`apprentice up` wants: one process for the learner on the embedded broker).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from ground.settings import Settings


def run_worker(settings: Settings, *, beat: bool = False) -> None:
    """Block in a Celery worker consuming `settings.learner_queue`, one task at a time."""
    settings.ensure_home()
    # The module's app: the tasks are registered on it. It reads the same environment.
    from learner.celery_app import app

    argv = [
        "worker",
        "--pool=solo",  # torch-safe: no fork after torch has started, one task at a time
        "--concurrency=1",
        f"--queues={settings.learner_queue}",
        f"--loglevel={settings.log_level}",
        "--hostname=learner@%h",
        "--without-gossip",
        "--without-mingle",
    ]
    if beat:
        argv += ["--beat", f"--schedule={settings.home / 'celerybeat-schedule'}"]
    app.worker_main(argv)


def learn_once(
    settings: Settings, err: Console, *, tasks_repo: Path | None = None, python: str = "python"
) -> int:
    """One full cycle in this process (a task cycle on `tasks_repo` when given); prints the
    run's metrics as JSON on stdout."""
    from feedback.db import make_engine, make_sessionmaker, transaction
    from feedback.migrate import current_revision
    from feedback.queries import get_run
    from learner.pipeline import Context, create_cycle, run_config, run_cycle, steps_of

    overrides = None
    if tasks_repo is not None:
        if not (tasks_repo / ".git").exists():
            err.print(f"[red]error:[/red] {tasks_repo}: not a git repository")
            return 2
        overrides = {
            "kind": "tasks",
            "tasks": {"repo": str(tasks_repo.resolve()), "python": python},
        }
    settings.ensure_home()
    if current_revision(settings.database_url) is None:
        err.print("[red]error:[/red] the feedback database is empty: run `apprentice db upgrade`")
        return 2
    engine = make_engine(settings.database_url)
    ctx = Context(settings, make_sessionmaker(engine))
    run_id = create_cycle(ctx, trigger="cli", overrides=overrides)
    with transaction(ctx.db) as db:
        steps = steps_of(run_config(get_run(db, run_id=run_id)))
    with Progress(
        TextColumn("{task.description:<10}"),
        BarColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        console=err,
    ) as bar:
        tasks = {name: bar.add_task(name, total=None, start=False, info="") for name in steps}

        def progress(step: str, info: dict[str, Any]) -> None:
            task = tasks[step]
            status = info.get("status")
            if status == "running":
                bar.start_task(task)
            elif status == "progress" and "line" in info:  # a rollout ended
                bar.update(task, info=info["line"][:80])
            elif status == "progress":
                bar.update(task, completed=info["step"], total=info["total"],
                           info=f"loss {info['loss']:.4f}")  # fmt: skip
            else:
                detail = info.get("error") or info.get("reason") or ""
                bar.update(task, total=1, completed=1, info=f"{status} {detail}"[:80])

        ctx.progress = progress
        run = run_cycle(ctx, run_id)
    report = {
        "run_id": run.id,
        "status": run.status,
        "error": run.error,
        "adapter_version": run.adapter_version,
        "dataset": run.dataset,
        "steps": {
            s["name"]: {"status": s["status"], **(s.get("metrics") or {})} for s in run.steps
        },
    }
    print(json.dumps(report, indent=2, default=str))
    engine.dispose()
    return 1 if run.status == "failed" else 0
