"""Seed the feedback log and the learner's records in bulk, for the dashboard's tests and
bench/dashboard.py: suggestions with outcomes spread over days and adapters, runs with steps.

    seed_outcomes(db, n=100_000, days=30, adapters=(None, 1, 2), seed=0)  # -> counts
    seed_runs(db, n=200)
    seed_completion_cases(db, at=...)  # hand-made completions: COMPLETION_CASES and extras

Rows go in with multi-row INSERTs (core `insert`), tens of thousands a second on PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import random
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session, sessionmaker

from feedback.db import transaction
from feedback.models import LearnerRun, Outcome, Suggestion

PATHS = ("src/app.py", "src/util.py", "web/main.ts", "lib/core.rs", "README.md")
# (outcome kinds of one suggestion, weight): what people do with what they are shown.
STORIES = (
    (("shown",), 5), (("shown", "accepted", "persisted"), 2), (("shown", "rejected"), 2),
    (("shown", "accepted", "edited_after_accept"), 1), (("shown", "accepted", "reverted"), 1),
)  # fmt: skip
EDIT_STORIES = ((("accepted",), 2), (("rejected",), 2), (("partially_accepted",), 1))


def seed_outcomes(
    factory: sessionmaker[Session],
    *,
    n: int,
    days: float = 30,
    adapters: tuple[int | None, ...] = (None, 1, 2),
    end: dt.datetime | None = None,
    seed: int = 0,
    batch: int = 5000,
) -> Counter[tuple[int | None, str, str]]:
    """About `n` outcomes over the `days` before `end`; returns their counts by
    (adapter version, suggestion kind, outcome kind)."""
    rng = random.Random(seed)
    end = end or dt.datetime.now(dt.UTC)
    counts: Counter[tuple[int | None, str, str]] = Counter()
    suggestions: list[dict[str, Any]] = []
    outcomes: list[dict[str, Any]] = []
    made = 0
    while made < n:
        kind = "completion" if rng.random() < 0.8 else "edit"
        stories = STORIES if kind == "completion" else EDIT_STORIES
        story = rng.choices([s for s, _ in stories], [w for _, w in stories])[0]
        # Later adapters serve later: the timeline reads like successive deployments.
        at = end - dt.timedelta(seconds=rng.random() * days * 86400)
        share = 1 - (end - at).total_seconds() / (days * 86400)
        adapter = adapters[min(len(adapters) - 1, int(share * len(adapters)))]
        sid = str(uuid.UUID(int=rng.getrandbits(128)))
        suggestions.append(dict(
            id=sid, kind=kind, model="seed", adapter_version=adapter, prompt_messages=[],
            completion_text="x", completion_token_ids=[1], completion_logprobs=[-0.5],
            proposed="x", file_path=rng.choice(PATHS), created_at=at,
        ))  # fmt: skip
        for step, outcome in enumerate(story):
            outcomes.append(dict(
                suggestion_id=sid, kind=outcome, client_event_id=f"seed-{sid}-{step}",
                server_time=at + dt.timedelta(seconds=step),
            ))  # fmt: skip
            counts[(adapter, kind, outcome)] += 1
            made += 1
        if len(outcomes) >= batch:
            _flush(factory, suggestions, outcomes)
    _flush(factory, suggestions, outcomes)
    return counts


def _flush(factory, suggestions: list[dict[str, Any]], outcomes: list[dict[str, Any]]) -> None:
    if suggestions:
        with transaction(factory) as db:
            db.execute(insert(Suggestion), suggestions)
            db.execute(insert(Outcome), outcomes)
    suggestions.clear()
    outcomes.clear()


# Hand-made completions: (adapter version, outcomes in order — a kind or (kind, reason)),
# with whether the overview counts each as shown and as accepted (the latest decisive outcome
# desirable; feedback/queries/completion_stats.py).
COMPLETION_CASES: tuple[tuple[int | None, tuple[Any, ...], bool, bool], ...] = (
    (None, ("shown", "accepted"), True, True),
    (None, ("shown", "rejected"), True, False),
    (None, ("shown", "rejected", "written"), True, False),  # written: what they typed instead
    (None, (), False, False),  # an empty completion: the editor shows nothing, reports nothing
    (None, ("shown", "accepted", "reverted"), True, False),  # the latest decision counts
    (None, ("shown", "accepted", ("rejected", "[editor] no room")), True, True),  # not theirs
    (None, ("shown", "written"), True, False),  # shown, and no decision: not accepted
    (0, ("shown", "partially_accepted", "written"), True, True),  # 0 is the base model too
    (1, ("shown", "accepted", "persisted"), True, True),
    (1, ("accepted",), False, False),  # never shown: not in the acceptance of what was shown
    (1, (), False, False),
)
# Per adapter: (requests, shown, accepted) of COMPLETION_CASES, counted by hand.
COMPLETION_TOTALS = {None: (8, 7, 3), 1: (3, 1, 1)}


def add_completion(
    factory: sessionmaker[Session],
    outcomes: Sequence[str | tuple[str, str]],
    *,
    at: dt.datetime,
    adapter_version: int | None = None,
    kind: str = "completion",
    file_path: str = "src/app.py",
    user_id: int | None = None,
) -> str:
    """One suggestion made at `at` (empty text when it got no outcome, as the served policy's
    empty answer) and its outcomes a second apart; returns its id."""
    sid = str(uuid.uuid4())
    text = "return x" if outcomes else ""
    with transaction(factory) as db:
        db.execute(insert(Suggestion), [dict(
            id=sid, kind=kind, model="hand", adapter_version=adapter_version, prompt_messages=[],
            completion_text=text, completion_token_ids=[1] if text else [],
            completion_logprobs=[-0.5] if text else [], proposed=text, file_path=file_path,
            user_id=user_id, created_at=at,
        )])  # fmt: skip
        for step, outcome in enumerate(outcomes):
            name, reason = (outcome, None) if isinstance(outcome, str) else outcome
            db.execute(insert(Outcome), [dict(
                suggestion_id=sid, kind=name, reason=reason, client_event_id=f"{sid}-{step}",
                final_text="return y" if name == "written" else None, user_id=user_id,
                server_time=at + dt.timedelta(seconds=step),
            )])  # fmt: skip
    return sid


def seed_completion_cases(factory: sessionmaker[Session], *, at: dt.datetime) -> None:
    """COMPLETION_CASES at `at`, and rows the overview's completion figures leave out in
    [at - 1 day, at + 1 hour) for python files: an edit, a completion 400 days older, one in
    a TypeScript file (policy-v2, shown and accepted)."""
    for version, outcomes, _, _ in COMPLETION_CASES:
        add_completion(factory, outcomes, at=at, adapter_version=version)
    add_completion(factory, ("accepted",), at=at, kind="edit", adapter_version=1)
    add_completion(factory, ("shown", "accepted"), at=at - dt.timedelta(days=400))
    add_completion(factory, ("shown", "accepted"), at=at, adapter_version=2,
                   file_path="web/main.ts")  # fmt: skip


def seed_runs(factory: sessionmaker[Session], *, n: int, seed: int = 0) -> None:
    """`n` finished learner runs with step times and a loss curve each."""
    rng = random.Random(seed)
    start = dt.datetime.now(dt.UTC) - dt.timedelta(hours=n)
    rows = []
    for i in range(n):
        t0 = start + dt.timedelta(hours=i)
        steps, t = [], t0
        for name in ("collect", "train", "evaluate", "publish", "deploy"):
            seconds = 200 * rng.random() if name == "train" else 5 * rng.random()
            losses = [round(1 / (1 + k) + rng.random() * 0.05, 4) for k in range(40)]
            steps.append({"name": name, "status": "succeeded", "started": t.isoformat(),
                          "finished": (t + dt.timedelta(seconds=seconds)).isoformat(),
                          "metrics": {"losses": losses} if name == "train" else {}})  # fmt: skip
            t += dt.timedelta(seconds=seconds)
        rows.append(dict(status="succeeded", trigger="seed", config={}, steps=steps,
                         dataset={"train": 40, "heldout": 10}, created_at=t0, started_at=t0,
                         finished_at=t))  # fmt: skip
    with transaction(factory) as db:
        db.execute(insert(LearnerRun), rows)
