"""Users with their own tokens; sessions, suggestions and outcomes record whose they are.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-05

Frozen like 0001: plain SQLAlchemy types, no imports of feedback.models. The schema is
feedback/models/users.py's and the `user_id` columns of sessions.py / suggestions.py;
tests/feedback/test_migrations.py checks they agree, and that an upgrade from 0002 keeps
the rows already there (`user_id` NULL: the shared token's).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ATTRIBUTED = ("sessions", "suggestions", "outcomes")


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("admin", sa.Boolean(), nullable=False),
        sa.Column("learn", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("rotated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("name", name=op.f("uq_users_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_users_token_hash")),
    )
    for table in ATTRIBUTED:
        # Batch mode: SQLite cannot add a foreign key to an existing table, so it copies the
        # table (rows included); PostgreSQL gets plain ALTER TABLE statements.
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("user_id", sa.Integer(), nullable=True))
            batch.create_foreign_key(
                op.f(f"fk_{table}_user_id_users"), "users", ["user_id"], ["id"],
                ondelete="SET NULL",
            )  # fmt: skip
            batch.create_index(op.f(f"ix_{table}_user_id"), ["user_id"])


def downgrade() -> None:
    for table in ATTRIBUTED:
        with op.batch_alter_table(table) as batch:
            batch.drop_index(op.f(f"ix_{table}_user_id"))
            batch.drop_constraint(op.f(f"fk_{table}_user_id_users"), type_="foreignkey")
            batch.drop_column("user_id")
    op.drop_table("users")
