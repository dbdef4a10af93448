"""Initial schema: sessions, session_events, suggestions, outcomes, adapters, deployments,
learner_runs.

Revision ID: 0001
Revises:
Create Date: 2026-12-02

Written by hand from an autogenerate draft, frozen: it uses plain SQLAlchemy types (no
imports of feedback.models), so later model changes cannot rewrite history. String enums
are VARCHAR(32) with named CHECK constraints, as `feedback.models.base.str_enum` makes them.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
ACTIVE_ONLY = sa.text("status = 'active'")


def ts(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def enum(table: str, column: str, name: str, *values: str, nullable: bool = False) -> list:
    """A VARCHAR(32) column and the CHECK that limits it to `values`."""
    allowed = ", ".join(f"'{v}'" for v in values)
    return [
        sa.Column(column, sa.String(32), nullable=nullable),
        sa.CheckConstraint(f"{column} IN ({allowed})", name=op.f(f"ck_{table}_{name}")),
    ]


def upgrade() -> None:
    op.create_table(
        "learner_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        *enum(
            "learner_runs",
            "status",
            "run_status",
            "queued",
            "running",
            "succeeded",
            "failed",
            "skipped",
        ),
        sa.Column("trigger", sa.String(64), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("steps", sa.JSON(), nullable=False),
        sa.Column("dataset", sa.JSON(), nullable=True),
        sa.Column("adapter_version", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        ts("created_at"),
        ts("started_at", nullable=True),
        ts("finished_at", nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_learner_runs")),
    )
    op.create_index("ix_learner_runs_created_at", "learner_runs", ["created_at"])

    op.create_table(
        "sessions",
        sa.Column("id", sa.String(36), nullable=False),
        ts("created_at"),
        ts("updated_at"),
        *enum("sessions", "mode", "session_mode", "interactive", "autonomous"),
        *enum("sessions", "status", "session_status", "active", "idle", "closed", "failed"),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("workspace_root", sa.Text(), nullable=True),
        sa.Column("client_name", sa.String(64), nullable=True),
        sa.Column("owner", sa.String(128), nullable=True),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
    )

    op.create_table(
        "adapters",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("base_model", sa.String(512), nullable=False),
        sa.Column("parent_version", sa.Integer(), nullable=True),
        *enum("adapters", "status", "adapter_status", "published", "refused", "retired"),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        ts("created_at"),
        sa.ForeignKeyConstraint(
            ["parent_version"],
            ["adapters.version"],
            name=op.f("fk_adapters_parent_version_adapters"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["learner_runs.id"],
            name=op.f("fk_adapters_run_id_learner_runs"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_adapters")),
        sa.UniqueConstraint("name", name=op.f("uq_adapters_name")),
        sa.UniqueConstraint("version", name=op.f("uq_adapters_version")),
    )

    op.create_table(
        "session_events",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(36), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        *enum(
            "session_events",
            "kind",
            "event_kind",
            "message",
            "tool_call",
            "tool_result",
            "summary",
            "edit",
            "error",
            "status",
        ),
        *enum(
            "session_events",
            "role",
            "event_role",
            "system",
            "user",
            "assistant",
            "tool",
            nullable=True,
        ),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=True),
        ts("created_at"),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_session_events_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_session_events")),
        sa.UniqueConstraint("session_id", "seq", name=op.f("uq_session_events_session_id_seq")),
    )
    op.create_index("ix_session_events_kind", "session_events", ["session_id", "kind", "seq"])

    op.create_table(
        "suggestions",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("session_id", sa.String(36), nullable=True),
        *enum("suggestions", "kind", "suggestion_kind", "edit", "completion"),
        sa.Column("model", sa.String(512), nullable=False),
        sa.Column("adapter_version", sa.Integer(), nullable=True),
        sa.Column("prompt_messages", sa.JSON(), nullable=False),
        sa.Column("prompt_token_ids", sa.JSON(), nullable=True),
        sa.Column("completion_text", sa.Text(), nullable=False),
        sa.Column("completion_token_ids", sa.JSON(), nullable=False),
        sa.Column("completion_logprobs", sa.JSON(), nullable=False),
        sa.Column("finish_reason", sa.String(32), nullable=True),
        sa.Column("sampling", sa.JSON(), nullable=True),
        sa.Column("proposed", sa.Text(), nullable=False),
        sa.Column("file_path", sa.Text(), nullable=True),
        sa.Column("latency_s", sa.Float(), nullable=True),
        ts("created_at"),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_suggestions_session_id_sessions"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_suggestions")),
    )
    op.create_index("ix_suggestions_created_at", "suggestions", ["created_at"])
    op.create_index("ix_suggestions_session_id", "suggestions", ["session_id"])

    op.create_table(
        "deployments",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("adapter_version", sa.Integer(), nullable=True),
        sa.Column("backend", sa.String(64), nullable=False),
        *enum(
            "deployments",
            "status",
            "deployment_status",
            "active",
            "superseded",
            "rolled_back",
            "failed",
        ),
        sa.Column("rollback_of", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        ts("created_at"),
        sa.ForeignKeyConstraint(
            ["adapter_version"],
            ["adapters.version"],
            name=op.f("fk_deployments_adapter_version_adapters"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["rollback_of"],
            ["deployments.id"],
            name=op.f("fk_deployments_rollback_of_deployments"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deployments")),
    )
    op.create_index("ix_deployments_backend_id", "deployments", ["backend", "id"])
    # One active deployment per backend.
    op.create_index(
        "uq_deployments_active_backend",
        "deployments",
        ["backend"],
        unique=True,
        postgresql_where=ACTIVE_ONLY,
        sqlite_where=ACTIVE_ONLY,
    )

    op.create_table(
        "outcomes",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("suggestion_id", sa.String(36), nullable=False),
        *enum(
            "outcomes",
            "kind",
            "outcome_kind",
            "shown",
            "accepted",
            "rejected",
            "partially_accepted",
            "edited_after_accept",
            "reverted",
            "persisted",
            "applied",
        ),
        sa.Column("accepted_part", sa.JSON(), nullable=True),
        sa.Column("accepted_length", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("final_text", sa.Text(), nullable=True),
        sa.Column("client_event_id", sa.String(128), nullable=False),
        ts("client_time", nullable=True),
        ts("server_time"),
        sa.ForeignKeyConstraint(
            ["suggestion_id"],
            ["suggestions.id"],
            name=op.f("fk_outcomes_suggestion_id_suggestions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outcomes")),
        sa.UniqueConstraint("client_event_id", name=op.f("uq_outcomes_client_event_id")),
    )
    op.create_index("ix_outcomes_server_time", "outcomes", ["server_time"])
    op.create_index("ix_outcomes_suggestion_id", "outcomes", ["suggestion_id"])


def downgrade() -> None:
    # Children before parents; dropping a table drops its indexes.
    for table in (
        "outcomes",
        "deployments",
        "suggestions",
        "session_events",
        "adapters",
        "sessions",
        "learner_runs",
    ):
        op.drop_table(table)
