"""`apprentice db upgrade|downgrade` through the real CLI process.

Run: .venv/bin/python -m pytest tests/feedback/test_cli_db.py -q
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, inspect, pool

from tests.fixtures.settings import run_cli


def _tables(url: str) -> set[str]:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_db_upgrade_then_downgrade_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    env = {"APPRENTICE_DATABASE_URL": url}
    done = run_cli("db", "upgrade", env=env)
    assert done.returncode == 0, done.stderr
    assert "is at head" in " ".join(done.stderr.split())  # rich wraps long lines
    assert {"sessions", "suggestions", "outcomes", "alembic_version"} <= _tables(url)

    done = run_cli("db", "downgrade", "base", env=env)
    assert done.returncode == 0, done.stderr
    assert _tables(url) == {"alembic_version"}


def test_db_upgrade_default_url_is_the_embedded_sqlite_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = run_cli("db", "upgrade", env={"APPRENTICE_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert "outcomes" in _tables(f"sqlite:///{home / 'apprentice.db'}")
