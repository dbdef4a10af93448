"""Alembic migrations of the feedback database (schema: `feedback.models.Base.metadata`).

Run: `apprentice db upgrade` (URL from settings), `feedback.migrate.upgrade(url)`, or
`alembic -c migrations/alembic.ini -x url=sqlite:///PATH upgrade head`.
New revision: `alembic -c migrations/alembic.ini -x url=... revision --autogenerate -m "..."`,
then read and fix what it wrote (it cannot see renames, and CHECKs need names).
"""
