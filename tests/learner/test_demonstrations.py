"""What people wrote instead of a completion (`written` outcomes): which become demonstrations
(learner/demos.py, on SQLite and PostgreSQL), the demonstration objective's direction on the
dev model (learner/demonstrate.py), and the gate's strata with demonstrations (learner/gate.py).

    .venv/bin/python -m pytest tests/learner/test_demonstrations.py -q
"""

from __future__ import annotations

import copy
import random
import uuid
from typing import Any

import pytest
import torch
from sqlalchemy.orm import Session, sessionmaker

from feedback.db import transaction
from feedback.queries import record_outcome, record_suggestion
from feedback.queries.users import add_user, set_learning
from feedback.vocab import WRITTEN
from learner.config import DataConfig, GateConfig, TrainConfig
from learner.data import Sample, is_heldout
from learner.demonstrate import DemonstrationObjective
from learner.demos import Encoder, collect_demonstrations, target_ids
from learner.evaluate import HeldoutScores
from learner.gate import feedback_decision, feedback_strata
from learner.train import make_policy
from learner.update import Part, run_update
from tests.learner.synthetic_feedback import SNIPPETS, base_logprobs

NOW = DataConfig(settle_s=0.0, heldout_fraction=0.0)
WORDS = {"": 0, "x": 1, " x": 2, "y": 3, "\n": 4, "z": 5}
EOS = 99


def toy_encode(text: str) -> list[int]:
    """One id per character ('x' 1, ' x' as a pair 2): enough to check what is encoded."""
    out, i = [], 0
    while i < len(text):
        if text.startswith(" x", i):
            out.append(2)
            i += 2
        else:
            out.append(WORDS.get(text[i], 7))
            i += 1
    return out


TOY = Encoder(toy_encode, EOS)


def suggest(db: Session, *, kind: str = "completion", healed: str = "", user_id: int | None = None,
            prompt_ids: list[int] | None = None, sid: str | None = None) -> str:  # fmt: skip
    entry: dict[str, Any] = {"role": "prompt", "content": "def f():\n  return", "format": "prefix"}
    if healed:
        entry["healed"] = healed
    row = record_suggestion(
        db, kind=kind, model="dev", adapter_version=None, prompt_messages=[entry],
        prompt_token_ids=prompt_ids or [11, 12, 13], completion_text="y",
        completion_token_ids=[3], completion_logprobs=[-0.5], proposed="y", user_id=user_id,
        suggestion_id=sid,
    )  # fmt: skip
    return row.id


def outcome(db: Session, sid: str, kind: str, final_text: str | None = None) -> None:
    record_outcome(db, suggestion_id=sid, kind=kind, client_event_id=uuid.uuid4().hex,
                   final_text=final_text)  # fmt: skip


def test_what_was_written_becomes_a_demonstration_of_the_prompt_it_answers(
    db: sessionmaker[Session],
):
    with transaction(db) as s:
        plain, healed, quiet, dup, edit, opted, unwritten = (
            suggest(s), suggest(s, healed=" "), suggest(s, prompt_ids=[5]),
            suggest(s), suggest(s, kind="edit"), None, suggest(s),
        )  # fmt: skip
        user, _ = add_user(s, "ada")
        opted = suggest(s, user_id=user.id)
        set_learning(s, "ada", learn=False)
        for sid in (plain, healed, quiet, dup, edit, opted, unwritten):
            outcome(s, sid, "rejected")
        outcome(s, plain, WRITTEN, "xy\n")
        outcome(s, healed, WRITTEN, "x")
        outcome(s, quiet, WRITTEN, "  \n")
        outcome(s, dup, WRITTEN, "xy")  # the same prompt and text as `plain`: once
        outcome(s, edit, WRITTEN, "x")
        outcome(s, opted, WRITTEN, "x")
    with transaction(db) as s:
        demos, summary = collect_demonstrations(s, NOW, TOY)
    by_id = {d.suggestion_id: d for d in demos}
    assert set(by_id) == {plain, healed, quiet}
    assert by_id[plain].completion_ids == [1, 3], "the text, its trailing newline dropped"
    assert by_id[plain].prompt_ids == [11, 12, 13], "the stored prompt ids, unchanged"
    assert by_id[healed].completion_ids == [2], "the healed space goes back in front"
    assert by_id[quiet].completion_ids == [EOS], "nothing written teaches silence"
    assert all(d.desirable and d.outcome == WRITTEN and d.behaviour_logprobs == [] for d in demos)
    assert summary["dropped"] == {"edits": 1, "excluded_user": 1, "empty": 0, "duplicate": 1}
    assert summary["silent"] == 1, "the silence taught is counted, not dropped"
    with transaction(db) as s:
        loud, _ = collect_demonstrations(s, NOW.model_copy(update={"quiet_demonstrations": False}),
                                         TOY)  # fmt: skip
    assert quiet not in {d.suggestion_id for d in loud}


