"""Rollouts of the agent on mined tasks (`TaskRollout`) and every model call of each
(`RolloutCall`): what the learner trains on and what `apprentice tasks eval` reports.

A rollout is one run of the product's agent loop on one task (learner/synth/rollout.py): its
outcome (`status`: the agent run's status, or "crashed"), its `reward` with every term that
made it (`reward_terms`, learner/synth/reward.py), whether a limit cut it off (`truncated`:
the learner masks those from the loss), its size (steps, tokens, summaries, wall seconds)
and the diff it left. Its calls keep, in order (`seq` 1, 2, ...), the exact prompt and
completion token ids with the behaviour logprobs and the adapter that served each, agent
steps and summaries alike (`kind`), and whether each was decoded under the action grammar
(`constrained`: its logprobs are then the masked distribution's). `session_id` links the
production trajectory (the `sessions` row its events went to, when recorded there), `run_id`
the learner run that made it (NULL for a plain `tasks eval`). Read and written through
feedback/queries/rollouts.py; round-tripped in tests/learner/synth/test_rollout.py and
tests/feedback/test_rollout_queries.py.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column, relationship

from feedback.models.base import Base, BigIntId, UTCDateTime, new_uuid, str_enum, utcnow

RolloutCallKind = Literal["agent", "summary"]


class TaskRollout(Base):
    """One agent run on one task, its reward and how it ended."""

    __tablename__ = "task_rollouts"
    __table_args__ = (
        Index("ix_task_rollouts_instance_id", "instance_id"),
        Index("ix_task_rollouts_run_id", "run_id"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_uuid)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("learner_runs.id", ondelete="SET NULL"))
    session_id: Mapped[str | None] = mapped_column(
        String(36), ForeignKey("sessions.id", ondelete="SET NULL")
    )
    instance_id: Mapped[str] = mapped_column(String(256))
    # The task's kind ("revert" | "mutate") and tier ("easy" | "medium" | "hard").
    kind: Mapped[str] = mapped_column(String(32))
    difficulty: Mapped[str] = mapped_column(String(32))
    # "precise" | "vague": which problem statement the agent got.
    statement: Mapped[str] = mapped_column(String(32), default="precise")
    model: Mapped[str] = mapped_column(String(512))
    adapter: Mapped[str | None] = mapped_column(String(128))  # NULL: the base model
    status: Mapped[str] = mapped_column(String(32))
    message: Mapped[str | None] = mapped_column(Text)
    reward: Mapped[float] = mapped_column(Float)
    reward_terms: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    steps: Mapped[int] = mapped_column(Integer, default=0)
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    summaries: Mapped[int] = mapped_column(Integer, default=0)
    wall_s: Mapped[float] = mapped_column(Float, default=0.0)
    diff: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)

    calls: Mapped[list[RolloutCall]] = relationship(
        back_populates="rollout",
        order_by="RolloutCall.seq",
        cascade="all, delete-orphan",
        passive_deletes=True,
    )


class RolloutCall(Base):
    """One model call of a rollout, in trajectory order: what the learner replays."""

    __tablename__ = "rollout_calls"
    __table_args__ = (Index("ix_rollout_calls_rollout_id_seq", "rollout_id", "seq", unique=True),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    rollout_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("task_rollouts.id", ondelete="CASCADE")
    )
    seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(str_enum(RolloutCallKind, "rollout_call_kind"))
    prompt_token_ids: Mapped[list[int] | None] = mapped_column(JSON)
    completion_token_ids: Mapped[list[int]] = mapped_column(JSON)
    logprobs: Mapped[list[float]] = mapped_column(JSON)
    adapter: Mapped[str | None] = mapped_column(String(128))
    finish_reason: Mapped[str | None] = mapped_column(String(32))
    # Decoded under a JSON schema (the action grammar): its logprobs are the masked
    # distribution's, which the trainer does not score (learner/grpo.py). Summaries: never.
    constrained: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    rollout: Mapped[TaskRollout] = relationship(back_populates="calls")
