"""The feedback log: SQLAlchemy models, engine setup and small query functions.

Imports nothing of ours. `feedback.models` holds the tables, `feedback.db` the engine and
session setup, `feedback.queries` the keyword-only functions the other rooms call, and
`feedback.migrate` runs the Alembic migrations in `migrations/`.
"""
