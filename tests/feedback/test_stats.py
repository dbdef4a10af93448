"""The dashboard's and /metrics' aggregates, computed by SQLite and by PostgreSQL alike, equal
the counts of the rows seeded (tests/api/dashboard_data.py); the completions shown and
accepted per adapter (feedback/queries/completion_stats.py) on hand-made rows, and their
Wilson intervals.

Run: .venv/bin/python -m pytest tests/feedback/test_stats.py -q
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter

import pytest

from feedback.db import transaction
from feedback.queries.completion_stats import (
    Z_95,
    completion_counts,
    per_adapter,
    rate,
    wilson,
)
from feedback.queries.stats import (
    latest_step_seconds,
    outcome_counts,
    outcome_series,
    recent_steps,
    run_status_counts,
)
from feedback.queries.users import add_user
from tests.api.dashboard_data import (
    COMPLETION_CASES,
    COMPLETION_TOTALS,
    add_completion,
    seed_completion_cases,
    seed_outcomes,
    seed_runs,
)

END = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def test_outcome_counts_and_series_match_the_seeded_rows(db) -> None:
    seeded = seed_outcomes(db, n=3000, days=10, end=END, seed=1)
    with db() as s:
        totals = {(v, sk, k): n for sk, v, k, n in outcome_counts(s)}
        series = outcome_series(s, since=END - dt.timedelta(days=10), until=END, bucket_s=86400)
        python = outcome_series(s, since=END - dt.timedelta(days=10), until=END, bucket_s=86400,
                                language="python")  # fmt: skip
        late = outcome_series(s, since=END - dt.timedelta(days=2), until=END, bucket_s=3600)
    assert totals == dict(seeded)
    summed: Counter = Counter()
    buckets = set()
    for bucket, version, suggestion, kind, n in series:
        summed[(version, suggestion, kind)] += n
        buckets.add(bucket)
    # Everything falls into the window but the second steps of a story seeded in its last
    # seconds; each bucket starts on a day boundary.
    assert sum(seeded.values()) - sum(summed.values()) <= 5
    assert all(b % 86400 == 0 for b in buckets) and 10 <= len(buckets) <= 11
    assert 0 < sum(r[4] for r in python) < sum(summed.values())
    assert 0 < sum(r[4] for r in late) < sum(summed.values()) / 3
    assert {r[1] for r in late} == {2}  # the newest adapter serves the last days


def test_run_figures(db) -> None:
    seed_runs(db, n=5)
    with db() as s:
        assert run_status_counts(s) == {"succeeded": 5}
        steps = latest_step_seconds(recent_steps(s))
    assert set(steps) == {"collect", "train", "evaluate", "publish", "deploy"}
    assert all(0 <= v <= 200 for v in steps.values())


def totals_of(rows) -> dict:
    return {v: (c.requests, c.shown, c.accepted) for v, c in per_adapter(rows).items()}


def test_completions_shown_and_accepted_per_adapter(db) -> None:
    at = END - dt.timedelta(hours=1)
    seed_completion_cases(db, at=at)
    add_completion(db, ("shown", "accepted"), at=END - dt.timedelta(hours=3), adapter_version=1)
    with transaction(db) as s:
        ada = add_user(s, "ada")[0].id
    add_completion(db, ("shown", "rejected"), at=at, adapter_version=2, user_id=ada)
    since = END - dt.timedelta(days=1)
    with db() as s:
        rows = completion_counts(s, since=since, until=END, bucket_s=3600)
        python = completion_counts(s, since=since, until=END, bucket_s=3600, language="python")
        hers = completion_counts(s, since=since, until=END, bucket_s=86400, user_id=ada)
        none = completion_counts(s, since=END, until=END + dt.timedelta(days=1), bucket_s=3600)
    # The hand count agrees with the cases' own flags: `written` is no rejection (a shown
    # completion partly taken, then `written`, is accepted), an empty completion that got no
    # `shown` is a request not shown, the base model is version NULL and 0 alike.
    for version, (requests, shown, accepted) in COMPLETION_TOTALS.items():
        cases = [c for c in COMPLETION_CASES if (c[0] or None) == version]
        assert (len(cases), sum(c[2] for c in cases), sum(c[3] for c in cases)) == (
            requests, shown, accepted)  # fmt: skip
    assert totals_of(python) == {None: (8, 7, 3), 1: (4, 2, 2), 2: (1, 1, 0)}
    assert totals_of(rows) == {None: (8, 7, 3), 1: (4, 2, 2), 2: (2, 2, 1)}
    # Per hour bucket of the request (the edit and the old completion are never counted).
    by_bucket = {(r.bucket, r.adapter_version): (r.requests, r.shown, r.accepted) for r in rows}
    hour = int(at.timestamp()) // 3600 * 3600
    assert by_bucket == {
        (hour, None): (8, 7, 3), (hour, 1): (3, 1, 1), (hour, 2): (2, 2, 1),
        (hour - 2 * 3600, 1): (1, 1, 1),
    }  # fmt: skip
    assert [r.bucket for r in rows] == sorted(r.bucket for r in rows)
    assert totals_of(hers) == {2: (1, 1, 0)} and none == []


@pytest.mark.parametrize("k, n", [(0, 1), (1, 1), (0, 7), (3, 7), (7, 8), (8, 8), (1, 1000),
                                  (500, 1000), (999, 1000)])  # fmt: skip
def test_the_wilson_interval_holds_the_estimate_and_solves_its_equation(k: int, n: int) -> None:
    low, high = wilson(k, n)  # type: ignore[misc]
    p = k / n
    assert 0.0 <= low <= p <= high <= 1.0 and low < high
    assert (low == 0.0) == (k == 0) and (high == 1.0) == (k == n)
    # Wilson's bounds are the q with (p - q)^2 = z^2 q (1 - q) / n: the score test's edge.
    for q in (low, high):
        if 0.0 < q < 1.0:
            assert math.isclose((p - q) ** 2, Z_95**2 * q * (1 - q) / n, rel_tol=1e-9)


def test_rates_with_their_interval() -> None:
    r = rate(10, 25)
    assert (r.k, r.n, r.value) == (10, 25, 0.4)
    assert round(r.low, 4) == 0.2340 and round(r.high, 4) == 0.5926  # type: ignore[arg-type]
    assert wilson(0, 0) is None and rate(0, 0).value is None and rate(0, 0).low is None
    # More evidence, a narrower interval around the same share.
    wide, narrow = wilson(5, 10), wilson(500, 1000)
    assert narrow[1] - narrow[0] < wide[1] - wide[0]  # type: ignore[index]
    with pytest.raises(ValueError):
        wilson(3, 2)
