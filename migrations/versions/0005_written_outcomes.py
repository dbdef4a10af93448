"""Outcomes may be `written`: a suggestion that was not taken, and what the person wrote at its
place instead within the settle time (`final_text`; feedback/vocab.py WRITTEN).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-07

Frozen like 0001: plain SQL, no imports of feedback.models. The kind column keeps its width
(32); only its CHECK constraint gains a value. Batch mode: SQLite cannot alter a constraint,
so it copies the table (rows included); PostgreSQL gets ALTER TABLE.
tests/feedback/test_migrations.py checks the result matches feedback/models/suggestions.py.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BEFORE = ("shown", "accepted", "rejected", "partially_accepted", "edited_after_accept",
          "reverted", "persisted", "applied")  # fmt: skip
AFTER = (*BEFORE, "written")


def _check(values: tuple[str, ...]) -> None:
    allowed = ", ".join(f"'{v}'" for v in values)
    with op.batch_alter_table("outcomes") as batch:
        batch.drop_constraint(op.f("ck_outcomes_outcome_kind"), type_="check")
        batch.create_check_constraint(op.f("ck_outcomes_outcome_kind"), f"kind IN ({allowed})")


def upgrade() -> None:
    _check(AFTER)


def downgrade() -> None:
    # What the person wrote is not a verdict the older schema can hold: it is dropped.
    op.execute("DELETE FROM outcomes WHERE kind = 'written'")
    _check(BEFORE)
