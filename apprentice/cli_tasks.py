"""`apprentice tasks mine | verify | eval`: real tasks from a repository's git history.

    apprentice tasks mine REPO --out tasks.jsonl --max 20 --python REPO/.venv/bin/python
    apprentice tasks mine --kind completion REPO --out completions.jsonl --max 200
    apprentice tasks verify tasks.jsonl --repo REPO --python REPO/.venv/bin/python
    apprentice tasks eval tasks.jsonl --repo REPO [--adapter policy-v3] [--samples 2]

The work lives in learner/synth (docs/tasks.md); this module only parses options, shows
progress on stderr and turns bad input into one `error:` line and exit code 2 (exit 1: the
command ran and its check failed, e.g. a task that does not verify).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

from ground.progress import Progress

tasks_app = typer.Typer(
    help="Tasks from a repository's git history: mine them, verify them, run the agent on them.",
    no_args_is_help=True,
)
err = Console(stderr=True)

PythonOption = Annotated[
    str,
    typer.Option(
        "--python",
        metavar="PATH",
        help="The interpreter that runs the repository's tests (it must hold the repository's "
        "dependencies and pytest; default: `python` on PATH).",
    ),
]
RepoOption = Annotated[
    Path | None,
    typer.Option(
        "--repo",
        metavar="REPO",
        help="The repository the tasks were mined from (default: the folder next to FILE "
        "named like the tasks' `repo`, else the current folder).",
    ),
]


@contextmanager
def progress_bar(what: str) -> Iterator[Callable[[int, int, str], None]]:
    """A rich progress bar on stderr, driven by `(done, total, message)` callbacks."""
    columns = (TextColumn("[bold]{task.description}[/bold]"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("{task.fields[last]}"))  # fmt: skip
    with Progress(*columns, console=err, transient=False) as bar:
        task = bar.add_task(what, total=None, last="")

        def update(done: int, total: int, message: str) -> None:
            bar.update(task, completed=done, total=total or None, last=message[:60])

        yield update


def fail(exc: BaseException) -> typer.Exit:
    err.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


@tasks_app.command("mine")
def mine(
    repo: Annotated[
        Path, typer.Argument(help="A local git repository (agent tasks: with a pytest suite).")
    ],
    out: Annotated[Path, typer.Option("--out", help="Where to write the JSONL records.")] = Path(
        "tasks.jsonl"
    ),
    kind: Annotated[
        str,
        typer.Option(
            "--kind",
            help="agent: bugs the agent fixes, checked by the tests (revert, mutate; see "
            "--kinds). completion: inline completions at cursors in the commits' added lines "
            "(next_line, rest_of_line, quiet), split train / heldout-time / heldout-file.",
        ),
    ] = "agent",
    max_tasks: Annotated[
        int | None,
        typer.Option(
            "--max", min=1, help="Tasks to keep at most (default: agent 20, completion 200)."
        ),
    ] = None,
    kinds: Annotated[
        str, typer.Option(help="agent: comma-separated revert (from commits), mutate (mutations).")
    ] = "revert,mutate",
    since: Annotated[
        str | None, typer.Option(metavar="REV", help="revert: only commits after this one.")
    ] = None,
    python: PythonOption = "python",
    timeout_s: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds per test-suite run.")
    ] = 300.0,
    heldout_share: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=0.99,
            help="completion: the newest share of commits held out of training (heldout-time).",
        ),
    ] = 0.2,
    seed: Annotated[int, typer.Option(help="Seed of the mutations / cursors tried.")] = 0,
) -> None:
    """Mine tasks into a JSONL file: agent tasks (validated: >= 1 failing test the fix makes
    pass) by default, inline-completion tasks with --kind completion (docs/tasks.md).

    The repository is only read: work happens in temporary folders. Nothing is written when
    mining fails; the file is replaced whole when it succeeds.
    """
    from learner.synth.gitrepo import MiningError
    from learner.synth.mine import mine_tasks
    from learner.synth.records import write_tasks

    if kind not in ("agent", "completion"):
        raise fail(ValueError(f"--kind is agent or completion, not {kind!r}"))
    if kind == "completion":
        mine_completions(repo, out, max_tasks or 200, heldout_share, seed)
        return
    try:
        with progress_bar("mining") as update:
            tasks = mine_tasks(
                repo, kinds=[k.strip() for k in kinds.split(",") if k.strip()],
                max_tasks=max_tasks or 20, since=since, python=python, timeout_s=timeout_s,
                seed=seed, on_progress=update,
            )  # fmt: skip
    except (MiningError, ValueError) as exc:
        raise fail(exc) from exc
    if not tasks:
        raise fail(MiningError(f"no task in {repo} had a test that the fix makes pass"))
    write_tasks(out, tasks)
    by_kind = {k: sum(t.kind == k for t in tasks) for k in sorted({t.kind for t in tasks})}
    err.print(f"wrote {len(tasks)} tasks to {out}: {by_kind}", highlight=False)
    typer.echo(json.dumps({"out": str(out), "tasks": len(tasks), "kinds": by_kind}))


def mine_completions(
    repo: Path, out: Path, max_tasks: int, heldout_share: float, seed: int
) -> None:
    """`tasks mine --kind completion`: learner/synth/completion.py, its summary as JSON."""
    from learner.synth.completion import mine_completion_tasks, summary, write_completion_tasks
    from learner.synth.gitrepo import MiningError

    try:
        with progress_bar("mining completions") as update:
            tasks = mine_completion_tasks(repo, max_tasks=max_tasks, heldout_share=heldout_share,
                                          seed=seed, on_progress=update)  # fmt: skip
    except (MiningError, ValueError) as exc:
        raise fail(exc) from exc
    write_completion_tasks(out, tasks)
    err.print(f"wrote {len(tasks)} completion tasks to {out}", highlight=False)
    typer.echo(json.dumps({"out": str(out), "kind": "completion", **summary(tasks)}))


def _repo_for(file: Path, repo: Path | None) -> Path:
    """The source repository: --repo, else a folder named like the records' `repo`."""
    if repo is not None:
        return repo
    from learner.synth.records import read_tasks

    names = {t.repo for t in read_tasks(file)}
    for base in (file.resolve().parent, Path.cwd().parent, Path.cwd()):
        for name in names:
            if (base / name / ".git").exists():
                return base / name
    if (Path.cwd() / ".git").exists() and Path.cwd().name in names:
        return Path.cwd()
    raise ValueError(f"where is the repository {sorted(names)}? pass --repo REPO")


