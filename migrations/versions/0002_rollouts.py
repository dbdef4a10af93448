"""Rollouts of the agent on mined tasks: task_rollouts, rollout_calls.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-05

Frozen like 0001: plain SQLAlchemy types, no imports of feedback.models. The schema is
feedback/models/rollouts.py's; tests/feedback/test_migrations.py checks they agree.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "task_rollouts",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("session_id", sa.String(36), nullable=True),
        sa.Column("instance_id", sa.String(256), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("difficulty", sa.String(32), nullable=False),
        sa.Column("statement", sa.String(32), nullable=False),
        sa.Column("model", sa.String(512), nullable=False),
        sa.Column("adapter", sa.String(128), nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("reward", sa.Float(), nullable=False),
        sa.Column("reward_terms", sa.JSON(), nullable=False),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("summaries", sa.Integer(), nullable=False),
        sa.Column("wall_s", sa.Float(), nullable=False),
        sa.Column("diff", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["learner_runs.id"],
            name=op.f("fk_task_rollouts_run_id_learner_runs"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_task_rollouts_session_id_sessions"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_rollouts")),
    )
    op.create_index("ix_task_rollouts_instance_id", "task_rollouts", ["instance_id"])
    op.create_index("ix_task_rollouts_run_id", "task_rollouts", ["run_id"])

    op.create_table(
        "rollout_calls",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("rollout_id", sa.String(36), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.CheckConstraint(
            "kind IN ('agent', 'summary')", name=op.f("ck_rollout_calls_rollout_call_kind")
        ),
        sa.Column("prompt_token_ids", sa.JSON(), nullable=True),
        sa.Column("completion_token_ids", sa.JSON(), nullable=False),
        sa.Column("logprobs", sa.JSON(), nullable=False),
        sa.Column("adapter", sa.String(128), nullable=True),
        sa.Column("finish_reason", sa.String(32), nullable=True),
        sa.ForeignKeyConstraint(
            ["rollout_id"],
            ["task_rollouts.id"],
            name=op.f("fk_rollout_calls_rollout_id_task_rollouts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rollout_calls")),
    )
    op.create_index(
        "ix_rollout_calls_rollout_id_seq", "rollout_calls", ["rollout_id", "seq"], unique=True
    )


def downgrade() -> None:
    op.drop_table("rollout_calls")
    op.drop_table("task_rollouts")
