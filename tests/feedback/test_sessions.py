"""Session and event queries on both databases, and gapless `seq` under concurrent appends.

Run: .venv/bin/python -m pytest tests/feedback/test_sessions.py -q
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from feedback.db import make_engine, make_sessionmaker, transaction
from feedback.models import SessionEvent
from feedback.queries import (
    UnknownSession,
    append_event,
    create_session,
    get_session,
    latest_summary_event,
    list_events,
    list_sessions,
    update_session,
)


def test_create_append_list(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        session = create_session(s, mode="interactive", client_name="neovim", title="t")
        first = append_event(
            s,
            session_id=session.id,
            kind="message",
            role="user",
            payload={"content": "hello"},
            token_count=3,
        )
        append_event(s, session_id=session.id, kind="summary", payload={"text": "s1"})
        append_event(s, session_id=session.id, kind="tool_call", payload={"tool": "ls"})
        append_event(s, session_id=session.id, kind="summary", payload={"text": "s2"})
        append_event(s, session_id=session.id, kind="message", role="assistant", payload={})
        assert first.seq == 1
        assert session.last_seq == 5  # the identity-map copy is refreshed, not stale
    with db() as s:
        loaded = get_session(s, session_id=session.id)
        assert loaded is not None and loaded.status == "active" and loaded.last_seq == 5
        assert [e.seq for e in list_events(s, session_id=session.id)] == [1, 2, 3, 4, 5]
        assert [e.seq for e in list_events(s, session_id=session.id, since_seq=3)] == [4, 5]
        assert [e.seq for e in list_events(s, session_id=session.id, limit=2)] == [1, 2]
        summary = latest_summary_event(s, session_id=session.id)
        assert summary is not None and summary.payload == {"text": "s2"} and summary.seq == 4
        assert get_session(s, session_id="nope") is None


def test_sequences_are_per_session(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        a = create_session(s, mode="interactive")
        b = create_session(s, mode="autonomous")
        seqs = [
            append_event(s, session_id=x.id, kind="message", payload={}).seq
            for x in (a, b, a, b, a)
        ]
    assert seqs == [1, 1, 2, 2, 3]


def test_rolled_back_append_gives_its_number_back(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        session = create_session(s, mode="interactive")
    with pytest.raises(RuntimeError), transaction(db) as s:
        append_event(s, session_id=session.id, kind="message", payload={})
        raise RuntimeError("client went away")
    with transaction(db) as s:
        assert append_event(s, session_id=session.id, kind="message", payload={}).seq == 1


def test_unknown_session(db: sessionmaker[Session]) -> None:
    with pytest.raises(UnknownSession), transaction(db) as s:
        append_event(s, session_id="missing", kind="message", payload={})
    with pytest.raises(UnknownSession), transaction(db) as s:
        update_session(s, session_id="missing", status="closed")


def test_update_and_list_sessions(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        a = create_session(s, mode="interactive", session_id="11111111-aaaa")
        b = create_session(s, mode="interactive")
        before = a.updated_at
    with transaction(db) as s:
        closed = update_session(s, session_id=a.id, status="closed", owner=None)
        assert closed.updated_at > before
    with pytest.raises(ValueError, match="cannot be set"), transaction(db) as s:
        update_session(s, session_id=a.id, last_seq=99)
    with db() as s:
        assert [x.id for x in list_sessions(s, status="closed")] == ["11111111-aaaa"]
        assert {x.id for x in list_sessions(s)} == {a.id, b.id}


def _append_concurrently(engine_url: str, session_id: str, workers: int, per_worker: int) -> None:
    barrier = threading.Barrier(workers, timeout=30)
    errors: list[BaseException] = []

    def work() -> None:
        engine: Engine = make_engine(engine_url)  # each thread: its own engine and connection
        factory = make_sessionmaker(engine)
        try:
            barrier.wait()
            for _ in range(per_worker):
                with transaction(factory) as s:
                    append_event(s, session_id=session_id, kind="message", payload={})
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_concurrent_appends_are_gapless_and_unique(
    backend: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("pg_head_url" if backend == "postgres" else "sqlite_head_url")
    engine = make_engine(url)
    factory = make_sessionmaker(engine)
    with transaction(factory) as s:
        session_id = create_session(s, mode="autonomous").id
    _append_concurrently(url, session_id, workers=4, per_worker=25)
    with factory() as s:
        seqs = s.scalars(
            select(SessionEvent.seq).where(SessionEvent.session_id == session_id)
        ).all()
        assert sorted(seqs) == list(range(1, 101))
        assert get_session(s, session_id=session_id).last_seq == 100  # type: ignore[union-attr]
    engine.dispose()
