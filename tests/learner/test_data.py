"""Collect: which feedback becomes which sample (labels, weights, staleness, cursor,
re-tokenization, split), on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from agent_server.models.devmodel.tokenizer import encode_chat
from feedback.db import transaction
from feedback.queries import (
    create_run,
    finish_run,
    publish_adapter,
    record_outcome,
    record_suggestion,
    set_run_dataset,
)
from learner.config import DataConfig
from learner.data import EDITOR_REASON_PREFIX, collect_samples, ensure_split, new_outcome_count
from learner.data import training_cursor as cursor_of

PROMPT = [{"role": "user", "content": "def add(a, b):"}]
NOW = DataConfig(settle_s=0.0)


def suggest(db: Session, *, version: int | None = None, prompt_ids: bool = True) -> str:
    row = record_suggestion(
        db, kind="completion", model="dev", adapter_version=version, prompt_messages=PROMPT,
        prompt_token_ids=[5, 6, 7] if prompt_ids else None, completion_text="x",
        completion_token_ids=[9, 10], completion_logprobs=[-0.5, -1.0], proposed="x",
    )  # fmt: skip
    return row.id


def outcome(db: Session, suggestion_id: str, kind: str, reason: str | None = None) -> int:
    row = record_outcome(
        db, suggestion_id=suggestion_id, kind=kind, client_event_id=uuid.uuid4().hex,
        reason=reason,
    )  # fmt: skip
    return row.id


def collect(db: sessionmaker[Session], tokenizer: Any = None, after: int = 0, **kw: Any):
    with transaction(db) as s:
        return collect_samples(s, DataConfig(settle_s=0.0, **kw), tokenizer=tokenizer,
                               after_outcome_id=after)  # fmt: skip


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


def test_missing_prompt_ids_are_rebuilt_with_the_chat_template(
    db: sessionmaker[Session], dev_tokenizer: Any
):
    with transaction(db) as s:
        sid = suggest(s, prompt_ids=False)
        outcome(s, sid, "rejected")
    (sample,), _ = collect(db, dev_tokenizer)
    assert sample.prompt_ids == encode_chat(dev_tokenizer, PROMPT)
    text = dev_tokenizer.decode(sample.prompt_ids)
    assert text.startswith("<|im_start|>user\ndef add(a, b):") and text.endswith("assistant\n")


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
        late, _ = collect_samples(
            s, DataConfig(settle_s=60), tokenizer=None, after_outcome_id=cursor
        )
    assert late == [], "outcomes younger than settle_s wait for the next run"


def test_split_is_stable_and_has_both_classes_on_both_sides(db: sessionmaker[Session]):
    with transaction(db) as s:
        for i in range(12):
            sid = suggest(s)
            outcome(s, sid, "accepted" if i % 2 else "rejected")
    samples, _ = collect(db, heldout_fraction=0.0)
    assert not any(x.heldout for x in samples)
    split = ensure_split(samples)
    assert split == ensure_split(list(samples))
    for label in (True, False):
        sides = {x.heldout for x in split if x.desirable is label}
        assert sides == {True, False}
    again, _ = collect(db, heldout_fraction=0.5)
    assert [x.heldout for x in again] == [x.heldout for x in collect(db, heldout_fraction=0.5)[0]]
