"""Collect and people: an opted-out or excluded user's feedback is never a sample, and no
one person's samples weigh more than `max_user_share` of a cycle when several contributed.
On SQLite and PostgreSQL (the `db` fixture)."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy.orm import Session, sessionmaker

from feedback.db import transaction
from feedback.queries import record_outcome, record_suggestion
from feedback.queries.users import add_user, set_learning
from learner.config import DataConfig
from learner.data import Sample, cap_user_share, collect_samples

PROMPT_IDS = [3, 1037, 198, 4, 198, 3, 1204, 198]


def _feedback(db: Session, user_id: int | None, n: int, kind: str = "accepted") -> None:
    for _ in range(n):
        row = record_suggestion(
            db, kind="completion", model="dev", adapter_version=None, user_id=user_id,
            prompt_messages=[], prompt_token_ids=PROMPT_IDS, completion_text="x",
            completion_token_ids=[9], completion_logprobs=[-0.5], proposed="x",
        )  # fmt: skip
        record_outcome(db, suggestion_id=row.id, kind=kind, client_event_id=uuid.uuid4().hex,
                       user_id=user_id)  # fmt: skip


def test_opted_out_and_excluded_users_are_never_trained_on(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        ada, _ = add_user(s, "ada")
        bob, _ = add_user(s, "bob")
        eve, _ = add_user(s, "eve")
        set_learning(s, "bob", learn=False)
        _feedback(s, ada.id, 3)
        _feedback(s, bob.id, 2)
        _feedback(s, eve.id, 4, "rejected")
        _feedback(s, None, 1)  # the shared token
        ids = {"ada": ada.id, "eve": eve.id}
    with transaction(db) as s:
        config = DataConfig(settle_s=0.0, exclude_users=("eve",), max_user_share=1.0)
        samples, summary = collect_samples(s, config, after_outcome_id=0)
    assert sorted(x.user_id or 0 for x in samples) == [0] + [ids["ada"]] * 3
    assert summary["dropped"]["excluded_user"] == 2 + 4
    assert summary["users"] == 2


def test_one_prolific_person_is_capped_in_collect(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        ada, _ = add_user(s, "ada")
        bob, _ = add_user(s, "bob")
        _feedback(s, ada.id, 9)
        _feedback(s, bob.id, 3)
    with transaction(db) as s:
        samples, summary = collect_samples(
            s, DataConfig(settle_s=0.0, max_user_share=0.5), after_outcome_id=0
        )
    weight = {ada.id: 0.0, bob.id: 0.0}
    for x in samples:
        weight[x.user_id] += x.weight
    # Ada's 9 samples now weigh what Bob's 3 do: half of the total each.
    assert weight[ada.id] == pytest.approx(3.0) and weight[bob.id] == pytest.approx(3.0)
    assert summary["user_weight_scaled"] == {str(ada.id): pytest.approx(1 / 3)}


def _samples(weights: dict[int | None, list[float]]) -> list[Sample]:
    return [
        Sample(suggestion_id=f"{u}-{i}", desirable=True, weight=w, prompt_ids=[1],
               completion_ids=[2], behaviour_logprobs=[-1.0], adapter_version=0,
               outcome="accepted", heldout=False, user_id=u)
        for u, ws in weights.items() for i, w in enumerate(ws)
    ]  # fmt: skip


def _shares(samples: list[Sample]) -> dict[int | None, float]:
    total = sum(s.weight for s in samples)
    out: dict[int | None, float] = {}
    for s in samples:
        out[s.user_id] = out.get(s.user_id, 0.0) + s.weight / total
    return out


def test_cap_user_share_water_fills() -> None:
    # One person alone is never scaled (there is nobody to weigh against).
    alone = _samples({1: [1.0] * 10})
    assert cap_user_share(alone, 0.3) == (alone, {})
    # Capping the heaviest raises the next one over the line: both end at the cap.
    shares = _shares(cap_user_share(_samples({1: [1.0] * 60, 2: [1.0] * 30, None: [1.0] * 10}),
                                    0.4)[0])  # fmt: skip
    assert shares[1] == pytest.approx(0.4) and shares[2] == pytest.approx(0.4)
    assert shares[None] == pytest.approx(0.2)
    # Under the cap already: unchanged.
    even = _samples({1: [1.0] * 5, 2: [1.0] * 5})
    assert cap_user_share(even, 0.5)[1] == {}
    # No weighting can hold 2 people under 0.3 each: they weigh the same.
    shares = _shares(cap_user_share(_samples({1: [2.0] * 4, 2: [1.0]}), 0.3)[0])
    assert shares[1] == pytest.approx(0.5) and shares[2] == pytest.approx(0.5)
