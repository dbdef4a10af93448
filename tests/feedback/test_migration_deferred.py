"""The deferred-runs migration (0004): a database at 0003 with runs keeps them, then accepts
a `deferred` run (refused before); a downgrade turns deferred runs into skipped ones. On
SQLite (batch mode copies the table) and PostgreSQL (ALTER TABLE).

Run: .venv/bin/python -m pytest tests/feedback/test_migration_deferred.py -q
"""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, pool, text
from sqlalchemy.exc import IntegrityError

from feedback.migrate import current_revision, downgrade, upgrade
from tests.fixtures.databases import fresh_pg_database

T = "'2026-12-01 10:00:00+00:00'"


def run_row(status: str) -> str:
    return ("INSERT INTO learner_runs (status, trigger, config, steps, created_at) "
            f"VALUES ('{status}', 'test', '{{}}', '[]', {T})")  # fmt: skip


def _check(url: str) -> None:
    upgrade(url, "0003")
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(text(run_row("succeeded")))
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(text(run_row("deferred")))  # not a status before 0004
        upgrade(url, "0004")
        assert current_revision(url) == "0004"
        with engine.begin() as conn:
            conn.execute(text(run_row("deferred")))
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(text(run_row("postponed")))  # the constraint still holds
        with engine.connect() as conn:
            statuses = conn.execute(text("SELECT status FROM learner_runs ORDER BY id")).all()
            assert [s for (s,) in statuses] == ["succeeded", "deferred"]
        downgrade(url, "0003")
        with engine.connect() as conn:
            statuses = conn.execute(text("SELECT status FROM learner_runs ORDER BY id")).all()
            assert [s for (s,) in statuses] == ["succeeded", "skipped"]
    finally:
        engine.dispose()


def test_deferred_runs_on_sqlite(sqlite_url: str) -> None:
    _check(sqlite_url)


@pytest.mark.postgres
def test_deferred_runs_on_postgres() -> None:
    with fresh_pg_database() as url:
        _check(url)