@tasks_app.command("verify")
def verify(
    file: Annotated[Path, typer.Argument(help="A JSONL file written by `tasks mine`.")],
    repo: RepoOption = None,
    python: PythonOption = "python",
    timeout_s: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds per test-suite run.")
    ] = 300.0,
) -> None:
    """Score the reference patch (must be 1.0) and the empty patch (must be 0.0) of every task.

    Prints a JSON report; exits 1 when any task fails either check (each one is listed).
    """
    from learner.synth.gitrepo import MiningError
    from learner.synth.verify import verify_tasks

    try:
        source = _repo_for(file, repo)
        with progress_bar("verifying") as update:
            report = verify_tasks(file, source, python, timeout_s=timeout_s, on_progress=update)
    except (MiningError, ValueError, OSError) as exc:
        raise fail(exc) from exc
    typer.echo(json.dumps(report, indent=2))
    if not report["ok"]:
        err.print(f"[red]{len(report['failed'])} of {report['tasks']} tasks failed[/red]")
        raise typer.Exit(1)


@tasks_app.command("eval")
def eval_tasks(
    file: Annotated[Path, typer.Argument(help="A JSONL file written by `tasks mine`.")],
    repo: RepoOption = None,
    adapter: Annotated[
        str | None, typer.Option(metavar="NAME", help="A published adapter (policy-vN).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            metavar="PATH",
            help="A model folder, run on the embedded backend "
            "(default: the configured backend and model).",
        ),
    ] = None,  # fmt: skip
    samples: Annotated[int, typer.Option(min=1, help="Rollouts per task.")] = 1,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Rollouts at once (default: cores - 1).")
    ] = None,
    statement: Annotated[
        str,
        typer.Option(
            help="dictated: also says what a one-line fix's line should read; located: "
            "also quotes the faulty line; precise: names the failing tests and the file; "
            "vague: as a person types."
        ),
    ] = "precise",
    steps: Annotated[int, typer.Option(min=1, help="Agent steps per rollout at most.")] = 30,
    wall_s: Annotated[
        float, typer.Option("--wall-s", min=1, help="Seconds per rollout's agent run.")
    ] = 600.0,
    max_tokens: Annotated[int, typer.Option(min=1, help="Tokens per agent step.")] = 1024,
    temperature: Annotated[
        float, typer.Option(min=0.0, help="Sampling temperature (0: greedy).")
    ] = 0.7,
    few_shot: Annotated[
        bool,
        typer.Option(
            "--few-shot/--no-few-shot",
            help="Example turns before the task (--no-few-shot for a `model build-agent` model).",
        ),
    ] = True,
    python: Annotated[
        str | None,
        typer.Option(
            metavar="PATH",
            help="The interpreter that runs the tests (default: the `python` on PATH).",
        ),
    ] = None,  # fmt: skip
    store: Annotated[
        bool, typer.Option("--store/--no-store", help="Record rollouts and their model calls.")
    ] = True,
) -> None:
    """Run the product's own agent on every task in a sealed sandbox; print JSON figures.

    Solve rate overall, per tier and per kind, mean steps, tokens, summaries made and wall
    time. With --store (default) every rollout and each of its model calls (ids, logprobs,
    adapter) go to the feedback database (an embedded SQLite one is migrated first).
    """
    import asyncio

    from agent_server.agent.config import AgentConfig
    from apprentice.prepare import prepare_database, settings_or_exit, startup_errors
    from learner.synth.rollout import RolloutConfig
    from learner.synth.sandbox import SandboxError
    from learner.synth.solve_rates import run_eval_command

    settings = settings_or_exit(err)
    try:
        source = _repo_for(file, repo)
        config = RolloutConfig(statement=statement, step_limit=steps, wall_s=wall_s,  # type: ignore[arg-type]
                               max_tokens=max_tokens, temperature=temperature,
                               agent=AgentConfig(few_shot=few_shot))  # fmt: skip
    except (ValueError, OSError) as exc:
        raise fail(exc) from exc
    if store:
        with startup_errors(err):
            settings.ensure_home()
            prepare_database(settings)
    try:
        report = asyncio.run(
            run_eval_command(
                settings, file, repo=source, adapter=adapter, model=model, samples=samples,
                concurrency=concurrency, config=config, python=python, store=store,
                progress=lambda line: err.print(line, highlight=False, soft_wrap=True),
            )
        )  # fmt: skip
    except (ValueError, SandboxError, OSError) as exc:
        raise fail(exc) from exc
    typer.echo(json.dumps(report, indent=2))
