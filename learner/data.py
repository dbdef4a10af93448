"""Collect: feedback since the last successful run -> a labelled dataset snapshot.

    samples, summary = collect_samples(db, config.data, after_outcome_id=c)
    write_snapshot(path, samples)            # JSON, written atomically
    samples = read_snapshot(path)

A suggestion becomes a sample when it got a *decisive* outcome after the cursor: its label
comes from its latest decisive outcome (accepted, persisted, partially_accepted,
edited_after_accept = desirable; rejected, reverted = undesirable), so an accept that was
later reverted counts as a rejection. `shown` and `applied` never decide a label, and neither
does an answer the editor gave for the person (reason starting with EDITOR_REASON_PREFIX: the
proposal could not be shown, so it says nothing about the model's output). Samples
made by an adapter more than K versions older than the newest published one are dropped
(their behaviour policy is too far from the one being trained for the capped importance
ratio to correct). Token ids come from the suggestion row unchanged: the prompt ids the
backend fed the model and the ids it sampled. The learner never renders or tokenizes a chat
(a second encoding could differ from what the policy saw); a row without ids (written before
they were required) is dropped and counted. The outcome vocabulary is feedback.vocab's.

People: a suggestion of a user who opted out (`apprentice users learn NAME --off`) or is
named in `exclude_users` is never a sample. When two or more people (the shared token counts
as one) contributed to a cycle, `cap_user_share` scales down the weights of anyone whose
samples would weigh more than `max_user_share` of the total, so one prolific person cannot
steer the update alone.

Another data source (synthetic tasks from git history) plugs in by producing `Sample`s.
Tested in tests/learner/test_data.py.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from feedback.models import Adapter, LearnerRun, Outcome
from feedback.queries import feedback_since
from feedback.queries.users import excluded_user_ids
from feedback.vocab import DESIRABLE, EDITOR_REASON_PREFIX, LABEL_KINDS
from learner.config import DataConfig


def _is_decision(outcome: Outcome) -> bool:
    """Whether this outcome is the person's verdict on the suggestion."""
    if outcome.kind not in LABEL_KINDS:
        return False
    return not (outcome.reason or "").startswith(EDITOR_REASON_PREFIX)


@dataclass(frozen=True)
class Sample:
    """One labelled completion: what the trainer and the evaluator read."""

    suggestion_id: str
    desirable: bool
    weight: float
    prompt_ids: list[int]
    completion_ids: list[int]
    behaviour_logprobs: list[float]  # logged when it was sampled; one per completion id
    adapter_version: int  # the adapter that produced it; 0 = the base model
    outcome: str  # the outcome kind that decided the label
    heldout: bool
    user_id: int | None = None  # whose feedback; None: the shared token's


def is_heldout(suggestion_id: str, fraction: float) -> bool:
    """A stable split: the same suggestion lands on the same side in every run."""
    digest = hashlib.sha256(suggestion_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def training_cursor(db: Session, statuses: tuple[str, ...] = ("succeeded",)) -> int:
    """Highest outcome id a successful run has trained on (0: none yet). With
    `statuses=("succeeded", "deferred")`: the highest a decision has seen (what the schedule
    counts new outcomes from, so a deferred cycle waits for new evidence)."""
    runs = db.scalars(select(LearnerRun).where(LearnerRun.status.in_(statuses)))
    return max((int((run.dataset or {}).get("max_outcome_id") or 0) for run in runs), default=0)


def settled_outcome_id(db: Session, settle_s: float) -> int:
    """Highest outcome id stored at least `settle_s` ago (0: none)."""
    limit = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=settle_s)
    return int(db.scalar(select(func.max(Outcome.id)).where(Outcome.server_time <= limit)) or 0)


def new_outcome_count(db: Session, *, after_outcome_id: int, settle_s: float = 0.0) -> int:
    """Decisive outcomes after the cursor and settled (what the schedule's threshold counts)."""
    kinds = sorted(LABEL_KINDS)
    query = select(func.count(Outcome.id)).where(
        Outcome.id > after_outcome_id,
        Outcome.id <= settled_outcome_id(db, settle_s),
        Outcome.kind.in_(kinds),
        or_(
            Outcome.reason.is_(None),
            ~Outcome.reason.startswith(EDITOR_REASON_PREFIX, autoescape=True),
        ),
    )
    return int(db.scalar(query) or 0)


def newest_published_version(db: Session) -> int:
    query = select(func.max(Adapter.version)).where(Adapter.status == "published")
    return int(db.scalar(query) or 0)


def _sample(item: Any, deciding: Outcome, config: DataConfig) -> Sample:
    s = item.suggestion
    return Sample(
        suggestion_id=s.id,
        desirable=deciding.kind in DESIRABLE,
        weight=float(config.weights.get(deciding.kind, 1.0)),
        prompt_ids=list(s.prompt_token_ids),
        completion_ids=list(s.completion_token_ids),
        behaviour_logprobs=[float(x) for x in s.completion_logprobs],
        adapter_version=s.adapter_version or 0,
        outcome=deciding.kind,
        heldout=is_heldout(s.id, config.heldout_fraction),
        user_id=s.user_id,
    )


