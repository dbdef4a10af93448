"""Suggestions and outcomes: a suggestion without its token ids refused, idempotent
`record_outcome` (also from two connections at once on PostgreSQL),
`outcomes_for_suggestion`, and `feedback_since` for the learner.

Run: .venv/bin/python -m pytest tests/feedback/test_outcomes.py -q
"""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from feedback.db import make_engine, make_sessionmaker, transaction
from feedback.models import Outcome, Suggestion
from feedback.queries import (
    MissingTokenIds,
    OutcomeConflict,
    UnknownSuggestion,
    feedback_since,
    get_suggestion,
    outcomes_for_suggestion,
    record_outcome,
    record_suggestion,
)


def _suggest(s: Session, **overrides: object) -> Suggestion:
    args: dict = dict(
        kind="edit",
        model="dev",
        adapter_version=None,
        prompt_messages=[{"role": "user", "content": "rename x"}],
        prompt_token_ids=[1, 2, 3],
        completion_text="y = 1",
        completion_token_ids=[7, 8],
        completion_logprobs=[-0.5, -0.25],
        proposed="-x = 1\n+y = 1\n",
        file_path="a.py",
    )
    return record_suggestion(s, **{**args, **overrides})


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("prompt_token_ids", None, "prompt_token_ids are missing"),
        ("prompt_token_ids", [], "prompt_token_ids are missing"),
        ("completion_token_ids", [], "completion_token_ids are missing"),
    ],
)
def test_a_suggestion_without_token_ids_is_refused(
    db: sessionmaker[Session], field: str, value: object, says: str
) -> None:
    overrides = {field: value}
    if field == "completion_token_ids":
        overrides["completion_logprobs"] = []
    with pytest.raises(MissingTokenIds, match=says), transaction(db) as s:
        _suggest(s, **overrides)
    with db() as s:  # nothing was stored
        assert s.scalar(select(func.count()).select_from(Suggestion)) == 0
    with pytest.raises(TypeError, match="prompt_token_ids"), transaction(db) as s:
        args = {"kind": "edit", "model": "m", "adapter_version": None, "prompt_messages": [],
                "completion_text": "", "completion_token_ids": [1],
                "completion_logprobs": [-0.1], "proposed": ""}  # fmt: skip
        record_suggestion(s, **args)  # a caller must say what the prompt ids are


def _count(db: sessionmaker[Session]) -> int:
    with db() as s:
        return s.scalar(select(func.count()).select_from(Outcome)) or 0


def test_record_suggestion_checks_logprobs_match_tokens(db: sessionmaker[Session]) -> None:
    with pytest.raises(ValueError, match="one logprob per sampled token"), transaction(db) as s:
        _suggest(s, completion_logprobs=[-0.1])
    too_many = pytest.raises(MissingTokenIds, match="one logprob per sampled token")
    with too_many, transaction(db) as s:
        _suggest(s, completion_logprobs=[-0.1, -0.2, -0.3])
    with transaction(db) as s:
        made = _suggest(s, session_id=None, adapter_version=4)
    with db() as s:
        loaded = get_suggestion(s, suggestion_id=made.id)
        assert loaded is not None
        assert loaded.completion_logprobs == [-0.5, -0.25] and loaded.adapter_version == 4


