"""RL on completion tasks of the person's history (learner/completion_rl.py): the leave-one-out
advantages, and a cycle that samples train tasks through the product's inline path on the
embedded dev model, rewards them and trains on them beside the repository's code.

    .venv/bin/python -m pytest tests/learner/test_completion_rl.py -q
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from learner import pipeline
from learner.completion_rl import advantages, completion_calls
from learner.config import LearnerConfig
from tests.learner.synth.test_completion_tasks import make_history


def test_leave_one_out_advantages():
    assert advantages([1.0, 0.0, 0.0, 0.0]) == [1.0, -1 / 3, -1 / 3, -1 / 3]
    assert advantages([0.5, 0.5]) == [0.0, 0.0]
    assert sum(advantages([0.2, 0.9, 0.4])) == pytest.approx(0.0)


def test_completion_tasks_are_sampled_rewarded_and_trained_on(
    ctx: pipeline.Context, tmp_path: Path
) -> None:
    repo = tmp_path / "shop"
    make_history(repo)
    overrides: dict[str, Any] = {
        "data": {"settle_s": 0.0},
        "train": {"max_steps": 2, "batch_size": 8, "lr": 1e-3},
        "gate": {"min_per_class": 2, "max_perplexity_increase": 0.5},
        "code": {"repo": str(repo), "heldout_one_in": 2, "chunk_tokens": 64,
                 "completion_tasks": 6, "samples": 3, "temperature": 1.0},
    }  # fmt: skip
    calls, stats = completion_calls(ctx, 1, LearnerConfig.model_validate(overrides))
    assert stats["tasks"] == 6 and stats["completions"] == 18 and stats["adapter"] is None
    assert stats["calls"] + 3 * stats["groups_equal"] + stats["missing_ids"] == 18
    assert calls, stats  # the dev model at temperature 1 does not write one text three times
    by_task: dict[str, list[float]] = {}
    for call in calls:
        assert call.kind == "completion" and call.prompt_ids and call.completion_ids
        assert len(call.behaviour_logprobs) == len(call.completion_ids)
        by_task.setdefault(call.rollout_id.rsplit(":", 1)[0], []).append(call.advantage)
    assert all(sum(a) == pytest.approx(0.0, abs=1e-9) for a in by_task.values())

    run = pipeline.run_cycle(ctx, pipeline.create_cycle(ctx, trigger="test", overrides=overrides))
    train = {s["name"]: s.get("metrics") or {} for s in run.steps}["train"]
    assert train["objectives"]["completions"]["samples"] > 0, (run.error, train)
    assert train["completion_tasks"]["tasks"] == 6
    assert set(train["objectives"]) == {"code", "completions"}, "no feedback: left out"
