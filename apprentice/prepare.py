"""Startup of `apprentice up`, `serve`, `lsp` (in-process mode), `worker` and `chat`: a
database at the head revision and a model to load, or ONE line naming what is missing and
the fix.

    prepare(settings)            # raises StartupError("...: run `apprentice db upgrade`")

    with startup_errors(err):    # in a CLI command: prints `error: <line>`, exits 1
        serve(settings)

Database: an SQLite file (the embedded default) is created or migrated to head on start. An
external database (PostgreSQL) is never migrated behind its owner's back: one that is not at
the head revision is refused, naming `apprentice db upgrade`.

Model (the embedded backend's; an HTTP model server holds its own, but the learner's worker
trains on the base model's weights whatever the backend: `trains=True`):
- the default real model ($APPRENTICE_HOME/models/smollm2-135m-instruct) not installed ->
  installed on first start, progress on stderr, as `apprentice model install` does. Every
  command installs (the VS Code extension auto-starts `serve` on a fresh home: the person gets
  a server, not an error). Offline -> StartupError naming `apprentice model install` and
  `--model` / APPRENTICE_MODEL_NAME.
- the dev model folder ($APPRENTICE_HOME/models/dev) missing -> built (a few minutes), as
  `apprentice model build-dev` does.
- any other folder without a model -> StartupError naming the ways to get one.

Nothing here writes to stdout: `apprentice lsp` speaks the protocol there. Tested with real
processes in tests/test_fresh_home.py.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from ground.settings import Settings

Say = Callable[[str], None]
MODEL_FIX = "or use a model you have with --model PATH (APPRENTICE_MODEL_NAME)"


class StartupError(Exception):
    """A process cannot start; the message is one line that names what is missing and the fix."""


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def redact(url: str) -> str:
    """A database URL as it may be shown: the password hidden."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable url>"


def settings_or_exit(console: object) -> Settings:
    """The settings, or `error: invalid settings: ...` on `console` and exit code 2."""
    import typer

    try:
        return Settings()
    except Exception as exc:  # pydantic's message names the field and the fix
        console.print(f"[red]error:[/red] invalid settings: {exc}")  # type: ignore[attr-defined]
        raise typer.Exit(2) from exc


def prepare(
    settings: Settings,
    *,
    install_model: bool = True,
    build_dev: bool = True,
    trains: bool = False,
    say: Say = _say,
) -> None:
    """Make the home, the database and the model ready, or raise StartupError (one line).

    `trains`: the process loads the base model's weights whatever the backend (the learner's
    worker): the default and dev model folders are installed or built for it too."""
    try:
        settings.ensure_home()
    except OSError as exc:
        raise StartupError(
            f"cannot create APPRENTICE_HOME {settings.home}: {_one_line(exc)}; "
            "set APPRENTICE_HOME to a folder you can write"
        ) from exc
    check_learner_settings(settings)
    # A builder or an installer that prints must not reach stdout (the LSP protocol's channel).
    with contextlib.redirect_stdout(sys.stderr):
        prepare_database(settings)
        prepare_model(settings, install=install_model, build_dev=build_dev, trains=trains, say=say)


def check_learner_settings(settings: Settings) -> None:
    """The learner's settings ([learner] in config.toml) are valid, or StartupError naming
    the field: a mistake there would otherwise surface only when a cycle starts."""
    from learner.runs import learner_defaults

    try:
        learner_defaults(settings)
    except ValueError as exc:
        raise StartupError(str(exc)) from None


def prepare_database(settings: Settings) -> None:
    """Migrate an SQLite database to head; refuse an external one that is not at head."""
    from alembic.util import CommandError
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    from feedback.migrate import current_revision, head_revision, upgrade

    url, shown = settings.database_url, redact(settings.database_url)
    try:
        if make_url(url).get_backend_name() == "sqlite":
            upgrade(url)
            return
        current = current_revision(url)
    except CommandError as exc:  # e.g. a revision this version does not know
        raise StartupError(
            f"cannot migrate the feedback database at {shown}: {_one_line(exc)} "
            "(was it migrated by a newer Apprentice?)"
        ) from exc
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        raise StartupError(
            f"cannot open the feedback database at {shown}: {_one_line(exc)}; "
            "check APPRENTICE_DATABASE_URL"
        ) from exc
    head = head_revision()
    if current == head:
        return
    if current is None:
        state = "has no schema"
    elif not _known_revision(current):
        raise StartupError(
            f"the feedback database at {shown} is at revision {current}, which this Apprentice "
            "does not know: it was migrated by a newer version; upgrade Apprentice"
        )
    else:
        state = f"is at revision {current}, not the head revision {head}"
    raise StartupError(
        f"the feedback database at {shown} {state}: run `apprentice db upgrade` "
        "(same APPRENTICE_DATABASE_URL) before starting"
    )


