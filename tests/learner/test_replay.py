"""A cycle continues the serving adapter; trained on the new feedback alone it forgets what
the last cycle taught. `data.replay` trains earlier samples again beside the new ones
(learner/data.py `replay_samples`). Real cycles on the dev model: v1 learns `return` over
`print`, v2 learns `yield` over `del` from v1's feedback; on v1's held-out lesson, v2 with
replay has moved less far from v1 than v2 without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from learner import pipeline
from learner.data import read_snapshot
from learner.evaluate import score_heldout
from tests.learner.conftest import FAST
from tests.learner.synthetic_feedback import PROPERTIES, seed_feedback


def first_lesson_delta(ctx: pipeline.Context, tokenizer: Any, replay: float) -> tuple[float, Any]:
    """v2 (replay as given) against v1 on v1's held-out lesson: the mean signed delta of
    log-likelihood, toward what people judged (learner/evaluate.py), and the collect step."""
    over = {**FAST, "data": {**FAST["data"], "replay": replay}}
    run = pipeline.run_cycle(ctx, pipeline.create_cycle(ctx, trigger="test", overrides=over))
    heldout = [s for s in read_snapshot(ctx.run_dir(run.id) / "dataset.json") if s.heldout]
    v1 = ctx.settings.adapters_dir.resolve() / "policy-v1"
    config = pipeline.run_config(run)
    scores = score_heldout(ctx.settings.model_name, heldout, ctx.run_dir(run.id) / "candidate",
                           v1, config.train, config.gate)  # fmt: skip
    words = PROPERTIES[0][0].split()[0], PROPERTIES[0][1].split("(")[0]  # return, print
    first = [d for s, d in zip(heldout, scores.deltas, strict=True)
             if any(w in tokenizer.decode(s.completion_ids) for w in words)]  # fmt: skip
    assert len(first) >= 12, len(first)
    return sum(first) / len(first), run.steps[0]["metrics"]


def test_replay_keeps_more_of_the_last_lesson(
    ctx: pipeline.Context, dev_tokenizer: Any, dev_model_dir: Path
) -> None:
    seed_feedback(ctx.db, dev_tokenizer, dev_model_dir, 48)
    v1 = pipeline.run_cycle(ctx, pipeline.create_cycle(ctx, trigger="test", overrides=FAST))
    assert v1.status == "succeeded" and v1.adapter_version == 1, v1.error
    seed_feedback(ctx.db, dev_tokenizer, dev_model_dir, 48, seed=7, adapter_version=1, prop=1)
    alone, collected = first_lesson_delta(ctx, dev_tokenizer, replay=0.0)
    assert collected["replayed"] == 0
    with_replay, collected = first_lesson_delta(ctx, dev_tokenizer, replay=1.0)
    # as many earlier samples as new ones, or all v1 trained on when that is fewer
    assert collected["replayed"] == min(collected["train"], v1.steps[0]["metrics"]["train"])
    # Measured: -0.51 alone, -0.16 with replay (mean over v1's held-out items).
    assert alone < -0.1 and with_replay > alone + 0.15, (alone, with_replay)
