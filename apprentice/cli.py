"""The `apprentice` command line: `apprentice --help` lists what it does.

Run `apprentice COMMAND --help` for one command. Settings come from `APPRENTICE_*`
environment variables and an optional TOML file (docs/configuration.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ground.settings import Settings

app = typer.Typer(
    help="Apprentice: a coding agent that lives in your editor and learns from you.\n\n"
    "Start everything on embedded defaults with `apprentice up`.",
    no_args_is_help=True,
    add_completion=False,
)
db_app = typer.Typer(help="The feedback database (Alembic migrations).", no_args_is_help=True)
model_app = typer.Typer(help="Models: build the small dev model.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(model_app, name="model")

err = Console(stderr=True)


def load_settings() -> Settings:
    try:
        return Settings()
    except Exception as exc:  # pydantic's message names the field and the fix
        err.print(f"[red]error:[/red] invalid settings: {exc}")
        raise typer.Exit(2) from exc


@app.command()
def up() -> None:
    """Run everything on embedded defaults: agent server, learner worker and schedule.

    Builds the dev model and the SQLite database under $APPRENTICE_HOME when missing.
    Ctrl-C stops it cleanly.
    """
    from apprentice.run import up as run_up

    run_up(load_settings())


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to bind (default: settings).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: settings).")] = None,
) -> None:
    """Run the agent server (HTTP + WebSocket at /v1/ws)."""
    from apprentice.run import serve as run_serve

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
) -> None:
    """Run the language server for Neovim, Helix, Emacs and any LSP editor (stdio default)."""
    settings = load_settings()
    from lsp.run import make_config, run

    try:
        config = make_config(settings, tcp=tcp, server=server)
    except ValueError as exc:  # a bad --tcp / --server value: say which and how to fix it
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    run(settings, config)


@app.command()
def worker() -> None:
    """Run a learner worker (Celery) on the configured broker."""
    from learner.cli import run_worker

    run_worker(load_settings())


@app.command()
def learn() -> None:
    """Run one learning cycle in the foreground and print its metrics."""
    from learner.cli import learn_once

    raise typer.Exit(learn_once(load_settings(), err))


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
    from agent_server.models.devmodel import run_build_dev

    run_build_dev(out or load_settings().dev_model_dir, steps=steps, seed=seed)


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