def test_a_held_out_suggestion_is_a_held_out_demonstration(db: sessionmaker[Session]):
    config = DataConfig(settle_s=0.0, heldout_fraction=0.5)
    with transaction(db) as s:
        ids = [suggest(s) for _ in range(12)]
        for i, sid in enumerate(ids):
            outcome(s, sid, WRITTEN, "x" * (i + 1))  # distinct texts: no duplicates
    with transaction(db) as s:
        train, _ = collect_demonstrations(s, config, TOY)
        held, _ = collect_demonstrations(s, config, TOY, heldout=True, cap=3)
    expected_out = [sid for sid in ids if is_heldout(sid, 0.5)]
    assert {d.suggestion_id for d in train} == set(ids) - set(expected_out)
    assert [d.suggestion_id for d in held] == expected_out[-3:], "the newest held-out ones"
    assert all(d.heldout for d in held) and not any(d.heldout for d in train)


def test_targets_keep_whole_lines_within_the_budget():
    config = DataConfig(demonstration_tokens=5)
    assert target_ids("xx\nyy\nzz", "", TOY, config) == [1, 1, 4, 3, 3], "two whole lines fit"
    assert target_ids("xxxxxxxx\ny", "", TOY, config) == [1] * 5, "the first line, cut"


# ---- the objective on the dev model -------------------------------------------------------


def demo_samples(tokenizer: Any, n: int, seed: int) -> list[Sample]:
    """The person always writes `return None` where the model was asked to complete."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        prompt = rng.choice(SNIPPETS) + f"# case {rng.randrange(1000)}\n    "
        out.append(Sample(
            suggestion_id=f"d{seed}-{i}", desirable=True, weight=1.0,
            prompt_ids=tokenizer.encode(prompt, add_special_tokens=False),
            completion_ids=tokenizer.encode("return None", add_special_tokens=False),
            behaviour_logprobs=[], adapter_version=0, outcome=WRITTEN, heldout=False,
        ))  # fmt: skip
    return out


def mean_logprob(policy: Any, samples: list[Sample]) -> float:
    rows = base_logprobs(policy, samples)
    return sum(sum(r) / len(r) for r in rows) / len(rows)


def test_the_demonstration_objective_makes_what_was_written_likelier(
    dev_tokenizer: Any, base_model: torch.nn.Module
):
    train, unseen = demo_samples(dev_tokenizer, 8, seed=1), demo_samples(dev_tokenizer, 6, seed=2)
    config = TrainConfig(batch_size=8, max_steps=6, lr=1e-2, kl_coef=0.0)
    before = mean_logprob(base_model, unseen)
    moved = {}
    for weight in (0.0, 1.0):
        policy, _ = make_policy(copy.deepcopy(base_model), config)
        objective = DemonstrationObjective(train, config)
        result = run_update(policy, [Part(objective, weight, 1.0)], config)
        policy.eval()
        moved[weight] = mean_logprob(policy, unseen) - before
        assert result.steps == 6
    assert abs(moved[0.0]) < 1e-4, f"weight 0 moves nothing: {moved}"
    assert moved[1.0] > 0.5, f"the written text got likelier on prompts never trained on: {moved}"
    assert (
        objective.summary()["demonstrations_nll_last"]
        < objective.summary()["demonstrations_nll_first"]
    )


# ---- the gate ------------------------------------------------------------------------------


def scores(deltas: dict[str, list[float]]) -> HeldoutScores:
    flat = [(d, c) for c, ds in deltas.items() for d in ds]
    return HeldoutScores(deltas=[d for d, _ in flat], classes=[c for _, c in flat],
                         kl_to_serving=0.01, mean_logprob={}, perplexity={})  # fmt: skip


def test_the_gate_tests_written_items_where_accepted_ones_are_too_few():
    gate = GateConfig(min_per_class=5)
    assert feedback_strata({"accepted": 9, "rejected": 9, WRITTEN: 0}, 5) == (
        "accepted",
        "rejected",
    )
    assert feedback_strata({"accepted": 2, "rejected": 9, WRITTEN: 9}, 5) == ("rejected", WRITTEN)
    assert feedback_strata({"accepted": 6, "rejected": 9, WRITTEN: 9}, 5) == (
        "accepted",
        "rejected",
        WRITTEN,
    )
    assert feedback_strata({"accepted": 2, "rejected": 9, WRITTEN: 3}, 5) == (
        "accepted",
        "rejected",
    )
    better = scores({"accepted": [-0.1, -0.2], "rejected": [0.3] * 10, WRITTEN: [0.2] * 10})
    decision = feedback_decision(better, gate, finite=True)
    assert decision.verdict == "deploy", decision.reasons
    assert decision.evidence["left_out"] == {"accepted": 2}
    # Lowering every completion helps the rejected items only: what was written got less likely.
    lowers = scores({"accepted": [-0.1, -0.2], "rejected": [0.3] * 10, WRITTEN: [-0.2] * 10})
    assert feedback_decision(lowers, gate, finite=True).verdict != "deploy"
    short = scores({"accepted": [0.1], "rejected": [0.3] * 10, WRITTEN: [0.2] * 3})
    verdict = feedback_decision(short, gate, finite=True)
    assert verdict.verdict == "defer" and "accepted" in verdict.reasons[0]


@pytest.mark.parametrize("written", ["return x", ""])
def test_the_real_tokenizer_encodes_a_demonstration(dev_model_dir: Any, written: str):
    encoder = Encoder.of(dev_model_dir)
    ids = target_ids(written, "", encoder, DataConfig())
    assert ids == ([encoder.eos_id] if not written else encoder.encode(written))
