"""What `apprentice worker` and `apprentice learn` run (apprentice/cli.py calls these).

    apprentice worker [--queue Q]   # a Celery worker on the learner's queues (--pool=solo,
                             # 1 task); a GPU host takes the accel queue alone
    apprentice learn [--tasks REPO | --repo PATH]  # one cycle in the foreground (a task
                             # cycle with --tasks; learning PATH's code too with --repo):
                             # progress on stderr, metrics JSON
                             # on stdout; exit 0 succeeded/skipped/deferred, 1 failed,
                             # 2 no database or bad learner settings

`run_worker(settings, beat=True)` also runs the schedule inside the worker process (what
`apprentice up` wants: one process for the learner on the embedded broker).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

from ground.progress import Progress
from ground.settings import Settings


def worker_queues(settings: Settings, wanted: list[str] | None = None) -> list[str]:
    """The queues a worker consumes: `wanted` (each one of this stack's two), else both.
    A ValueError names the queues there are."""
    known = list(dict.fromkeys([settings.learner_queue, settings.accel_queue]))
    unknown = [q for q in wanted or [] if q not in known]
    if unknown and len(known) == 1:
        raise ValueError(
            f"no learner queue {', '.join(map(repr, unknown))}: this stack has one, "
            f"{known[0]!r} (every step); APPRENTICE_LEARNER_ACCEL_QUEUE gives train and "
            "rollouts a queue of their own"
        )
    if unknown:
        raise ValueError(
            f"no learner queue {', '.join(map(repr, unknown))}: this stack's queues are "
            f"{settings.learner_queue!r} (collect, tasks, evaluate, publish, deploy, the "
            f"schedule) and {settings.accel_queue!r} (train, rollouts); "
            "APPRENTICE_LEARNER_QUEUE and APPRENTICE_LEARNER_ACCEL_QUEUE name them"
        )
    return list(dict.fromkeys(wanted)) if wanted else known


def run_worker(settings: Settings, *, beat: bool = False, queues: list[str] | None = None) -> None:
    """Block in a Celery worker consuming `queues` (default: the learner's queues, see
    `worker_queues`), one task at a time."""
    settings.ensure_home()
    # The module's app: the tasks are registered on it. It reads the same environment.
    from learner.celery_app import app

    consumed = worker_queues(settings, queues)
    argv = [
        "worker",
        "--pool=solo",  # torch-safe: no fork after torch has started, one task at a time
        "--concurrency=1",
        f"--queues={','.join(consumed)}",
        f"--loglevel={settings.log_level}",
        # Unique per queue set: two workers of one host (a CPU and a GPU one) may run.
        f"--hostname=learner-{'-'.join(consumed)}@%h",
        "--without-gossip",
        "--without-mingle",
    ]
    if beat:
        argv += ["--beat", f"--schedule={settings.home / 'celerybeat-schedule'}"]
    app.worker_main(argv)


def repo_problem(tasks_repo: Path | None, code_repo: Path | None) -> str | None:
    """What is wrong with `apprentice learn`'s repositories (None: nothing)."""
    for given in (tasks_repo, code_repo):
        if given is not None and not (given / ".git").exists():
            return f"{given}: not a git repository"
    if tasks_repo is not None and code_repo is not None:
        return "--tasks and --repo are two kinds of cycle: give one"
    return None


def learn_once(
    settings: Settings, err: Console, *, tasks_repo: Path | None = None, python: str = "python",
    code_repo: Path | None = None,
) -> int:  # fmt: skip
    """One full cycle in this process (a task cycle on `tasks_repo` when given; a feedback
    cycle that also learns `code_repo`'s code when given); prints the run's metrics as JSON
    on stdout."""
    from feedback.db import make_engine, make_sessionmaker, transaction
    from feedback.migrate import current_revision
    from feedback.queries import get_run
    from learner.pipeline import Context, create_cycle, run_config, run_cycle
    from learner.runs import learner_defaults

    overrides = None
    if (problem := repo_problem(tasks_repo, code_repo)) is not None:
        err.print(f"[red]error:[/red] {problem}")
        return 2
    if tasks_repo is not None:
        overrides = {
            "kind": "tasks",
            "tasks": {"repo": str(tasks_repo.resolve()), "python": python},
        }
    if code_repo is not None:
        overrides = {"code": {"repo": str(code_repo.resolve())}}
    settings.ensure_home()
    try:
        learner_defaults(settings)
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        return 2
    if current_revision(settings.database_url) is None:
        err.print("[red]error:[/red] the feedback database is empty: run `apprentice db upgrade`")
        return 2
    engine = make_engine(settings.database_url)
    ctx = Context(settings, make_sessionmaker(engine))
    run_id = create_cycle(ctx, trigger="cli", overrides=overrides)
    with transaction(ctx.db) as db:
        steps = run_config(get_run(db, run_id=run_id)).cycle.steps
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
