"""Collect: which feedback becomes which sample (labels, weights, staleness, cursor, the
stored token ids used unchanged, split), on SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
import uuid
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from feedback.db import transaction
from feedback.models import Outcome, Suggestion
from feedback.queries import (
    create_run,
    finish_run,
    publish_adapter,
    record_outcome,
    record_suggestion,
    set_run_dataset,
)
from feedback.vocab import EDITOR_REASON_PREFIX, LABEL_KINDS
from learner.config import DataConfig, LearnerConfig
from learner.data import collect_samples, heldout_pool, new_outcome_count
from learner.data import training_cursor as cursor_of

PROMPT = [{"role": "user", "content": "def add(a, b):"}]
# Shaped like a backend's report: the dev model's template markers (3 = <|im_start|>,
# 4 = <|im_end|>) around the text's tokens. The learner copies them; it never decodes them.
PROMPT_IDS = [3, 1037, 198, 1288, 862, 11, 286, 1101, 4, 198, 3, 1204, 198]
NOW = DataConfig(settle_s=0.0)


def suggest(db: Session, *, version: int | None = None) -> str:
    row = record_suggestion(
        db, kind="completion", model="dev", adapter_version=version, prompt_messages=PROMPT,
        prompt_token_ids=PROMPT_IDS, completion_text="x",
        completion_token_ids=[9, 10], completion_logprobs=[-0.5, -1.0], proposed="x",
    )  # fmt: skip
    return row.id


def outcome(db: Session, suggestion_id: str, kind: str, reason: str | None = None) -> int:
    row = record_outcome(
        db, suggestion_id=suggestion_id, kind=kind, client_event_id=uuid.uuid4().hex,
        reason=reason,
    )  # fmt: skip
    return row.id


def collect(db: sessionmaker[Session], after: int = 0, **kw: Any):
    with transaction(db) as s:
        return collect_samples(s, DataConfig(settle_s=0.0, **kw), after_outcome_id=after)


def test_labels_and_weights_come_from_the_latest_decisive_outcome(db: sessionmaker[Session]):
    with transaction(db) as s:
        acc, part, rej, shown, reverted = (suggest(s) for _ in range(5))
        for sid in (acc, part, rej, shown, reverted):
            outcome(s, sid, "shown")
        outcome(s, acc, "accepted")
        outcome(s, acc, "persisted")
        outcome(s, part, "partially_accepted")
        outcome(s, rej, "rejected")
        outcome(s, reverted, "accepted")
        outcome(s, reverted, "reverted")  # accepted, then undone: a rejection
    samples, summary = collect(db)
    by_id = {s.suggestion_id: s for s in samples}
    assert set(by_id) == {acc, part, rej, reverted}, "shown-only feedback is ignored"
    assert (by_id[acc].desirable, by_id[acc].weight, by_id[acc].outcome) == (True, 1.0, "persisted")
    assert (by_id[part].desirable, by_id[part].weight) == (True, 0.5)
    assert not by_id[rej].desirable and not by_id[reverted].desirable
    assert by_id[acc].completion_ids == [9, 10] and by_id[acc].behaviour_logprobs == [-0.5, -1.0]
    assert summary["desirable"] == 2 and summary["undesirable"] == 2
    assert summary["dropped"]["undecided"] == 1


def test_a_rejection_the_editor_sent_for_the_person_is_not_a_label(db: sessionmaker[Session]):
    with transaction(db) as s:
        unseen, seen = suggest(s), suggest(s)
        outcome(s, unseen, "rejected", reason=f"{EDITOR_REASON_PREFIX}could not show it")
        outcome(s, seen, "rejected", reason="wrong variable")
    samples, summary = collect(db)
    assert [x.suggestion_id for x in samples] == [seen]
    assert summary["dropped"]["undecided"] == 1
    with transaction(db) as s:  # nor does it count towards the schedule's threshold
        assert new_outcome_count(s, after_outcome_id=0) == 1


def test_samples_more_than_k_versions_stale_are_dropped(db: sessionmaker[Session]):
    with transaction(db) as s:
        for v in range(1, 6):
            publish_adapter(s, version=v, path=f"/nowhere/policy-v{v}", base_model="dev")
        old, edge, fresh, base = (
            suggest(s, version=1),
            suggest(s, version=2),
            suggest(s, version=5),
            suggest(s),
        )
        for sid in (old, edge, fresh, base):
            outcome(s, sid, "accepted")
    samples, summary = collect(db, staleness_k=3)
    assert {x.suggestion_id for x in samples} == {edge, fresh}  # 5-1=4 and 5-0=5 are > 3
    assert summary["dropped"]["stale"] == 2 and summary["newest_version"] == 5


def test_the_stored_token_ids_are_used_unchanged_and_a_row_without_them_is_dropped(
    db: sessionmaker[Session],
):
    with transaction(db) as s:
        sid = suggest(s)
        outcome(s, sid, "rejected")
        # A row from before the write required ids (record_suggestion refuses it now).
        old = Suggestion(
            kind="completion", model="dev", adapter_version=None, prompt_messages=PROMPT,
            prompt_token_ids=None, completion_text="x", completion_token_ids=[9],
            completion_logprobs=[-0.5], proposed="x",
        )  # fmt: skip
        s.add(old)
        s.flush()
        outcome(s, old.id, "accepted")
    (sample,), summary = collect(db)
    assert sample.suggestion_id == sid
    assert sample.prompt_ids == PROMPT_IDS, "the prompt ids as stored, never re-rendered"
    assert (sample.completion_ids, sample.behaviour_logprobs) == ([9, 10], [-0.5, -1.0])
    assert summary["dropped"]["empty"] == 1


def test_the_learners_data_never_loads_a_chat_encoder():
    code = (
        "import sys, learner.data, learner.pipeline; "
        "print(sorted(m for m in sys.modules if m.startswith(("
        "'agent_server.models.chat_encoding', 'modelbuild', 'transformers'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_only_outcomes_after_the_last_successful_run_and_settled_ones_count(
    db: sessionmaker[Session],
):
    with transaction(db) as s:
        first = suggest(s)
        cut = outcome(s, first, "accepted")
        run = create_run(s, trigger="test")
        set_run_dataset(s, run_id=run.id, dataset={"max_outcome_id": cut})
        finish_run(s, run_id=run.id, status="succeeded", adapter_version=None)
        failed = create_run(s, trigger="test")  # failed runs do not move the cursor
        set_run_dataset(s, run_id=failed.id, dataset={"max_outcome_id": cut + 100})
        finish_run(s, run_id=failed.id, status="failed")
        second = suggest(s)
        outcome(s, second, "rejected")
        outcome(s, first, "shown")  # new, but not decisive: `first` is not trained again
        cursor = cursor_of(s)
        assert cursor == cut
        assert new_outcome_count(s, after_outcome_id=cursor) == 1
    samples, summary = collect(db, after=cursor)
    assert [x.suggestion_id for x in samples] == [second]
    with transaction(db) as s:
        late, _ = collect_samples(s, DataConfig(settle_s=60), after_outcome_id=cursor)
    assert late == [], "outcomes younger than settle_s wait for the next run"


def test_the_held_out_pool_lasts_across_cycles_and_is_never_trained_on(
    db: sessionmaker[Session],
):
    """A suggestion is held out once, by its id's hash, in every run; the pool gathers the
    held-out ones of every cycle (not only those after the cursor), and none of them is ever
    a training sample."""
    with transaction(db) as s:
        for i in range(40):
            outcome(s, suggest(s), "accepted" if i % 2 else "rejected")
    first, _ = collect(db, heldout_fraction=0.5)
    assert [x.heldout for x in first] == [x.heldout for x in collect(db, heldout_fraction=0.5)[0]]
    assert 0 < sum(x.heldout for x in first) < 40
    with transaction(db) as s:
        cursor = max(o.id for o in s.scalars(select(Outcome)))
        for i in range(40):
            outcome(s, suggest(s), "accepted" if i % 2 else "rejected")
    with transaction(db) as s:
        config = DataConfig(settle_s=0.0, heldout_fraction=0.5)
        second, _ = collect_samples(s, config, after_outcome_id=cursor)
        pool = heldout_pool(s, config, cap=1000)
        capped = heldout_pool(s, config, cap=3)
    held_first = {x.suggestion_id for x in first if x.heldout}
    held_second = {x.suggestion_id for x in second if x.heldout}
    assert {x.suggestion_id for x in pool} == held_first | held_second  # both cycles'
    assert all(x.heldout for x in pool)
    trained = {x.suggestion_id for x in [*first, *second] if not x.heldout}
    assert not trained & {x.suggestion_id for x in pool}
    assert [x.suggestion_id for x in capped] == [x.suggestion_id for x in pool][-3:]  # newest


def test_the_label_weights_are_keyed_by_the_label_kinds():
    assert set(DataConfig().weights) == LABEL_KINDS
    with pytest.raises(ValueError, match="unknown outcome kinds \\['shown'\\]"):
        LearnerConfig.model_validate({"data": {"weights": {"shown": 1.0}}})
