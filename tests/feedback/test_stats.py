"""The dashboard's and /metrics' aggregates, computed by SQLite and by PostgreSQL alike, equal
the counts of the rows seeded (tests/api/dashboard_data.py).

Run: .venv/bin/python -m pytest tests/feedback/test_stats.py -q
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

from feedback.queries.stats import (
    latest_step_seconds,
    outcome_counts,
    outcome_series,
    recent_steps,
    run_status_counts,
)
from tests.api.dashboard_data import seed_outcomes, seed_runs

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
