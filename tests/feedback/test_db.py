"""Engine setup: SQLite pragmas and transactions, PostgreSQL pre-ping, config validation.

Run: .venv/bin/python -m pytest tests/feedback/test_db.py -q
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from sqlalchemy import text

from feedback.db import DatabaseConfig, make_engine, make_sessionmaker, transaction
from feedback.models import AgentSession


def test_sqlite_engine_pragmas(sqlite_head_url: str) -> None:
    engine = make_engine(sqlite_head_url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000
    engine.dispose()


def test_sqlite_transactions_really_roll_back(sqlite_head_url: str) -> None:
    """pysqlite's own transaction handling is replaced; rollback must still undo writes."""
    engine = make_engine(sqlite_head_url)
    factory = make_sessionmaker(engine)
    with pytest.raises(RuntimeError), transaction(factory) as s:
        s.add(AgentSession(mode="interactive"))
        s.flush()
        raise RuntimeError("undo")
    with factory() as s:
        assert s.scalar(text("SELECT count(*) FROM sessions")) == 0
    with factory() as s, s.begin():  # SAVEPOINTs work (they do not with pysqlite defaults)
        s.add(AgentSession(mode="interactive", id="kept"))
        nested = s.begin_nested()
        s.add(AgentSession(mode="interactive", id="dropped"))
        s.flush()
        nested.rollback()
    with factory() as s:
        assert s.scalars(text("SELECT id FROM sessions")).all() == ["kept"]
    engine.dispose()


def test_sqlite_writer_waits_instead_of_failing(sqlite_head_url: str) -> None:
    """With BEGIN IMMEDIATE a second writer waits for the lock (here: times out after
    the configured busy timeout) rather than failing mid-transaction."""
    holder = make_engine(sqlite_head_url)
    waiter = make_engine(DatabaseConfig(url=sqlite_head_url, sqlite_busy_timeout_ms=200))
    with holder.begin() as conn:
        conn.exec_driver_sql("SELECT 1")  # BEGIN IMMEDIATE: the write lock is held now
        with pytest.raises(Exception, match="database is locked"), waiter.begin() as other:
            other.exec_driver_sql("SELECT 1")
    with waiter.begin() as other:  # free again once the holder committed
        other.exec_driver_sql("SELECT 1")
    holder.dispose()
    waiter.dispose()


@pytest.mark.postgres
def test_postgres_engine(pg_head_url: str) -> None:
    engine = make_engine(pg_head_url.replace("postgresql+psycopg", "postgresql"))
    assert engine.dialect.driver == "psycopg"
    assert engine.pool._pre_ping  # type: ignore[attr-defined]
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM sessions")).scalar() == 0
    engine.dispose()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url", "not a SQLAlchemy URL"),
        ("mysql://u@h/db", "unsupported database 'mysql'"),
    ],
)
def test_config_refuses_bad_urls(url: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        DatabaseConfig(url=url)


def test_config_refuses_negative_timeout() -> None:
    with pytest.raises(ValidationError, match="sqlite_busy_timeout_ms"):
        DatabaseConfig(url="sqlite://", sqlite_busy_timeout_ms=-1)


def test_in_memory_sqlite_works_without_wal() -> None:
    engine = make_engine("sqlite://")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "memory"
    engine.dispose()
