"""Learner runs may end `deferred`: the gate had too little evidence to decide (learner/gate.py).
Rollout calls say whether they were decoded under a JSON schema (`rollout_calls.constrained`).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-07

Frozen like 0001: plain SQLAlchemy types, no imports of feedback.models. The status column
keeps its width (32); only its CHECK constraint gains a value. Batch mode: SQLite cannot
alter a constraint, so it copies the table (rows included); PostgreSQL gets ALTER TABLE.
`constrained` is NOT NULL with a server default of false: calls stored before it were
recorded without the flag and read as unconstrained (the learner's trainer weighs their
logprobs as it did). tests/feedback/test_migrations.py checks the result matches
feedback/models/learner.py and feedback/models/rollouts.py.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BEFORE = ("queued", "running", "succeeded", "failed", "skipped")
AFTER = (*BEFORE, "deferred")


def _check(values: tuple[str, ...]) -> None:
    allowed = ", ".join(f"'{v}'" for v in values)
    with op.batch_alter_table("learner_runs") as batch:
        batch.drop_constraint(op.f("ck_learner_runs_run_status"), type_="check")
        batch.create_check_constraint(op.f("ck_learner_runs_run_status"), f"status IN ({allowed})")


def upgrade() -> None:
    _check(AFTER)
    with op.batch_alter_table("rollout_calls") as batch:
        batch.add_column(
            sa.Column("constrained", sa.Boolean(), server_default=sa.false(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("rollout_calls") as batch:
        batch.drop_column("constrained")
    # A deferred run decided nothing: it reads as skipped under the older schema.
    op.execute("UPDATE learner_runs SET status = 'skipped' WHERE status = 'deferred'")
    _check(BEFORE)
