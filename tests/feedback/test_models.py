"""Every model written and read back on both databases (`db` runs on SQLite and PostgreSQL).

Run: .venv/bin/python -m pytest tests/feedback/test_models.py -q
"""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.orm import Session, sessionmaker

from feedback.db import transaction
from feedback.models import (
    Adapter,
    AgentSession,
    Deployment,
    LearnerRun,
    Outcome,
    SessionEvent,
    Suggestion,
)

T0 = dt.datetime(2026, 3, 1, 12, 30, 15, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2)))
LONG_IDS = list(range(5000))
LONG_LOGPROBS = [-(i % 97) / 7.0 for i in range(5000)]


def _columns(row: object) -> dict:
    return {c.key: getattr(row, c.key) for c in row.__table__.columns}  # type: ignore[attr-defined]


def _roundtrip(db: sessionmaker[Session], row: object) -> None:
    with transaction(db) as s:
        s.add(row)
    written = _columns(row)
    with db() as s:  # a new session: values come from the database, not the identity map
        loaded = s.get(type(row), row.id)  # type: ignore[attr-defined]
        assert loaded is not None
        assert _columns(loaded) == written


def test_every_model_round_trips(db: sessionmaker[Session]) -> None:
    session = AgentSession(
        mode="autonomous",
        status="idle",
        title="Fix the flaky test ✓",
        workspace_root="/home/me/project",
        client_name="vscode",
        owner="conn-1",
        meta={"nested": {"a": [1, 2, None]}},
        created_at=T0,
        updated_at=T0,
    )
    _roundtrip(db, session)
    _roundtrip(
        db,
        SessionEvent(
            session_id=session.id,
            seq=1,
            kind="tool_call",
            role="assistant",
            payload={"tool": "read_file", "args": {"path": "a.py"}},
            token_count=42,
            created_at=T0,
        ),
    )
    suggestion = Suggestion(
        session_id=session.id,
        kind="edit",
        model="dev",
        adapter_version=3,
        prompt_messages=[{"role": "user", "content": "hi"}],
        prompt_token_ids=LONG_IDS,
        completion_text="def f():\n    return 1\n",
        completion_token_ids=LONG_IDS,
        completion_logprobs=LONG_LOGPROBS,
        finish_reason="stop",
        sampling={"temperature": 0.7, "top_p": 0.95},
        proposed="--- a/x.py\n+++ b/x.py\n",
        file_path="x.py",
        latency_s=0.25,
        created_at=T0,
    )
    _roundtrip(db, suggestion)
    _roundtrip(
        db,
        Outcome(
            suggestion_id=suggestion.id,
            kind="partially_accepted",
            accepted_part=[{"hunk": 0}, {"hunk": 2}],
            accepted_length=17,
            reason=None,
            final_text="def f():\n    return 2\n",
            client_event_id="evt-1",
            client_time=T0,
            server_time=T0,
        ),
    )
    run = LearnerRun(
        status="succeeded",
        trigger="manual",
        config={"lr": 1e-4},
        steps=[{"name": "collect", "status": "succeeded", "metrics": {"n": 3}}],
        dataset={"outcomes": [1, 9]},
        adapter_version=1,
        error=None,
        created_at=T0,
        started_at=T0,
        finished_at=T0 + dt.timedelta(minutes=5),
    )
    _roundtrip(db, run)
    base = Adapter(
        version=1,
        name="policy-v1",
        path="/a/policy-v1",
        base_model="dev",
        status="published",
        metrics={"reward": 0.5},
        run_id=run.id,
        created_at=T0,
    )
    _roundtrip(db, base)
    _roundtrip(
        db,
        Adapter(
            version=2,
            name="policy-v2",
            path="/a/policy-v2",
            base_model="dev",
            parent_version=1,
            status="refused",
            metrics={},
            created_at=T0,
        ),
    )
    first = Deployment(adapter_version=None, backend="vllm", status="superseded", created_at=T0)
    _roundtrip(db, first)
    _roundtrip(
        db,
        Deployment(
            adapter_version=1,
            backend="vllm",
            status="active",
            rollback_of=first.id,
            reason="gate passed",
            created_at=T0,
        ),
    )


def test_datetimes_come_back_aware_and_in_utc(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        row = AgentSession(mode="interactive", created_at=T0, updated_at=T0)
        s.add(row)
    with db() as s:
        loaded = s.get(AgentSession, row.id)
        assert loaded is not None
        assert loaded.created_at == T0
        assert loaded.created_at.utcoffset() == dt.timedelta(0)
        assert loaded.created_at.hour == 10  # 12:30 at +02:00


def test_naive_datetime_is_refused(db: sessionmaker[Session]) -> None:
    with pytest.raises(StatementError, match="naive datetime"), transaction(db) as s:
        s.add(AgentSession(mode="interactive", created_at=dt.datetime(2026, 1, 1)))


def test_unknown_enum_value_is_refused(db: sessionmaker[Session]) -> None:
    refused = pytest.raises(StatementError, match="not among the defined enum values")
    with refused, transaction(db) as s:
        s.add(AgentSession(mode="telepathic"))


def test_foreign_keys_are_enforced(db: sessionmaker[Session]) -> None:
    with pytest.raises(IntegrityError), transaction(db) as s:
        s.add(SessionEvent(session_id="no-such-session", seq=1, kind="message", payload={}))


def test_deleting_a_session_cascades_to_events_and_detaches_suggestions(
    db: sessionmaker[Session],
) -> None:
    with transaction(db) as s:
        session = AgentSession(mode="interactive")
        s.add(session)
        s.flush()
        s.add(SessionEvent(session_id=session.id, seq=1, kind="message", payload={}))
        s.add(
            Suggestion(
                session_id=session.id,
                kind="completion",
                model="m",
                prompt_messages=[],
                completion_text="x",
                completion_token_ids=[1],
                completion_logprobs=[-0.1],
                proposed="x",
            )
        )
    with transaction(db) as s:
        s.delete(s.get(AgentSession, session.id))
    with db() as s:
        assert s.scalars(select(SessionEvent)).all() == []
        assert s.scalars(select(Suggestion.session_id)).all() == [None]
