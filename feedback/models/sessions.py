"""Agent sessions and their ordered event log (messages, tool calls, summaries, edits).

A session's events are numbered 1, 2, 3... without gaps by `seq`; `AgentSession.last_seq`
is the counter `feedback.queries.sessions.append_event` bumps atomically.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from feedback.models.base import Base, BigIntId, UTCDateTime, new_uuid, str_enum, utcnow

SessionMode = Literal["interactive", "autonomous"]
SessionStatus = Literal["active", "idle", "closed", "failed"]
EventKind = Literal["message", "tool_call", "tool_result", "summary", "edit", "error", "status"]
EventRole = Literal["system", "user", "assistant", "tool"]


class AgentSession(Base):
    """One conversation between a person (or the learner's rollout) and the agent."""

    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_uuid)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)
    mode: Mapped[str] = mapped_column(str_enum(SessionMode, "session_mode"))
    status: Mapped[str] = mapped_column(str_enum(SessionStatus, "session_status"), default="active")
    title: Mapped[str | None] = mapped_column(Text)
    # Where the files live: a path for LocalWorkspace, the editor's folder URI otherwise.
    workspace_root: Mapped[str | None] = mapped_column(Text)
    # "vscode", "neovim", "cli", "learner"...: lets the dashboard tell traffic apart.
    client_name: Mapped[str | None] = mapped_column(String(64))
    # The WebSocket/LSP connection currently driving the session; NULL when none is.
    owner: Mapped[str | None] = mapped_column(String(128))
    # Highest `seq` handed out so far; bumped with UPDATE ... RETURNING for gapless numbering.
    last_seq: Mapped[int] = mapped_column(Integer, default=0)
    meta: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # Who it came from (users.py); NULL: the shared token, or a row older than users.
    user_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("users.id", ondelete="SET NULL"), index=True
    )

    events: Mapped[list[SessionEvent]] = relationship(
        back_populates="session",
        order_by="SessionEvent.seq",
        cascade="all, delete-orphan",
        passive_deletes=True,
    )


class SessionEvent(Base):
    """One entry of a session's log; `payload` holds the message, call or edit as JSON."""

    __tablename__ = "session_events"
    __table_args__ = (
        UniqueConstraint("session_id", "seq"),
        Index("ix_session_events_kind", "session_id", "kind", "seq"),
    )

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("sessions.id", ondelete="CASCADE")
    )
    seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(str_enum(EventKind, "event_kind"))
    role: Mapped[str | None] = mapped_column(str_enum(EventRole, "event_role"))
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    token_count: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)

    session: Mapped[AgentSession] = relationship(back_populates="events")
