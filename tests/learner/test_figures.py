"""The update's figures: per-step curves of a real KTO update on the dev model, the step
figures from known numbers, and the logprob gap.

Run: .venv/bin/python -m pytest tests/learner/test_figures.py -q
"""

from __future__ import annotations

import copy
import math

import pytest

from learner.config import TrainConfig
from learner.figures import Curves, feedback_figures, logprob_gap
from learner.train import make_policy, train_policy
from tests.learner.synthetic_feedback import make_samples


def test_curves_leave_out_missing_and_non_finite_values() -> None:
    curves = Curves()
    curves.add(loss=1.0, kl=None)
    curves.add(loss=float("nan"), kl=0.5)
    curves.add(loss=0.25, kl=0.25)
    assert curves.values == {"loss": [1.0, 0.25], "kl": [0.5, 0.25]}


def test_feedback_figures_from_known_numbers() -> None:
    figures = feedback_figures(
        rewards=[2.0, 0.0, -1.0, 1.0], desirable=[True, True, False, False],
        importance=[1.0, 2.0, 0.5, 2.0], z0s=[0.1, 0.3], cap=2.0,
    )  # fmt: skip
    assert figures["reward_desirable"] == 1.0 and figures["reward_undesirable"] == 0.0
    assert figures["reward_margin"] == 1.0
    assert figures["preference_accuracy"] == 0.75  # 2>-1, 2>1, 0>-1, 0<1
    assert figures["kl_estimate"] == pytest.approx(0.2)
    assert figures["importance_mean"] == 1.375 and figures["importance_max"] == 2.0
    assert figures["importance_capped"] == 0.5
    one_class = feedback_figures([1.0], [True], [1.0], [0.0], 2.0)
    assert one_class["reward_margin"] is None and one_class["preference_accuracy"] is None


def test_logprob_gap_over_the_trained_tokens() -> None:
    gap = logprob_gap([[-1.0, -2.0], [-0.5]], [[-1.5, -2.0, -9.0], [-0.5 - math.log(3)]], 2.0)
    assert gap.tokens == 3  # the third logged token was not trained on
    assert gap.mean_abs == pytest.approx((0.5 + 0 + math.log(3)) / 3)
    assert gap.max_abs == pytest.approx(math.log(3)) and gap.share_capped == pytest.approx(1 / 3)


def test_a_real_update_records_one_value_per_step(base_model, dev_tokenizer) -> None:
    samples = make_samples(dev_tokenizer, base_model, 24, seed=3)
    config = TrainConfig(max_steps=4, batch_size=8, lr=3e-3)
    policy, _ = make_policy(copy.deepcopy(base_model), config)
    result = train_policy(policy, samples, config)
    curves = result.curves
    assert curves["loss"] == [round(x, 6) for x in result.losses] and len(curves["loss"]) == 4
    for name in ("reward_margin", "kl_estimate", "importance_mean", "tokens_per_s"):
        assert len(curves[name]) == 4, name
    assert all(0 <= a <= 1 for a in curves["preference_accuracy"])
    assert all(v > 0 for v in curves["tokens_per_s"])
    assert result.metrics()["curves"] == curves
    assert ("kl" in curves) == bool(config.kl_coef)  # the exact KL with the penalty only
    assert all(v >= 0 for v in curves.get("kl", []))
