"""REST view of stored sessions: `GET /v1/sessions`, `/v1/sessions/{id}`, `.../events`.

Read-only: sessions are created and driven over the WebSocket. Needs the bearer token.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query
from pydantic import BaseModel

from agent_server.api.deps import DbDep, require_token
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


@router.get("")
def sessions(
    db: DbDep,
    status: str | None = None,
    limit: int = Query(default=50, ge=1, le=500),
) -> list[SessionOut]:
    """Most recently active first."""
    return [_session_out(row) for row in list_sessions(db, status=status, limit=limit)]


@router.get("/{session_id}")
def session(session_id: str, db: DbDep) -> SessionOut:
    row = get_session(db, session_id=session_id)
    if row is None:
        raise HTTPException(404, detail=f"no session {session_id!r}")
    return _session_out(row)


@router.get("/{session_id}/events")
def events(
    session_id: str,
    db: DbDep,
    since_seq: int = Query(default=0, ge=0),
    limit: int = Query(default=200, ge=1, le=5000),
) -> list[EventOut]:
    """Events after `since_seq`, oldest first: page with the last `seq` you received."""
    if get_session(db, session_id=session_id) is None:
        raise HTTPException(404, detail=f"no session {session_id!r}")
    rows = list_events(db, session_id=session_id, since_seq=since_seq, limit=limit)
    return [EventOut.model_validate(r, from_attributes=True) for r in rows]
