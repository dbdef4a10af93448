"""Outcomes written in batches (`record_outcomes`) mean what one-at-a-time `record_outcome`
means, item by item: stored once per client_event_id, a repeat is a duplicate with the same
id, a reuse for another suggestion or kind is a conflict, an unknown suggestion is refused
— on SQLite and PostgreSQL, within one batch and across batches."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from feedback.db import transaction
from feedback.models import Outcome
from feedback.queries import record_suggestion
from feedback.queries.outcomes_batch import BatchStored, record_outcomes
from feedback.queries.suggestions import OutcomeConflict, UnknownSuggestion, record_outcome


def _suggest(db: Session) -> str:
    return record_suggestion(
        db, kind="completion", model="dev", adapter_version=None, prompt_messages=[],
        prompt_token_ids=[1, 2], completion_text="x", completion_token_ids=[3],
        completion_logprobs=[-0.1], proposed="x",
    ).id  # fmt: skip


def test_a_batch_means_what_single_writes_mean(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        a, b = _suggest(s), _suggest(s)
        earlier = record_outcome(s, suggestion_id=a, kind="shown", client_event_id="old")
    items = [
        dict(suggestion_id=a, kind="accepted", client_event_id="e1", user_id=None),
        dict(suggestion_id=b, kind="rejected", client_event_id="e2", reason="no"),
        dict(suggestion_id=a, kind="accepted", client_event_id="e1"),  # repeated in the batch
        dict(suggestion_id=a, kind="shown", client_event_id="old"),  # stored before
        dict(suggestion_id=b, kind="shown", client_event_id="old"),  # reused for another
        dict(suggestion_id="nope", kind="shown", client_event_id="e3"),
    ]
    with transaction(db) as s:
        results = record_outcomes(s, items)
    first, second, repeat, old, conflict, unknown = results
    assert isinstance(first, BatchStored) and not first.duplicate
    assert isinstance(second, BatchStored) and not second.duplicate and second.id != first.id
    assert repeat == BatchStored(first.id, duplicate=True)
    assert old == BatchStored(earlier.id, duplicate=True)
    assert isinstance(conflict, OutcomeConflict) and "old" in str(conflict)
    assert isinstance(unknown, UnknownSuggestion)
    with transaction(db) as s:
        rows = {o.client_event_id: (o.suggestion_id, o.kind, o.reason)
                for o in s.scalars(select(Outcome))}  # fmt: skip
        assert rows == {"old": (a, "shown", None), "e1": (a, "accepted", None),
                        "e2": (b, "rejected", "no")}  # fmt: skip
        assert all(o.server_time is not None for o in s.scalars(select(Outcome)))
    # A second batch of the same items stores nothing new.
    with transaction(db) as s:
        again = record_outcomes(s, items[:2])
        assert again == [BatchStored(first.id, True), BatchStored(second.id, True)]
        assert s.scalar(select(func.count(Outcome.id))) == 3
