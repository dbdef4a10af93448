"""REST view of stored sessions: `GET /v1/sessions`, `/v1/sessions/{id}`, `.../events`.

Read-only: sessions are created and driven over the WebSocket. Needs a bearer token; a
person sees only their own sessions (the shared token: the shared token's), the admin all.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query
from pydantic import BaseModel

from agent_server.api.deps import DbDep, DbText, PrincipalDep, require_token
from feedback.models import SessionStatus
from feedback.queries.sessions import get_session, list_events, list_sessions

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], dependencies=[Depends(require_token)])


class SessionOut(BaseModel):
    id: str
    mode: str
    status: str
    title: str | None
    workspace_root: str | None
    client_name: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    last_seq: int


class EventOut(BaseModel):
    seq: int
    kind: str
    role: str | None
    payload: dict[str, Any]
    token_count: int | None
    created_at: dt.datetime


def _session_out(row: Any) -> SessionOut:
    return SessionOut.model_validate(row, from_attributes=True)


def _visible(db: Any, session_id: str, who: Any) -> Any:
    """The session row, if it exists and `who` may see it; else 404 (not 403: whether
    another person's session exists is not for others to learn)."""
    row = get_session(db, session_id=session_id)
    if row is None or not (who.admin or row.user_id == who.user_id):
        raise HTTPException(404, detail=f"no session {session_id!r}")
    return row


@router.get("")
def sessions(
    db: DbDep,
    who: PrincipalDep,
    status: SessionStatus | None = None,
    limit: int = Query(default=50, ge=1, le=500),
) -> list[SessionOut]:
    """Most recently active first."""
    rows = list_sessions(db, status=status, limit=limit, everyone=who.admin, user_id=who.user_id)
    return [_session_out(row) for row in rows]


@router.get("/{session_id}")
def session(session_id: DbText, db: DbDep, who: PrincipalDep) -> SessionOut:
    return _session_out(_visible(db, session_id, who))


@router.get("/{session_id}/events")
def events(
    session_id: DbText,
    db: DbDep,
    who: PrincipalDep,
    since_seq: int = Query(default=0, ge=0),
    limit: int = Query(default=200, ge=1, le=5000),
) -> list[EventOut]:
    """Events after `since_seq`, oldest first: page with the last `seq` you received."""
    _visible(db, session_id, who)
    rows = list_events(db, session_id=session_id, since_seq=since_seq, limit=limit)
    return [EventOut.model_validate(r, from_attributes=True) for r in rows]
