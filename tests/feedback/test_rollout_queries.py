"""Rollout queries (feedback/queries/rollouts.py) on both databases: a rollout stored with its
calls reads back call for call (the `constrained` flag included), oldest first, by run or id;
a scope (runs, tasks, adapter; None: the base model) selects, counts solves per task, names
its models and deletes with the calls; and the 0004 migration gives calls stored before it
`constrained` false.

Run: .venv/bin/python -m pytest tests/feedback/test_rollout_queries.py -q
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, func, pool, select, text
from sqlalchemy.orm import Session, sessionmaker

from feedback.db import transaction
from feedback.migrate import downgrade, upgrade
from feedback.models import RolloutCall
from feedback.queries import (
    NewCall,
    create_run,
    delete_rollouts,
    get_rollout,
    list_rollouts,
    rollout_models,
    rollouts_of,
    rollouts_with_calls,
    solved_per_task,
    store_rollout,
)
from feedback.queries.rollouts import MAX_MESSAGE_CHARS

AGENT = NewCall("agent", [1, 2, 3], [4, 5], [-0.1, -0.2], "policy-v1", "stop", constrained=True)
SUMMARY = NewCall("summary", [1, 2], [6], [-0.3], "policy-v1", "length")


def _store(s: Session, **overrides: Any) -> str:
    fields: dict[str, Any] = dict(
        run_id=None, session_id=None, instance_id="calc__revert-0", kind="revert",
        difficulty="easy", statement="precise", model="dev", adapter="policy-v1",
        status="finished", message="done", reward=1.0, reward_terms={"solved": True},
        truncated=False, steps=2, tokens=9, summaries=1, wall_s=1.5, diff="--- a\n",
        calls=[AGENT, SUMMARY, AGENT],
    )  # fmt: skip
    return store_rollout(s, **(fields | overrides))


def test_a_rollout_reads_back_call_for_call(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        run = create_run(s, trigger="test").id
        first = _store(s, run_id=run, message="x" * (MAX_MESSAGE_CHARS + 5))
        second = _store(s, run_id=run, calls=[])
        other = _store(s)  # no run
    with transaction(db) as s:
        read = rollouts_with_calls(s, run_id=run)
        assert [r.id for r in read] == [first, second]  # oldest first
        got = read[0]
        assert [(c.seq, c.kind, c.constrained) for c in got.calls] == [
            (1, "agent", True), (2, "summary", False), (3, "agent", True)]  # fmt: skip
        call = got.calls[0]
        assert (call.prompt_token_ids, call.completion_token_ids, call.logprobs) == (
            [1, 2, 3], [4, 5], [-0.1, -0.2])  # fmt: skip
        assert (call.adapter, call.finish_reason) == ("policy-v1", "stop")
        assert got.message == "x" * MAX_MESSAGE_CHARS and got.reward_terms == {"solved": True}
        assert (got.run_id, got.instance_id, got.steps, got.wall_s) == (run, "calc__revert-0",
                                                                        2, 1.5)  # fmt: skip
        assert read[1].calls == ()
        assert [r.id for r in rollouts_with_calls(s, ids=[other, first])] == [first, other]
        assert [r.id for r in rollouts_with_calls(s, run_id=run, ids=[other])] == []
        listed = list_rollouts(s, run_id=run)
        assert [r.id for r in listed] == [first, second] and listed[0].calls == ()
        one = get_rollout(s, rollout_id=other)
        assert one is not None and one.run_id is None and len(one.calls) == 3
        assert get_rollout(s, rollout_id="no-such-rollout") is None


def test_a_scope_selects_counts_and_deletes(db: sessionmaker[Session]) -> None:
    with transaction(db) as s:
        a, b = create_run(s, trigger="test").id, create_run(s, trigger="test").id
        base = _store(s, run_id=a, adapter=None, reward_terms={"solved": False})
        tuned = _store(s, run_id=a, instance_id="t2")
        _store(s, run_id=b, instance_id="t2", model="other", reward_terms={})
        _store(s, run_id=b, instance_id="t3")  # a task outside the scopes below
    tasks = ["calc__revert-0", "t2"]
    with transaction(db) as s:
        assert [r.id for r in rollouts_of(s, run_ids=[a], instance_ids=tasks, adapter=None)] == [
            base]  # fmt: skip
        mine = rollouts_of(s, run_ids=[a], instance_ids=tasks, adapter="policy-v1")
        assert [r.id for r in mine] == [tuned] and len(mine[0].calls) == 3
        assert solved_per_task(s, run_ids=[a, b], instance_ids=tasks, adapter="policy-v1") == {
            "calc__revert-0": [0, 0], "t2": [1, 2]}  # fmt: skip
        assert solved_per_task(s, run_ids=[a], instance_ids=tasks, adapter=None) == {
            "calc__revert-0": [0, 1], "t2": [0, 0]}  # fmt: skip
        both = dict(run_ids=[a, b], instance_ids=tasks, adapter="policy-v1")
        assert rollout_models(s, **both) == ["dev", "other"]  # type: ignore[arg-type]
        assert rollout_models(s, run_ids=[a], instance_ids=tasks, adapter=None) == ["dev"]
    with transaction(db) as s:
        assert delete_rollouts(s, **both) == 2  # type: ignore[arg-type]
        assert delete_rollouts(s, **both) == 0  # type: ignore[arg-type]
    with transaction(db) as s:
        left = rollouts_with_calls(s)
        assert sorted(r.instance_id for r in left) == ["calc__revert-0", "t3"]
        assert s.scalar(select(func.count()).select_from(RolloutCall)) == 6  # theirs went too


ROLLOUT_0003 = (
    "INSERT INTO task_rollouts (id, instance_id, kind, difficulty, statement, model, status, "
    "reward, reward_terms, truncated, steps, tokens, summaries, wall_s, diff, created_at) "
    "VALUES ('r1', 't', 'revert', 'easy', 'precise', 'dev', 'finished', 1.0, '{}', 0, 1, 3, "
    "0, 1.0, '', '2026-12-01 10:00:00+00:00')"
)
CALL_0003 = (
    "INSERT INTO rollout_calls (rollout_id, seq, kind, prompt_token_ids, completion_token_ids, "
    "logprobs) VALUES ('r1', 1, 'agent', '[1]', '[2]', '[-0.5]')"
)


def test_calls_stored_before_0004_read_unconstrained(sqlite_url: str) -> None:
    upgrade(sqlite_url, "0003")
    engine = create_engine(sqlite_url, poolclass=pool.NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(text(ROLLOUT_0003))
            conn.execute(text(CALL_0003))
        upgrade(sqlite_url)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT constrained FROM rollout_calls")).all() == [(0,)]
        downgrade(sqlite_url, "0003")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT seq, kind FROM rollout_calls")).all() == [
                (1, "agent")]  # fmt: skip
    finally:
        engine.dispose()