def _known_revision(revision: str) -> bool:
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    from feedback.migrate import alembic_config

    try:
        return ScriptDirectory.from_config(alembic_config("")).get_revision(revision) is not None
    except CommandError:
        return False


def prepare_model(
    settings: Settings,
    *,
    install: bool = True,
    build_dev: bool = True,
    trains: bool = False,
    say: Say = _say,
) -> None:
    """A loadable model at `settings.model_name` for the embedded backend, or StartupError."""
    folder = Path(settings.model_name).expanduser().absolute()
    ours = folder in (settings.dev_model_dir, settings.default_model_dir)
    if settings.model_backend != "embedded" and not (trains and ours):
        return  # the HTTP model server has its model; `model_name` may be its served name
    if folder == settings.dev_model_dir:
        if (folder / "config.json").is_file():
            return
        if not build_dev:
            raise StartupError(f"no dev model at {folder}: run `apprentice model build-dev`")
        from modelbuild.dev import run_build_dev

        with _lock(settings.models_dir / ".dev.lock"):  # a second starter waits, then finds it
            if not (folder / "config.json").is_file():
                say(f"building the dev model into {folder} (first start only, a few minutes)")
                run_build_dev(folder)
        return
    if folder == settings.default_model_dir:
        _install_default(settings, folder, install=install, say=say)
        return
    if (folder / "config.json").is_file():
        return
    raise StartupError(
        f"no model at {folder} (APPRENTICE_MODEL_NAME / --model): point it at a Hugging Face "
        "model folder, or get one with `apprentice model install` or "
        "`apprentice model import PATH.gguf`"
    )


def _install_default(settings: Settings, folder: Path, *, install: bool, say: Say) -> None:
    from agent_server.models.install import DEFAULT_MODEL, InstallError, install_model, is_installed

    if is_installed(folder):
        return
    if not install:
        raise StartupError(
            f"no model installed at {folder}: run `apprentice model install`, {MODEL_FIX}"
        )
    # Two starters on one home (the editor's `serve` and a person's `up`): one installs, the
    # other waits here and then finds the model installed.
    with _lock(settings.models_dir / f".{DEFAULT_MODEL}.lock"):
        if is_installed(folder):
            return
        say(f"no model at {folder}: installing {DEFAULT_MODEL} (first start only, a few minutes)")
        try:
            install_model(DEFAULT_MODEL, settings.models_dir, say=_timed(say))
        except InstallError as exc:
            raise StartupError(
                f"no model at {folder}, and installing {DEFAULT_MODEL} failed: {_one_line(exc)}; "
                f"run `apprentice model install` when online, {MODEL_FIX}"
            ) from exc


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no lock, installs stay atomic
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _timed(say: Say) -> Say:
    """Install progress as plain stderr lines with the time so far (a log file reads them)."""
    import time

    started = time.monotonic()

    def timed(line: str) -> None:
        say(f"  {time.monotonic() - started:6.1f}s {line}")

    return timed


def use_model_option(model: str | None) -> None:
    """`--model PATH|NAME` of a command: APPRENTICE_MODEL_NAME for this process and children.

    A path that exists is made absolute (the learner's children share it); anything else is
    left as given (the served name of an HTTP model server)."""
    if not model:
        return
    path = Path(model).expanduser()
    os.environ["APPRENTICE_MODEL_NAME"] = str(path.absolute()) if path.exists() else model


@contextlib.contextmanager
def startup_errors(console: object) -> Iterator[None]:
    """In a CLI command: a StartupError becomes `error: <line>` on stderr and exit code 1."""
    import typer
    from rich.markup import escape

    try:
        yield
    except StartupError as exc:
        line = escape(_one_line(exc))
        console.print(f"[red]error:[/red] {line}", soft_wrap=True, highlight=False)  # type: ignore[attr-defined]
        raise typer.Exit(1) from None
