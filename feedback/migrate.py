"""Run the Alembic migrations in `migrations/` from code: `upgrade(url)`, `downgrade(url, rev)`.

Used by `apprentice db upgrade|downgrade` and by the test fixtures. Try it:
    python -c "from feedback.migrate import upgrade; upgrade('sqlite:////tmp/a.db')"
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, pool


def migrations_dir() -> Path:
    """The repository's migrations/ folder (found by path: feedback imports none of ours)."""
    beside = Path(__file__).resolve().parents[1] / "migrations"
    if (beside / "env.py").is_file():
        return beside
    spec = importlib.util.find_spec("migrations")  # installed as a package, not editable
    if spec is not None and spec.origin is not None:
        return Path(spec.origin).parent
    raise FileNotFoundError(
        f"no Alembic migrations folder at {beside}; reinstall the package with "
        "`pip install -e .` from the repository root"
    )


def alembic_config(url: str) -> Config:
    folder = migrations_dir()
    config = Config(str(folder / "alembic.ini"))
    config.set_main_option("script_location", str(folder))
    config.attributes["url"] = url
    config.attributes["configure_logger"] = False  # leave the caller's logging alone
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at `url` up to `revision` (creating the schema if empty)."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Migrate the database at `url` down to `revision` (`base` drops every table)."""
    command.downgrade(alembic_config(url), revision)


def current_revision(url: str) -> str | None:
    """The revision the database is at; None when it was never migrated."""
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config("")).get_current_head()
