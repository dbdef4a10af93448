"""What the model proposed (`Suggestion`) and what the person did with it (`Outcome`).

A suggestion keeps everything the learner needs to score it off-policy: the prompt (its
messages and the exact token ids the backend fed the model), the sampled token ids with
their behaviour logprobs, and the adapter version that produced them (NULL: the base
model). `record_suggestion` refuses a row without those ids (feedback/queries/suggestions.py);
`prompt_token_ids` stays nullable for rows written before that. Outcomes are written by
clients with their own `client_event_id`, which makes a retried write land once; their
kinds are feedback.vocab's.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from sqlalchemy import JSON, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from feedback.models.base import Base, BigIntId, UTCDateTime, new_uuid, str_enum, utcnow
from feedback.vocab import OutcomeKind  # re-exported by feedback.models

SuggestionKind = Literal["edit", "completion"]


class Suggestion(Base):
    """One model output that became (or could become) a proposal shown to a person."""

    __tablename__ = "suggestions"
    __table_args__ = (
        Index("ix_suggestions_created_at", "created_at"),
        Index("ix_suggestions_session_id", "session_id"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_uuid)
    # Inline completions from the LSP may come without an agent session.
    session_id: Mapped[str | None] = mapped_column(
        String(36), ForeignKey("sessions.id", ondelete="SET NULL")
    )
    kind: Mapped[str] = mapped_column(str_enum(SuggestionKind, "suggestion_kind"))
    model: Mapped[str] = mapped_column(String(512))
    # Not a foreign key on purpose: this is a log of what served the request, and a log
    # must never refuse a row because the adapter table is behind.
    adapter_version: Mapped[int | None] = mapped_column(Integer)
    prompt_messages: Mapped[list[Any]] = mapped_column(JSON)
    prompt_token_ids: Mapped[list[int] | None] = mapped_column(JSON)
    completion_text: Mapped[str] = mapped_column(Text)
    completion_token_ids: Mapped[list[int]] = mapped_column(JSON)
    completion_logprobs: Mapped[list[float]] = mapped_column(JSON)
    finish_reason: Mapped[str | None] = mapped_column(String(32))
    # Temperature, top_p, max_tokens... as sent; the learner needs them to replay a sample.
    sampling: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The unified diff (edits) or the inserted text (completions) the person saw.
    proposed: Mapped[str] = mapped_column(Text)
    file_path: Mapped[str | None] = mapped_column(Text)
    latency_s: Mapped[float | None] = mapped_column(Float)
    # Who it came from (users.py); NULL: the shared token, or a row older than users.
    user_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("users.id", ondelete="SET NULL"), index=True
    )
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)

    outcomes: Mapped[list[Outcome]] = relationship(
        back_populates="suggestion",
        order_by="Outcome.id",
        cascade="all, delete-orphan",
        passive_deletes=True,
    )


class Outcome(Base):
    """One thing that happened to a suggestion: shown, accepted, rejected, reverted..."""

    __tablename__ = "outcomes"
    __table_args__ = (
        Index("ix_outcomes_suggestion_id", "suggestion_id"),
        Index("ix_outcomes_server_time", "server_time"),
    )

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    suggestion_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("suggestions.id", ondelete="CASCADE")
    )
    kind: Mapped[str] = mapped_column(str_enum(OutcomeKind, "outcome_kind"))
    # The hunks (or ranges) the person kept, for partial acceptance.
    accepted_part: Mapped[list[Any] | None] = mapped_column(JSON)
    accepted_length: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str | None] = mapped_column(Text)
    # The text as it ended up (after edits, or at the `persisted` check).
    final_text: Mapped[str | None] = mapped_column(Text)
    # The client's id for this event; a retried write with the same id stores nothing new.
    client_event_id: Mapped[str] = mapped_column(String(128), unique=True)
    client_time: Mapped[dt.datetime | None] = mapped_column(UTCDateTime())
    server_time: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # Who it came from (users.py); NULL: the shared token, or a row older than users.
    user_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("users.id", ondelete="SET NULL"), index=True
    )

    suggestion: Mapped[Suggestion] = relationship(back_populates="outcomes")
