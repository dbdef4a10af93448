"""The `apprentice` command line: `apprentice --help` lists what it does.

Run `apprentice COMMAND --help` for one command. Settings come from `APPRENTICE_*`
environment variables and an optional TOML file (docs/configuration.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from apprentice.settings import Settings

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


def not_built_yet(what: str, issue: int) -> NoReturn:
    err.print(f"[yellow]not built yet:[/yellow] {what} arrives with issue #{issue}.")
    raise typer.Exit(3)


@app.command()
def up() -> None:
    """Run everything on embedded defaults: agent server, learner worker and schedule.

    Builds the dev model and the SQLite database under $APPRENTICE_HOME when missing.
    Ctrl-C stops it cleanly.
    """
    not_built_yet("`apprentice up` (server + worker)", 4)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to bind (default: settings).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: settings).")] = None,
) -> None:
    """Run the agent server (HTTP + WebSocket at /v1/ws)."""
    not_built_yet("the agent server", 4)


@app.command()
def lsp(
    tcp: Annotated[
        str | None, typer.Option(metavar="HOST:PORT", help="Serve over TCP instead of stdio.")
    ] = None,
) -> None:
    """Run the language server for Neovim, Helix, Emacs and any LSP editor (stdio default)."""
    not_built_yet("the language server", 6)


@app.command()
def worker() -> None:
    """Run a learner worker (Celery) on the configured broker."""
    not_built_yet("the learner worker", 5)


@app.command()
def learn() -> None:
    """Run one learning cycle in the foreground and print its metrics."""
    not_built_yet("the learner", 5)


@app.command()
def chat(
    task: Annotated[str, typer.Argument(help="What you want done.")],
    workspace: Annotated[
        Path, typer.Option(help="Folder the agent may read and edit.", file_okay=False)
    ] = Path("."),
) -> None:
    """Chat with the agent in the terminal; review proposed diffs and accept or reject them."""
    not_built_yet("`apprentice chat`", 4)


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
    seed: Annotated[int, typer.Option(help="Random seed; the same seed builds the same model.")] = 0,
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
