"""Alembic migrations: head -> base -> head on SQLite and PostgreSQL, and the migrated schema
matches the models (columns, types, indexes, constraint names).

Run: .venv/bin/python -m pytest tests/feedback/test_migrations.py -q
"""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, pool

from feedback.migrate import current_revision, downgrade, head_revision, upgrade
from feedback.models import Base
from tests.fixtures.databases import fresh_pg_database

TABLES = {
    "sessions",
    "session_events",
    "suggestions",
    "outcomes",
    "adapters",
    "deployments",
    "learner_runs",
    "task_rollouts",
    "rollout_calls",
    "users",
}


def _tables(url: str) -> set[str]:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def _schema_diff(url: str) -> list:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            return compare_metadata(ctx, Base.metadata)
    finally:
        engine.dispose()


def _cycle(url: str) -> None:
    assert current_revision(url) is None
    upgrade(url)
    assert current_revision(url) == head_revision() == "0005"
    assert _tables(url) == TABLES
    assert _schema_diff(url) == []
    downgrade(url, "base")
    assert current_revision(url) is None
    assert _tables(url) == set()
    upgrade(url, "head")
    assert _tables(url) == TABLES
    assert _schema_diff(url) == []


def test_cycle_on_sqlite(sqlite_url: str) -> None:
    _cycle(sqlite_url)


@pytest.mark.postgres
def test_cycle_on_postgres() -> None:
    with fresh_pg_database() as url:
        _cycle(url)


def _names(url: str) -> dict[str, set[str]]:
    engine = create_engine(url, poolclass=pool.NullPool)
    insp = inspect(engine)
    try:
        found: dict[str, set[str]] = {}
        for table in TABLES:
            names = {insp.get_pk_constraint(table)["name"]}
            names |= {c["name"] for c in insp.get_unique_constraints(table)}
            names |= {c["name"] for c in insp.get_foreign_keys(table)}
            names |= {c["name"] for c in insp.get_check_constraints(table)}
            names |= {i["name"] for i in insp.get_indexes(table)}
            found[table] = names
        return found
    finally:
        engine.dispose()


def _model_names() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for table in Base.metadata.sorted_tables:
        names = {c.name for c in table.constraints} | {i.name for i in table.indexes}
        # An Enum's CHECK is attached at DDL time, not listed in table.constraints.
        for column in table.columns:
            if getattr(column.type, "native_enum", True) is False:
                names.add(f"ck_{table.name}_{column.type.name}")
        found[table.name] = {str(n) for n in names}
    return found


@pytest.mark.postgres
def test_constraint_names_match_models(pg_url: str) -> None:
    """Later migrations drop constraints by name: the migrated names must be the models'."""
    upgrade(pg_url)
    assert _names(pg_url) == _model_names()


def test_check_constraints_hold_after_migration(sqlite_url: str) -> None:
    import sqlite3

    upgrade(sqlite_url)
    conn = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed"):
        conn.execute(
            "INSERT INTO sessions (id, created_at, updated_at, mode, status, last_seq, meta) "
            "VALUES ('x', '2026-01-01', '2026-01-01', 'telepathic', 'active', 0, '{}')"
        )
    conn.close()
