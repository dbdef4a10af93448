"""Agent sessions and their event log.

    with transaction(Session) as db:
        s = create_session(db, mode="interactive", client_name="vscode")
        append_event(db, session_id=s.id, kind="message", role="user", payload={...})

Every function takes an open ORM session and flushes; the caller owns the transaction.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from feedback.models import AgentSession, SessionEvent, utcnow


class UnknownSession(LookupError):
    """No session with that id."""


def create_session(
    db: Session,
    *,
    mode: str,
    session_id: str | None = None,
    title: str | None = None,
    workspace_root: str | None = None,
    client_name: str | None = None,
    owner: str | None = None,
    meta: dict[str, Any] | None = None,
    user_id: int | None = None,
) -> AgentSession:
    """A new `active` session; its id is a fresh UUID unless `session_id` is given."""
    row = AgentSession(
        mode=mode,
        title=title,
        workspace_root=workspace_root,
        client_name=client_name,
        owner=owner,
        meta=meta or {},
        user_id=user_id,
    )
    if session_id is not None:
        row.id = session_id
    db.add(row)
    db.flush()
    return row


def get_session(db: Session, *, session_id: str) -> AgentSession | None:
    return db.get(AgentSession, session_id)


def update_session(db: Session, *, session_id: str, **fields: Any) -> AgentSession:
    """Set `status`, `title`, `owner`, `meta`... on a session; bumps `updated_at`."""
    row = db.get(AgentSession, session_id)
    if row is None:
        raise UnknownSession(session_id)
    for name, value in fields.items():
        if name in ("id", "last_seq", "created_at") or not hasattr(AgentSession, name):
            raise ValueError(f"session field {name!r} cannot be set here")
        setattr(row, name, value)
    row.updated_at = utcnow()
    db.flush()
    return row


def list_sessions(
    db: Session,
    *,
    status: str | None = None,
    limit: int = 100,
    everyone: bool = True,
    user_id: int | None = None,
) -> list[AgentSession]:
    """Most recently updated first; `everyone=False`: only `user_id`'s (None: the shared
    token's)."""
    query = select(AgentSession).order_by(AgentSession.updated_at.desc()).limit(limit)
    if status is not None:
        query = query.where(AgentSession.status == status)
    if not everyone:
        query = query.where(
            AgentSession.user_id.is_(None) if user_id is None else AgentSession.user_id == user_id
        )
    return list(db.scalars(query))


def append_event(
    db: Session,
    *,
    session_id: str,
    kind: str,
    payload: dict[str, Any],
    role: str | None = None,
    token_count: int | None = None,
) -> SessionEvent:
    """Add an event with the session's next `seq` (1, 2, 3... with no gaps).

    The counter is bumped with one UPDATE ... RETURNING, which row-locks the session until
    the transaction ends: concurrent appenders queue, and a rolled-back append gives its
    number back. Keep the enclosing transaction short.
    """
    seq = db.execute(
        update(AgentSession)
        .where(AgentSession.id == session_id)
        .values(last_seq=AgentSession.last_seq + 1, updated_at=utcnow())
        .returning(AgentSession.last_seq),
        execution_options={"synchronize_session": False},
    ).scalar_one_or_none()
    if seq is None:
        raise UnknownSession(session_id)
    loaded = db.identity_map.get(db.identity_key(AgentSession, session_id))
    if loaded is not None:  # the UPDATE bypassed it; reload the counter on next access
        db.expire(loaded, ["last_seq", "updated_at"])
    event = SessionEvent(
        session_id=session_id,
        seq=seq,
        kind=kind,
        role=role,
        payload=payload,
        token_count=token_count,
    )
    db.add(event)
    db.flush()
    return event


def list_events(
    db: Session, *, session_id: str, since_seq: int = 0, limit: int | None = None
) -> list[SessionEvent]:
    """Events with `seq > since_seq`, in order; `since_seq=0` gives the whole log."""
    query = (
        select(SessionEvent)
        .where(SessionEvent.session_id == session_id, SessionEvent.seq > since_seq)
        .order_by(SessionEvent.seq)
    )
    if limit is not None:
        query = query.limit(limit)
    return list(db.scalars(query))


def latest_summary_event(db: Session, *, session_id: str) -> SessionEvent | None:
    """The newest `summary` event: where a resumed session's context starts."""
    return db.scalars(
        select(SessionEvent)
        .where(SessionEvent.session_id == session_id, SessionEvent.kind == "summary")
        .order_by(SessionEvent.seq.desc())
        .limit(1)
    ).first()
