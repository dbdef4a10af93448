"""Group commit (agent_server/session/batches.py) of outcomes: concurrent outcomes share
transactions, each caller learns its own result only after the commit, and an outcome the
database refuses fails alone — on SQLite and PostgreSQL (`db`), the poison case on
PostgreSQL (it refuses NUL in text; SQLite stores it).
Run: .venv/bin/python -m pytest tests/session/test_batches.py -q
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import DataError
from sqlalchemy.orm import Session, sessionmaker

from agent_server.session.batches import Batched
from feedback.db import transaction
from feedback.models import Outcome
from feedback.queries import record_suggestion
from feedback.queries.outcomes_batch import record_outcomes
from feedback.queries.suggestions import UnknownSuggestion


def _suggestion(db: sessionmaker[Session]) -> str:
    with transaction(db) as s:
        return record_suggestion(
            s, kind="completion", model="dev", adapter_version=None, prompt_messages=[],
            prompt_token_ids=[1], completion_text="x", completion_token_ids=[2],
            completion_logprobs=[-0.1], proposed="x",
        ).id  # fmt: skip


def _count(db: sessionmaker[Session]) -> int:
    with transaction(db) as s:
        return int(s.scalar(select(func.count(Outcome.id))))


async def test_concurrent_outcomes_share_commits(db: sessionmaker[Session]) -> None:
    sid = _suggestion(db)
    writer = Batched(db, record_outcomes)
    fields = [dict(suggestion_id=sid, kind="shown", client_event_id=f"e{i}") for i in range(60)]
    fields.append(dict(suggestion_id=sid, kind="shown", client_event_id="e0"))  # a resend
    fields.append(dict(suggestion_id="missing", kind="shown", client_event_id="m"))
    results = await asyncio.gather(*(writer.call(f) for f in fields), return_exceptions=True)
    stored, resend, unknown = results[:60], results[60], results[61]
    assert len({r.id for r in stored}) == 60 and not any(r.duplicate for r in stored)
    assert resend.duplicate and resend.id == stored[0].id
    assert isinstance(unknown, UnknownSuggestion)
    # 62 outcomes, queued together, committed together (one transaction up to MAX_BATCH).
    assert writer.batches == 1, writer.batches
    assert _count(db) == 60
    # A lone outcome later is written at once (a new run of the writer).
    lone = await asyncio.wait_for(
        writer.call(dict(suggestion_id=sid, kind="accepted", client_event_id="late")), 10
    )
    assert not lone.duplicate and _count(db) == 61


@pytest.mark.postgres
async def test_an_outcome_the_database_refuses_fails_alone(pg_db: sessionmaker[Session]) -> None:
    sid = _suggestion(pg_db)
    writer = Batched(pg_db, record_outcomes)
    good = [dict(suggestion_id=sid, kind="shown", client_event_id=f"g{i}") for i in range(9)]
    poison = dict(suggestion_id=sid, kind="rejected", client_event_id="p", reason="a\x00b")
    tasks = [writer.call(f) for f in good[:5]] + [writer.call(poison)]
    tasks += [writer.call(f) for f in good[5:]]
    results = await asyncio.gather(*tasks, return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    assert len(failed) == 1 and isinstance(failed[0], DataError)
    assert _count(pg_db) == 9
