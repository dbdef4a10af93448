"""Aggregates over the feedback log and the learner's records, computed by the database.

    outcome_counts(db)          # [(suggestion kind, adapter version, outcome kind, n), ...]
    run_status_counts(db)       # {"succeeded": 12, "failed": 1, ...}
    runs = recent_steps(db)     # the steps of the newest runs, read once
    latest_step_seconds(runs)   # {"train": 241.0, ...}: each step's duration in its latest run
    latest_train_tokens_per_s(runs)
    latest_step_peak_rss_gb(runs)
    outcome_series(db, since=..., until=..., bucket_s=3600, language="python")  # the overview
    # completions shown / accepted per adapter, with intervals: completion_stats.py beside this

What `/metrics` (agent_server/api/metrics.py) and the dashboard's overview
(routers/admin_views.py) report from the database. Every count is a
GROUP BY in SQL, so nothing here loads the outcomes into Python; the run figures come from
the steps of the newest runs, read once. Tests: tests/api/test_metrics.py.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import BigInteger, Integer, cast, func, or_, select
from sqlalchemy.orm import Session

from feedback.models import LearnerRun, Outcome, Suggestion


def outcome_counts(db: Session) -> list[tuple[str, int | None, str, int]]:
    """Outcomes by the suggestion's kind, the adapter that served it and the outcome's kind."""
    rows = db.execute(
        select(Suggestion.kind, Suggestion.adapter_version, Outcome.kind, func.count())
        .join(Outcome, Outcome.suggestion_id == Suggestion.id)
        .group_by(Suggestion.kind, Suggestion.adapter_version, Outcome.kind)
    )
    return [(str(s), v, str(o), int(n)) for s, v, o, n in rows]


def run_status_counts(db: Session) -> dict[str, int]:
    rows = db.execute(select(LearnerRun.status, func.count()).group_by(LearnerRun.status))
    return {str(status): int(n) for status, n in rows}


def recent_steps(db: Session, *, limit: int = 50) -> list[list[dict[str, Any]]]:
    """The steps of the newest `limit` runs, newest first (one query; the helpers below read it)."""
    rows = db.scalars(select(LearnerRun.steps).order_by(LearnerRun.id.desc()).limit(limit))
    return [[s for s in steps or [] if isinstance(s, dict)] for steps in rows]


def step_seconds(step: dict[str, Any]) -> float | None:
    """A finished step's wall time from its ISO timestamps; None while it runs."""
    try:
        started = dt.datetime.fromisoformat(step["started"])
        finished = dt.datetime.fromisoformat(step["finished"])
    except (KeyError, TypeError, ValueError):
        return None
    return max(0.0, (finished - started).total_seconds())


def latest_step_seconds(runs: list[list[dict[str, Any]]]) -> dict[str, float]:
    """Each step name's duration in the newest of `runs` (recent_steps) that finished it."""
    found: dict[str, float] = {}
    for steps in runs:
        for step in steps:
            seconds = step_seconds(step)
            if seconds is not None and step.get("name") and step["name"] not in found:
                found[str(step["name"])] = seconds
    return found


def latest_train_tokens_per_s(runs: list[list[dict[str, Any]]]) -> float | None:
    """Train throughput of the newest of `runs` (recent_steps) whose train step reported it."""
    for steps in runs:
        for step in steps:
            if step.get("name") == "train":
                value = (step.get("metrics") or {}).get("tokens_per_s")
                if isinstance(value, int | float):
                    return float(value)
    return None


def latest_step_peak_rss_gb(runs: list[list[dict[str, Any]]]) -> dict[str, float]:
    """Each step name's peak resident set (GB, `step_peak_rss_gb` as the learner records it)
    in the newest of `runs` (recent_steps) that recorded it."""
    found: dict[str, float] = {}
    for steps in runs:
        for step in steps:
            value = (step.get("metrics") or {}).get("step_peak_rss_gb")
            name = step.get("name")
            if isinstance(value, int | float) and name and name not in found:
                found[str(name)] = float(value)
    return found


# File suffixes per language: the dashboard's language filter matches suggestions' file_path.
LANGUAGES: dict[str, tuple[str, ...]] = {
    "python": (".py", ".pyi"),
    "typescript": (".ts", ".tsx"),
    "javascript": (".js", ".jsx", ".mjs", ".cjs"),
    "rust": (".rs",),
    "go": (".go",),
    "java": (".java",),
    "c": (".c", ".h"),
    "cpp": (".cc", ".cpp", ".cxx", ".hpp", ".hh"),
    "ruby": (".rb",),
    "shell": (".sh", ".bash"),
    "markdown": (".md",),
}


def bucket_start(column: Any, seconds: int, dialect: str) -> Any:
    """The start (epoch seconds) of the `seconds`-long bucket a timestamp falls in."""
    if dialect == "postgresql":  # date_part is float8; extract() is numeric, ~30% slower here
        return cast(func.floor(func.date_part("epoch", column) / seconds) * seconds, BigInteger)
    # SQLite stores UTC text, which strftime('%s') reads as UTC; integer division floors
    # (the times are after 1970) and needs no math functions, which not every build has.
    return cast(func.strftime("%s", column), Integer) // seconds * seconds


def outcome_series(
    db: Session,
    *,
    since: dt.datetime,
    until: dt.datetime,
    bucket_s: int,
    language: str | None = None,
    user_id: int | None = None,
) -> list[tuple[int, int | None, str, str, int]]:
    """Outcomes counted per time bucket, adapter version, suggestion kind and outcome kind:
    [(bucket start, epoch s), adapter version, suggestion kind, outcome kind, n)], by the
    outcome's server time in [since, until); with `user_id`, only that person's outcomes.
    One GROUP BY on the database."""
    bucket = bucket_start(Outcome.server_time, bucket_s, db.get_bind().dialect.name).label("bucket")
    query = (
        select(bucket, Suggestion.adapter_version, Suggestion.kind, Outcome.kind, func.count())
        .join(Suggestion, Outcome.suggestion_id == Suggestion.id)
        .where(Outcome.server_time >= since, Outcome.server_time < until)
        .group_by(bucket, Suggestion.adapter_version, Suggestion.kind, Outcome.kind)
        .order_by(bucket)
    )
    if user_id is not None:
        query = query.where(Outcome.user_id == user_id)
    if language is not None:
        suffixes = LANGUAGES[language]
        query = query.where(or_(*(Suggestion.file_path.like(f"%{s}") for s in suffixes)))
    rows = db.execute(query)
    return [(int(b), v, str(s), str(k), int(n)) for b, v, s, k, n in rows]
