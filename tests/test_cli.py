"""The `apprentice` command line: help everywhere, the contract's commands, usage errors.

Each check runs the real CLI as a subprocess (`python -m apprentice.cli ...`). The command
tree is walked from the typer app, so a command added later is covered without editing this
file.

    .venv/bin/python -m pytest tests/test_cli.py -q
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from sqlalchemy import create_engine, text

from apprentice import cli
from tests.fixtures.databases import PG_ADMIN_URL

REPO = Path(__file__).resolve().parents[1]
# DESIGN.md's CLI contract: other parts (scripts, compose, docs, the extension) call these.
CONTRACT = [["up"], ["serve"], ["lsp"], ["worker"], ["learn"], ["chat"], ["db", "upgrade"],
            ["model", "build-dev"], ["tasks", "mine"], ["tasks", "verify"],
            ["tasks", "eval"]]  # fmt: skip


def apprentice(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    """`apprentice ARGS` as a real process, stdin closed so nothing can wait on a terminal."""
    return subprocess.run(
        [sys.executable, "-m", "apprentice.cli", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
        timeout=timeout,
        cwd=REPO,
    )


def walk(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every (path, command) of the tree; groups are the ones with a `commands` mapping
    (typer ships its own copy of click, so no isinstance check against click's classes)."""
    yield path, command
    for name, child in sorted(getattr(command, "commands", {}).items()):
        yield from walk(child, (*path, name))


TREE = dict(walk(typer.main.get_command(cli.app)))


def first_line(command: Any) -> str:
    return (command.help or "").strip().splitlines()[0] if command.help else ""


def test_contract_commands_exist():
    for path in CONTRACT:
        assert tuple(path) in TREE, f"`apprentice {' '.join(path)}` is part of the CLI contract"
        assert not hasattr(TREE[tuple(path)], "commands"), f"{path} must be a command, not a group"


@pytest.mark.parametrize("path", list(TREE), ids=lambda p: " ".join(p) or "apprentice")
def test_help(path):
    command = TREE[path]
    done = apprentice(*path, "--help")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Usage:" in out
    description = first_line(command)
    assert description, f"`apprentice {' '.join(path)}` has no help text (give it a docstring)"
    # rich wraps long lines in the help box; compare words, not line breaks.
    assert " ".join(description.split()[:6]) in " ".join(out.replace("│", " ").split())
    for child in getattr(command, "commands", {}):
        assert child in out, f"`{child}` missing from the help of {path or 'apprentice'}"


def test_no_arguments_shows_help():
    done = apprentice()
    assert "Usage:" in done.stdout + done.stderr
    assert "serve" in done.stdout + done.stderr


def test_unknown_command_is_a_usage_error():
    done = apprentice("no-such-command")
    assert done.returncode == 2
    assert "no-such-command" in done.stderr


def test_invalid_settings_exit_2_naming_the_field(tmp_path):
    done = apprentice("db", "upgrade", env={"APPRENTICE_PORT": "70000"})
    assert done.returncode == 2
    assert "invalid settings" in done.stderr
    assert "port" in done.stderr and "65535" in done.stderr


@pytest.fixture
def empty_pg_database() -> Iterator[str]:
    """A database of this test's own: `db upgrade` changes it, so no shared one is used."""
    name = f"apprentice_cli_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.mark.postgres
def test_db_upgrade_on_postgres_as_compose_runs_it(empty_pg_database):
    """docker-compose.yml's `migrate` service: `apprentice db upgrade` on postgresql+psycopg."""
    done = apprentice("db", "upgrade", env={"APPRENTICE_DATABASE_URL": empty_pg_database})
    assert done.returncode == 0, done.stderr
    engine = create_engine(empty_pg_database)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar_one() == 1
        # A second run is a no-op, as a restarted migrate container must be.
        again = apprentice("db", "upgrade", env={"APPRENTICE_DATABASE_URL": empty_pg_database})
        assert again.returncode == 0, again.stderr
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_db_upgrade_hides_the_database_password(empty_pg_database):
    url = empty_pg_database.replace("postgres@", "postgres:pw-not-needed@")
    done = apprentice("db", "upgrade", env={"APPRENTICE_DATABASE_URL": url})
    assert done.returncode == 0, done.stderr  # trust auth ignores the password
    assert "pw-not-needed" not in done.stderr + done.stdout
    assert "***" in done.stderr


def test_build_agent_without_a_base_model_is_one_clear_error(tmp_path):
    done = apprentice("model", "build-agent", "--base", str(tmp_path / "nothing"),
                      "--out", str(tmp_path / "agent"))  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "error:" in done.stderr and "no config.json" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "agent").exists()
