"""Declarative base and column types shared by every feedback table.

Portable across PostgreSQL and SQLite: JSON columns, string enums stored as VARCHAR with a
named CHECK constraint (no native enum types, so migrations stay plain), and `UTCDateTime`,
which always hands back timezone-aware UTC datetimes on both databases.

Not run on its own; `tests/feedback/test_models.py` round-trips every model.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any, get_args

from sqlalchemy import JSON, BigInteger, DateTime, Enum, Integer, MetaData
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator

# Named constraints: Alembic can drop and alter them by name (batch mode on SQLite needs it).
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite only auto-increments a column declared exactly INTEGER PRIMARY KEY.
BigIntId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    """Base of every feedback model; `Base.metadata` is what Alembic migrates."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON(), list[Any]: JSON()}


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def new_uuid() -> str:
    return str(uuid.uuid4())


class UTCDateTime(TypeDecorator[dt.datetime]):
    """A timestamp stored in UTC and read back timezone-aware on every backend.

    PostgreSQL keeps the offset (timestamptz); SQLite stores text without one, so values are
    normalized to UTC on the way in and get `tzinfo=UTC` on the way out. Naive datetimes
    are refused: they are the usual source of off-by-hours bugs.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(
                f"naive datetime {value!r}: pass a timezone-aware one, e.g. "
                "datetime.now(datetime.UTC)"
            )
        value = value.astimezone(dt.UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: dt.datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)


def str_enum(literal: Any, name: str) -> Enum:
    """A VARCHAR column limited by a CHECK to the values of a `Literal[...]` type."""
    values = get_args(literal)
    return Enum(
        *values,
        name=name,
        native_enum=False,
        create_constraint=True,
        # Room for values added later without widening the column.
        length=max(32, *(len(v) for v in values)),
        validate_strings=True,
    )
