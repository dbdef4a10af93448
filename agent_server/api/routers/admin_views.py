"""What the dashboard reads besides the records of admin.py: aggregates and live updates.

    GET /v1/admin/stats/outcomes?since=..&until=..&bucket_s=3600&language=python&user=ada
        outcomes per time bucket, adapter, suggestion kind and outcome kind (SQL GROUP BY)
    GET /v1/admin/stats/completions?since=..&until=..&bucket_s=3600&language=python&user=ada
        inline completions per adapter: the share of requests shown and the acceptance of
        those shown, each with its 95 % Wilson interval, and the counts per time bucket
        (feedback/queries/completion_stats.py)
    GET /v1/admin/users
        the people who use the server (`apprentice users ...`), never their tokens
    GET /v1/admin/runs/{id}/events
        server-sent events: the run (as GET /v1/admin/runs/{id}) each time it changes (a
        step's heartbeat alone is no change), until it ends; a comment line every 15 s keeps
        proxies from closing the stream

Same auth as admin.py (the admin token, or the dashboard's cookie). Tests:
tests/api/test_admin_views.py, tests/api/test_dashboard.py (completions).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from agent_server.api.deps import DbDep, DbInt, DbText, ServicesDep, require_admin
from agent_server.api.routers.admin import RunDetail
from feedback.queries import get_run
from feedback.queries.completion_stats import Rate, completion_counts, per_adapter, rate
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


class RateOut(BaseModel):
    k: int
    n: int
    value: float | None = Field(description="k / n; null when n is 0.")
    low: float | None = Field(description="The 95 % Wilson score interval's lower bound.")
    high: float | None = Field(description="Its upper bound.")

    @classmethod
    def of(cls, r: Rate) -> RateOut:
        return cls(k=r.k, n=r.n, value=r.value, low=r.low, high=r.high)


class AdapterCompletions(BaseModel):
    adapter_version: int | None = Field(description="The adapter that served; null: base model.")
    requests: int = Field(description="Completion suggestions made (empty ones too).")
    shown: int = Field(description="Of those, shown by the editor (a `shown` outcome).")
    accepted: int = Field(description="Of those shown, the latest decisive outcome desirable.")
    shown_share: RateOut = Field(description="shown / requests")
    acceptance: RateOut = Field(description="accepted / shown")


class CompletionBucket(BaseModel):
    t: dt.datetime = Field(description="Start of the time bucket (UTC) the requests fell in.")
    adapter_version: int | None
    requests: int
    shown: int
    accepted: int


class CompletionStats(BaseModel):
    since: dt.datetime
    until: dt.datetime
    bucket_s: int
    language: str | None
    user: str | None
    adapters: list[AdapterCompletions] = Field(description="Totals over the range, per adapter.")
    buckets: list[CompletionBucket] = Field(description="The same per time bucket.")


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


SinceQ = Annotated[dt.datetime | None, Query(description="Default: `until` - 30 days.")]
UntilQ = Annotated[dt.datetime | None, Query(description="Default: now.")]
BucketQ = Annotated[int, Query(ge=60, le=366 * 86400)]
LanguageQ = Annotated[str | None, Query(description="A name from `languages`.")]
UserQ = Annotated[DbText | None, Query(description="A name from `users`: theirs only.")]


def _window(
    db: Session,
    since: dt.datetime | None,
    until: dt.datetime | None,
    bucket_s: int,
    language: str | None,
    user: str | None,
) -> tuple[dt.datetime, dt.datetime, int | None]:
    """The checked query of a stats endpoint: (since, until, the user's id or None)."""
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
    return since, until, user_id


@router.get("/stats/outcomes")
def outcomes(
    db: DbDep,
    since: SinceQ = None,
    until: UntilQ = None,
    bucket_s: BucketQ = 86400,
    language: LanguageQ = None,
    user: UserQ = None,
) -> OutcomeSeries:
    """Outcomes by time bucket, adapter, suggestion kind and outcome kind, counted in SQL."""
    since, until, user_id = _window(db, since, until, bucket_s, language, user)
    rows = outcome_series(
        db, since=since, until=until, bucket_s=bucket_s, language=language, user_id=user_id
    )
    return OutcomeSeries(
        since=since, until=until, bucket_s=bucket_s, language=language, languages=list(LANGUAGES),
        user=user, users=[u.name for u in list_users(db)],
        rows=[OutcomeCount(t=dt.datetime.fromtimestamp(b, dt.UTC), adapter_version=v,
                           suggestion=s, kind=k, n=n) for b, v, s, k, n in rows],
    )  # fmt: skip


@router.get("/stats/completions")
def completions(
    db: DbDep,
    since: SinceQ = None,
    until: UntilQ = None,
    bucket_s: BucketQ = 86400,
    language: LanguageQ = None,
    user: UserQ = None,
) -> CompletionStats:
    """Inline completions per adapter (the base model: null): requests, shown, accepted; the
    share shown and the acceptance of those shown with 95 % Wilson score intervals."""
    since, until, user_id = _window(db, since, until, bucket_s, language, user)
    rows = completion_counts(
        db, since=since, until=until, bucket_s=bucket_s, language=language, user_id=user_id
    )
    adapters = [
        AdapterCompletions(adapter_version=v, requests=c.requests, shown=c.shown,
                           accepted=c.accepted, shown_share=RateOut.of(rate(c.shown, c.requests)),
                           acceptance=RateOut.of(rate(c.accepted, c.shown)))
        for v, c in per_adapter(rows).items()
    ]  # fmt: skip
    return CompletionStats(
        since=since, until=until, bucket_s=bucket_s, language=language, user=user,
        adapters=adapters,
        buckets=[CompletionBucket(t=dt.datetime.fromtimestamp(r.bucket, dt.UTC),
                                  adapter_version=r.adapter_version, requests=r.requests,
                                  shown=r.shown, accepted=r.accepted) for r in rows],
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
