"""Alembic environment: which database to migrate and what schema it should have.

The schema is `feedback.models.Base.metadata` (never defined twice). The URL comes from, in
order: an open connection in `config.attributes["connection"]`, `config.attributes["url"]`,
`-x url=...` on the alembic command line, `sqlalchemy.url` set on the Config, and finally
`Settings().database_url` (APPRENTICE_DATABASE_URL or the embedded SQLite file).
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from feedback.models import Base

config = context.config
target_metadata = Base.metadata

if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def database_url() -> str:
    url = config.attributes.get("url") or context.get_x_argument(as_dictionary=True).get("url")
    url = url or config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from ground.settings import Settings  # only when nothing else named a database

    return Settings().database_url


def configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things; batch mode copies the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    """`alembic upgrade head --sql`: print the SQL instead of running it."""
    url = database_url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=url.startswith("sqlite"),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    given = config.attributes.get("connection")
    if given is not None:
        configure(given)
        return
    # A plain engine, not feedback.db.make_engine: with SQLite foreign keys on, batch mode's
    # DROP TABLE would cascade-delete rows of the referencing tables.
    engine = create_engine(database_url(), poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            configure(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