def collect_samples(
    db: Session,
    config: DataConfig,
    *,
    after_outcome_id: int,
    upto_outcome_id: int | None = None,
) -> tuple[list[Sample], dict[str, Any]]:
    """Labelled samples from outcomes in (after_outcome_id, settled] (and <= upto_outcome_id
    when given), and a summary dict. Each is marked held out or not by `is_heldout`; the
    held-out ones are never trained on (the pipeline trains on the rest and scores the
    held-out pool, `heldout_pool`)."""
    upper = settled_outcome_id(db, config.settle_s)
    if upto_outcome_id is not None:
        upper = min(upper, upto_outcome_id)
    newest = newest_published_version(db)
    counts = {"stale": 0, "undecided": 0, "empty": 0, "excluded_user": 0}
    excluded = excluded_user_ids(db, config.exclude_users)
    samples: list[Sample] = []
    for item in feedback_since(db, after_outcome_id=after_outcome_id):
        settled = [o for o in item.outcomes if o.id <= upper]
        decisive = [o for o in settled if _is_decision(o)]
        if not any(o.id > after_outcome_id for o in decisive):
            counts["undecided"] += 1  # only shown/applied, or not settled yet
            continue
        s = item.suggestion
        if s.user_id is not None and s.user_id in excluded:
            counts["excluded_user"] += 1
            continue
        if newest - (s.adapter_version or 0) > config.staleness_k:
            counts["stale"] += 1
            continue
        if not s.prompt_token_ids or not s.completion_token_ids:
            counts["empty"] += 1  # an old row, from before the write required the ids
            continue
        samples.append(_sample(item, decisive[-1], config))
    samples = samples[-config.max_samples :]  # feedback_since is oldest first
    samples, scaled = cap_user_share(samples, config.max_user_share)
    summary = {
        "after_outcome_id": after_outcome_id,
        "max_outcome_id": upper,
        "samples": len(samples),
        "desirable": sum(s.desirable for s in samples),
        "undesirable": sum(not s.desirable for s in samples),
        "heldout": sum(s.heldout for s in samples),
        "newest_version": newest,
        "dropped": counts,
        "users": len({s.user_id for s in samples}),
        "user_weight_scaled": scaled,
    }
    return samples, summary


def replay_samples(db: Session, config: DataConfig, *, cursor: int, new: int) -> list[Sample]:
    """Earlier training samples to train on again: at most `config.replay` x `new` of the
    newest whose outcome the training cursor has passed, not held out, not stale (the
    staleness rule applies as to new samples: their behaviour logprobs must still be close)."""
    room = int(config.replay * new)
    if room <= 0 or cursor <= 0:
        return []
    earlier, _ = collect_samples(db, config, after_outcome_id=0, upto_outcome_id=cursor)
    return [s for s in earlier if not s.heldout][-room:]


def heldout_pool(db: Session, config: DataConfig, *, cap: int) -> list[Sample]:
    """Every settled, labelled held-out sample so far, of every cycle, newest `cap` (oldest
    first). The pool lasts across cycles: a suggestion is held out once, by `is_heldout` on
    its id, and stays out of training for good, so each gate decision sees all the held-out
    evidence there is, not only this cycle's. Staleness does not apply (a held-out item is
    scored by both policies, not trained on); opted-out and excluded people's are left out."""
    upper = settled_outcome_id(db, config.settle_s)
    excluded = excluded_user_ids(db, config.exclude_users)
    pool: list[Sample] = []
    for item in feedback_since(db, after_outcome_id=0):
        s = item.suggestion
        if not is_heldout(s.id, config.heldout_fraction):
            continue
        decisive = [o for o in item.outcomes if o.id <= upper and _is_decision(o)]
        if not decisive or (s.user_id is not None and s.user_id in excluded):
            continue
        if s.prompt_token_ids and s.completion_token_ids:
            pool.append(_sample(item, decisive[-1], config))
    return pool[-cap:]


def cap_user_share(samples: list[Sample], share: float) -> tuple[list[Sample], dict[str, float]]:
    """Scale the weights of whoever weighs more than `share` of the total down to `share`
    of the new total (water-filling: capping one person raises everyone else's share, so it
    repeats until no one is over). With one person, or `share` >= 1, nothing changes; when
    no weighting can hold everyone under `share` (fewer than 1/share people), all weigh the
    same. Returns the samples and {user: factor} for those scaled (user "shared": None)."""
    weight: dict[int | None, float] = defaultdict(float)
    for s in samples:
        weight[s.user_id] += s.weight
    if len(weight) < 2 or share >= 1:
        return samples, {}
    capped: set[int | None] = set()
    target: dict[int | None, float] = {}
    while True:
        room = 1 - len(capped) * share
        if len(capped) == len(weight) or room <= 1e-9:  # no one left to take the rest
            mean = sum(weight.values()) / len(weight)
            target = {u: mean for u in weight}
            break
        total = sum(w for u, w in weight.items() if u not in capped) / room
        over = {u for u, w in weight.items() if u not in capped and w > share * total + 1e-9}
        if not over:
            target = {u: share * total for u in capped}
            break
        capped |= over
    factors = {u: target[u] / weight[u] for u in target if weight[u] > 0}
    factors = {u: f for u, f in factors.items() if abs(f - 1) > 1e-9}
    out = [replace(s, weight=s.weight * factors[s.user_id]) if s.user_id in factors else s
           for s in samples]  # fmt: skip
    return out, {("shared" if u is None else str(u)): round(f, 6) for u, f in factors.items()}


def write_snapshot(path: Path, samples: list[Sample]) -> None:
    """Write the dataset as JSON via a temporary file and a rename (never half written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as f:
        json.dump([asdict(s) for s in samples], f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_snapshot(path: Path) -> list[Sample]:
    return [Sample(**row) for row in json.loads(path.read_text())]
