"""Engine and session setup for the feedback database (PostgreSQL or SQLite).

    from feedback.db import DatabaseConfig, make_engine, make_sessionmaker, transaction
    engine = make_engine("sqlite:////tmp/apprentice.db")
    Session = make_sessionmaker(engine)
    with transaction(Session) as db:          # commits on success, rolls back on error
        create_session(db, mode="interactive")

SQLite gets foreign keys on, WAL (readers never wait for the writer), a busy timeout, and
`BEGIN IMMEDIATE` transactions: a deferred transaction that reads and then writes fails at
once with "database is locked" when another connection wrote in between, whereas an
immediate one waits its turn. PostgreSQL gets `pool_pre_ping` so a restarted server costs
one reconnect, not an error.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session, sessionmaker


class DatabaseConfig(BaseModel):
    """How to connect to the feedback database."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(
        description="SQLAlchemy URL: sqlite:///PATH or postgresql+psycopg://user@host/db."
    )
    echo: bool = Field(default=False, description="Log every SQL statement (debugging).")
    sqlite_busy_timeout_ms: int = Field(
        default=30_000,
        ge=0,
        description="SQLite: how long a writer waits for another one before 'database is locked'.",
    )
    sqlite_begin: Literal["IMMEDIATE", "DEFERRED"] = Field(
        default="IMMEDIATE",
        description="SQLite: how transactions start. IMMEDIATE takes the write lock up front "
        "so read-then-write transactions never fail under concurrent writers.",
    )
    pool_size: int = Field(default=5, ge=1, description="PostgreSQL: pooled connections.")

    @field_validator("url")
    @classmethod
    def _parseable(cls, value: str) -> str:
        try:
            url = make_url(value)
        except ArgumentError as exc:
            raise ValueError(
                f"not a SQLAlchemy URL ({exc}); use sqlite:///PATH or "
                "postgresql+psycopg://user@host:5432/dbname"
            ) from None
        if url.get_backend_name() not in ("sqlite", "postgresql"):
            raise ValueError(
                f"unsupported database {url.get_backend_name()!r}: use sqlite:///PATH or "
                "postgresql+psycopg://user@host:5432/dbname"
            )
        return value


def make_engine(config: DatabaseConfig | str) -> Engine:
    """An Engine for the feedback database, tuned for its backend (see module docstring)."""
    if isinstance(config, str):
        config = DatabaseConfig(url=config)
    url = make_url(config.url)
    if url.get_backend_name() == "sqlite":
        engine = create_engine(url, echo=config.echo)
        _tune_sqlite(engine, config)
        return engine
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")  # psycopg 3 is what we install
    return create_engine(url, echo=config.echo, pool_pre_ping=True, pool_size=config.pool_size)


def _tune_sqlite(engine: Engine, config: DatabaseConfig) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Hand transaction control to SQLAlchemy (the "begin" hook below); pysqlite's own
        # implicit BEGIN would be deferred and skip SELECTs.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={config.sqlite_busy_timeout_ms}")
        if engine.url.database not in (None, "", ":memory:"):
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")  # safe with WAL; fsync per checkpoint
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql(f"BEGIN {config.sqlite_begin}")


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """ORM sessions bound to `engine`; objects stay readable after commit."""
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commit when the block ends, roll back if it raises."""
    with factory() as db, db.begin():
        yield db