def test_same_event_twice_stores_one_row(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        sid = _suggest(s).id
    with transaction(db) as s:
        first = record_outcome(
            s, suggestion_id=sid, kind="accepted", client_event_id="e1", accepted_length=5
        )
    with transaction(db) as s:  # the client retried: same id, a later (lost-ack) resend
        again = record_outcome(
            s, suggestion_id=sid, kind="accepted", client_event_id="e1", accepted_length=5
        )
    assert again.id == first.id and again.server_time == first.server_time
    assert _count(db) == 1


def test_reused_event_id_for_another_outcome_is_a_conflict(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        sid = _suggest(s).id
        record_outcome(s, suggestion_id=sid, kind="shown", client_event_id="e1")
    with pytest.raises(OutcomeConflict, match="already used"), transaction(db) as s:
        record_outcome(s, suggestion_id=sid, kind="rejected", client_event_id="e1")
    assert _count(db) == 1


def test_outcome_for_unknown_suggestion(db: sessionmaker[Session]) -> None:
    with pytest.raises(UnknownSuggestion), transaction(db) as s:
        record_outcome(s, suggestion_id="nope", kind="shown", client_event_id="e9")


def test_outcomes_for_suggestion_in_order(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        a, b = _suggest(s).id, _suggest(s).id
        for i, kind in enumerate(["shown", "accepted", "edited_after_accept", "persisted"]):
            record_outcome(s, suggestion_id=a, kind=kind, client_event_id=f"a{i}")
        record_outcome(s, suggestion_id=b, kind="rejected", client_event_id="b0", reason="wrong")
    with db() as s:
        kinds = [o.kind for o in outcomes_for_suggestion(s, suggestion_id=a)]
        assert kinds == ["shown", "accepted", "edited_after_accept", "persisted"]
        assert [o.reason for o in outcomes_for_suggestion(s, suggestion_id=b)] == ["wrong"]


def test_feedback_since_by_time_and_by_outcome_id(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        old, new, silent = _suggest(s).id, _suggest(s).id, _suggest(s).id
        o1 = record_outcome(s, suggestion_id=old, kind="shown", client_event_id="1")
    with transaction(db) as s:  # older outcome moved back in time to test the time filter
        s.get(Outcome, o1.id).server_time = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)  # type: ignore[union-attr]
    with transaction(db) as s:
        o2 = record_outcome(s, suggestion_id=new, kind="shown", client_event_id="2")
        o3 = record_outcome(s, suggestion_id=new, kind="accepted", client_event_id="3")
        o4 = record_outcome(s, suggestion_id=old, kind="reverted", client_event_id="4")
    with db() as s:
        everything = feedback_since(s)
        assert [i.suggestion.id for i in everything] == [old, new]  # `silent` has no outcome
        assert silent not in {i.suggestion.id for i in everything}
        after_o2 = feedback_since(s, after_outcome_id=o2.id)
        by_id = {i.suggestion.id: [o.id for o in i.outcomes] for i in after_o2}
        assert by_id == {new: [o2.id, o3.id], old: [o1.id, o4.id]}  # whole history of each
        assert feedback_since(s, after_outcome_id=o4.id) == []
        recent = feedback_since(s, since=dt.datetime(2021, 1, 1, tzinfo=dt.UTC))
        assert {i.suggestion.id for i in recent} == {old, new}  # old has o4, a recent one
        assert len(feedback_since(s, limit=1)) == 1


@pytest.mark.parametrize("attempt", range(3))
@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_same_event_from_two_connections_at_once(
    backend: str, attempt: int, request: pytest.FixtureRequest
) -> None:
    """Two writers with their own engines race on one client_event_id: one row, one id."""
    url = request.getfixturevalue("pg_head_url" if backend == "postgres" else "sqlite_head_url")
    setup = make_engine(url)
    with transaction(make_sessionmaker(setup)) as s:
        sid = _suggest(s).id
    barrier = threading.Barrier(2, timeout=30)
    ids: list[int] = []
    errors: list[BaseException] = []

    def write() -> None:
        engine = make_engine(url)
        try:
            with transaction(make_sessionmaker(engine)) as s:
                if backend == "postgres":  # both transactions open, then both insert
                    s.connection()
                # (SQLite's BEGIN IMMEDIATE would make the other writer wait here instead.)
                barrier.wait()
                row = record_outcome(s, suggestion_id=sid, kind="accepted", client_event_id="race")
                ids.append(row.id)
        except BaseException as exc:
            errors.append(exc)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=write) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert len(ids) == 2 and ids[0] == ids[1]
    assert _count(make_sessionmaker(setup)) == 1
    setup.dispose()


@pytest.mark.postgres
def test_second_writer_waits_for_the_first_to_commit(pg_head_url: str) -> None:
    """Deterministic interleaving: A inserts and holds its transaction open; B writes the
    same event, blocks on A's row, and once A commits gets A's row back."""
    engine = make_engine(pg_head_url)
    factory = make_sessionmaker(engine)
    with transaction(factory) as s:
        sid = _suggest(s).id
    a_session = factory()
    a_session.begin()
    a_row = record_outcome(a_session, suggestion_id=sid, kind="rejected", client_event_id="x")
    result: dict[str, int] = {}

    def writer_b() -> None:
        with transaction(factory) as s:
            result["id"] = record_outcome(
                s, suggestion_id=sid, kind="rejected", client_event_id="x"
            ).id

    b = threading.Thread(target=writer_b)
    b.start()
    b.join(timeout=1.0)
    assert b.is_alive(), "B should be waiting on A's uncommitted row"
    a_session.commit()
    a_session.close()
    b.join(timeout=30)
    assert result["id"] == a_row.id
    assert _count(factory) == 1
    engine.dispose()
