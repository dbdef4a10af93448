"""Inline completions per adapter: the share of requests shown, and the acceptance of those shown.

    rows = completion_counts(db, since=..., until=..., bucket_s=86400, language="python")
    # [CompletionCount(bucket=1796083200, adapter_version=None, requests=40, shown=25,
    #                  accepted=10), ...]  per time bucket and adapter
    totals = per_adapter(rows)     # {None: CompletionCount(bucket=0, ...), 1: ...}
    rate(10, 25)                   # Rate(k=10, n=25, value=0.4, low=0.23, high=0.59)
    wilson(10, 25)                 # (0.234, 0.593): the 95 % Wilson score interval of 10/25

A *request* is a suggestion of kind `completion` (counted by its `created_at`, in [since,
until)). It was *shown* when it has a `shown` outcome: the served policy may answer nothing
(an empty completion), which the clients never show, so it is a request not shown. A shown
request was *accepted* when its latest decisive outcome — feedback.vocab LABEL_KINDS, the
newest by outcome id, an answer the editor gave for the person (EDITOR_REASON_PREFIX) left
out, as learner/data.py labels — is DESIRABLE. `written` (what the person typed instead),
`applied` and `shown` decide nothing: a suggestion with only those counts as not accepted.
The base model is adapter version NULL or 0, both reported as None. One GROUP BY on the
database (SQLite or PostgreSQL); the dashboard's overview reads it through
`GET /v1/admin/stats/completions` (agent_server/api/routers/admin_views.py).
Tests: tests/feedback/test_stats.py.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from sqlalchemy import and_, case, func, or_, select
from sqlalchemy.orm import Session, aliased

from feedback.models import Outcome, Suggestion
from feedback.queries.stats import LANGUAGES, bucket_start
from feedback.vocab import DESIRABLE, EDITOR_REASON_PREFIX, LABEL_KINDS

Z_95 = 1.959963984540054  # the standard normal's 97.5 % quantile: a two-sided 95 % interval


@dataclass(frozen=True)
class CompletionCount:
    bucket: int  # start of the time bucket, epoch seconds (0 in per_adapter's totals)
    adapter_version: int | None  # None: the base model
    requests: int  # completion suggestions made
    shown: int  # of those, shown by the editor
    accepted: int  # of those shown, the latest decisive outcome desirable


@dataclass(frozen=True)
class Rate:
    """k out of n, with its 95 % Wilson score interval; value, low, high None when n is 0."""

    k: int
    n: int
    value: float | None
    low: float | None
    high: float | None


def wilson(k: int, n: int, z: float = Z_95) -> tuple[float, float] | None:
    """The Wilson score interval of k successes in n trials (None when n is 0). Unlike the
    normal approximation it stays inside [0, 1] and is sensible for small n and for 0 / n
    (Wilson 1927; Brown, Cai, DasGupta 2001). It always holds k / n."""
    if n <= 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    p = k / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    # Exact at the ends, and never a rounding error away from holding p.
    low = 0.0 if k == 0 else max(0.0, min(p, centre - half))
    high = 1.0 if k == n else min(1.0, max(p, centre + half))
    return low, high


def rate(k: int, n: int) -> Rate:
    bounds = wilson(k, n)
    if bounds is None:
        return Rate(k=k, n=n, value=None, low=None, high=None)
    return Rate(k=k, n=n, value=k / n, low=bounds[0], high=bounds[1])


def completion_counts(
    db: Session,
    *,
    since: dt.datetime,
    until: dt.datetime,
    bucket_s: int,
    language: str | None = None,
    user_id: int | None = None,
) -> list[CompletionCount]:
    """Completion requests, shown and accepted (see the module's doc) per time bucket of the
    suggestion's `created_at` and adapter, oldest bucket first; with `user_id`, only that
    person's requests; with `language`, only files of that language (stats.LANGUAGES)."""
    dialect = db.get_bind().dialect.name
    version = func.coalesce(Suggestion.adapter_version, 0)
    bucket = bucket_start(Suggestion.created_at, bucket_s, dialect)
    decisive = and_(
        Outcome.kind.in_(sorted(LABEL_KINDS)),
        or_(
            Outcome.reason.is_(None),
            ~Outcome.reason.startswith(EDITOR_REASON_PREFIX, autoescape=True),
        ),
    )
    # One row per request: whether it was shown, and the id of its latest decisive outcome.
    per_request = (
        select(
            bucket.label("bucket"),
            version.label("version"),
            func.max(case((Outcome.kind == "shown", 1), else_=0)).label("shown"),
            func.max(case((decisive, Outcome.id), else_=None)).label("decided_by"),
        )
        .select_from(Suggestion)
        .outerjoin(Outcome, Outcome.suggestion_id == Suggestion.id)
        .where(
            Suggestion.kind == "completion",
            Suggestion.created_at >= since,
            Suggestion.created_at < until,
        )
        .group_by(Suggestion.id)  # bucket and version follow from it (its primary key)
    )
    if user_id is not None:
        per_request = per_request.where(Suggestion.user_id == user_id)
    if language is not None:
        suffixes = LANGUAGES[language]
        per_request = per_request.where(
            or_(*(Suggestion.file_path.like(f"%{s}") for s in suffixes))
        )
    request = per_request.subquery()
    decision = aliased(Outcome)
    taken = and_(request.c.shown == 1, decision.kind.in_(sorted(DESIRABLE)))
    query = (
        select(
            request.c.bucket,
            request.c.version,
            func.count(),
            func.sum(request.c.shown),
            func.sum(case((taken, 1), else_=0)),
        )
        .select_from(request)
        .outerjoin(decision, decision.id == request.c.decided_by)
        .group_by(request.c.bucket, request.c.version)
        .order_by(request.c.bucket, request.c.version)
    )
    return [
        CompletionCount(bucket=int(b), adapter_version=int(v) or None, requests=int(n),
                        shown=int(s or 0), accepted=int(a or 0))
        for b, v, n, s, a in db.execute(query)
    ]  # fmt: skip


def per_adapter(rows: list[CompletionCount]) -> dict[int | None, CompletionCount]:
    """The buckets of `completion_counts` summed per adapter, the base model first."""
    totals: dict[int | None, CompletionCount] = {}
    for row in rows:
        was = totals.get(row.adapter_version)
        totals[row.adapter_version] = CompletionCount(
            bucket=0,
            adapter_version=row.adapter_version,
            requests=row.requests + (was.requests if was else 0),
            shown=row.shown + (was.shown if was else 0),
            accepted=row.accepted + (was.accepted if was else 0),
        )
    return dict(sorted(totals.items(), key=lambda item: item[0] or 0))
