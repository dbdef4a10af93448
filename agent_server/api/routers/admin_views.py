"""What the dashboard reads besides the records of admin.py: aggregates and live updates.

    GET /v1/admin/stats/outcomes?since=..&until=..&bucket_s=3600&language=python&user=ada
        outcomes per time bucket, adapter, suggestion kind and outcome kind (SQL GROUP BY)
    GET /v1/admin/users
        the people who use the server (`apprentice users ...`), never their tokens
    GET /v1/admin/runs/{id}/events
        server-sent events: the run (as GET /v1/admin/runs/{id}) each time it changes (a
        step's heartbeat alone is no change), until it ends; a comment line every 15 s keeps
        proxies from closing the stream

Same auth as admin.py (the admin token, or the dashboard's cookie). Tests:
tests/api/test_admin_views.py.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from agent_server.api.deps import DbDep, DbInt, DbText, ServicesDep, require_admin
from agent_server.api.routers.admin import RunDetail
from feedback.queries import get_run
from feedback.queries.runs import HEARTBEAT_KEYS
from feedback.queries.stats import LANGUAGES, outcome_series
from feedback.queries.users import list_users, user_ids

router = APIRouter(prefix="/v1/admin", tags=["admin"], dependencies=[Depends(require_admin)])

MAX_BUCKETS = 5000
FINISHED = frozenset({"succeeded", "failed", "skipped", "deferred"})


class OutcomeCount(BaseModel):
    t: dt.datetime = Field(description="Start of the time bucket (UTC).")
    adapter_version: int | None = Field(description="The adapter that served; null: base model.")
    suggestion: str = Field(description="completion | edit | ...")
    kind: str = Field(description="The outcome kind: shown, accepted, rejected, ...")
    n: int


class OutcomeSeries(BaseModel):
    since: dt.datetime
    until: dt.datetime
    bucket_s: int
    language: str | None
    languages: list[str] = Field(description="The values the language filter takes.")
    user: str | None = Field(default=None, description="The user filtered on; null: everyone.")
    users: list[str] = Field(default=[], description="The values the user filter takes.")
    rows: list[OutcomeCount]


class UserOut(BaseModel):
    name: str
    admin: bool
    learn: bool = Field(description="False: opted out, never trained on.")
    created_at: dt.datetime
    rotated_at: dt.datetime | None
    revoked_at: dt.datetime | None


@router.get("/users")
def users(db: DbDep) -> list[UserOut]:
    """Everyone with a token of their own (tokens are never shown: only hashes are kept)."""
    return [
        UserOut(name=u.name, admin=u.admin, learn=u.learn, created_at=u.created_at,
                rotated_at=u.rotated_at, revoked_at=u.revoked_at)
        for u in list_users(db)
    ]  # fmt: skip


@router.get("/stats/outcomes")
def outcomes(
    db: DbDep,
    since: Annotated[dt.datetime | None, Query(description="Default: `until` - 30 days.")] = None,
    until: Annotated[dt.datetime | None, Query(description="Default: now.")] = None,
    bucket_s: int = Query(default=86400, ge=60, le=366 * 86400),
    language: str | None = Query(default=None, description="A name from `languages`."),
    user: Annotated[
        DbText | None, Query(description="A name from `users`: their outcomes.")
    ] = None,
) -> OutcomeSeries:
    """Outcomes by time bucket, adapter, suggestion kind and outcome kind, counted in SQL."""
    try:  # near year 1 or 9999, the default `since` or the shift to UTC leave datetime's range
        until = _aware(until) if until else dt.datetime.now(dt.UTC)
        since = _aware(since) if since else until - dt.timedelta(days=30)
    except OverflowError:
        raise HTTPException(422, detail="`since` / `until` out of range") from None
    if since >= until:
        raise HTTPException(422, detail="`since` must be before `until`")
    if (until - since).total_seconds() / bucket_s > MAX_BUCKETS:
        raise HTTPException(422, detail=f"more than {MAX_BUCKETS} buckets: raise bucket_s")
    if language is not None and language not in LANGUAGES:
        raise HTTPException(422, detail=f"unknown language {language!r}: one of {list(LANGUAGES)}")
    user_id = None
    if user is not None:
        user_id = user_ids(db, [user]).get(user)
        if user_id is None:
            raise HTTPException(422, detail=f"no user named {user!r}")
    rows = outcome_series(
        db, since=since, until=until, bucket_s=bucket_s, language=language, user_id=user_id
    )
    return OutcomeSeries(
        since=since, until=until, bucket_s=bucket_s, language=language, languages=list(LANGUAGES),
        user=user, users=[u.name for u in list_users(db)],
        rows=[OutcomeCount(t=dt.datetime.fromtimestamp(b, dt.UTC), adapter_version=v,
                           suggestion=s, kind=k, n=n) for b, v, s, k, n in rows],
    )  # fmt: skip


def _aware(value: dt.datetime) -> dt.datetime:
    value = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    value.astimezone(dt.UTC)  # OverflowError when UTC leaves years 1-9999 (the driver fails)
    return value


@router.get(
    "/runs/{run_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "RunDetail events"}},
)
async def run_events(run_id: DbInt, request: Request, services: ServicesDep) -> StreamingResponse:
    """The run as server-sent events (`event: run`, data: a RunDetail) whenever it changes."""

    def read() -> tuple[str, str, str] | None:
        """(status, the run as JSON, the same without its steps' heartbeats: a worker stamps
        a running step every 10 s, which is no news), or None when there is no such run."""
        with services.db() as db:
            row = get_run(db, run_id=run_id)
            if row is None:
                return None
            run = RunDetail.of(row)
            steps = [
                {k: v for k, v in step.items() if k not in HEARTBEAT_KEYS} for step in run.steps
            ]
            news = run.model_copy(update={"steps": steps}).model_dump_json()
            return row.status, run.model_dump_json(), news

    first = await asyncio.to_thread(read)
    if first is None:
        raise HTTPException(404, detail=f"no learner run {run_id}")

    async def stream() -> AsyncIterator[str]:
        last, quiet = None, 0.0
        current: tuple[str, str, str] | None = first
        while current is not None:
            status, body, news = current
            if news != last:
                yield f"event: run\ndata: {body}\n\n"
                last, quiet = news, 0.0
                if status in FINISHED:
                    return
            elif quiet >= 15:
                yield ": still here\n\n"
                quiet = 0.0
            await asyncio.sleep(1.0)
            quiet += 1.0
            if await request.is_disconnected():
                return
            current = await asyncio.to_thread(read)

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)
