"""The gate's rules, one by one, on made-up scores (the metrics themselves are tested on the
real model in test_train.py; the NaN adapter end to end in test_pipeline.py)."""

from __future__ import annotations

from learner.config import GateConfig
from learner.evaluate import Scores, gate

SERVING = Scores(samples=20, desirable=10, undesirable=10, preference_accuracy=0.8, kl=0.3,
                 loss=0.40, reward_margin=2.0)  # fmt: skip


def scores(**changes: float | int | None) -> Scores:
    return Scores(**{**SERVING.__dict__, **changes})


def test_a_candidate_as_good_as_the_serving_adapter_passes() -> None:
    decision = gate(scores(preference_accuracy=0.76, loss=0.44), SERVING, GateConfig(),
                    finite=True)  # fmt: skip
    assert decision.accepted and decision.reasons == []


def test_each_rule_refuses_with_its_reason() -> None:
    config = GateConfig(accuracy_margin=0.05, loss_margin=0.05, max_kl=1.0)
    cases = {
        "preference accuracy": scores(preference_accuracy=0.70),
        "held-out loss": scores(loss=0.50),
        "KL to the reference": scores(kl=1.5),
        "non-finite held-out metrics": scores(loss=float("nan")),
    }
    for reason, candidate in cases.items():
        decision = gate(candidate, SERVING, config, finite=True)
        assert not decision.accepted and any(reason in r for r in decision.reasons), reason
    nan_weights = gate(SERVING, SERVING, config, finite=False)
    assert not nan_weights.accepted and "non-finite weights" in nan_weights.reasons[0]


def test_accuracy_is_not_compared_when_a_side_has_one_class_only() -> None:
    decision = gate(scores(preference_accuracy=None), SERVING, GateConfig(), finite=True)
    assert decision.accepted


def test_accuracy_and_loss_do_not_decide_on_too_few_of_a_class() -> None:
    """One desirable held-out sample: accuracy 2/17 and a loss hung on it are noise, not a
    worse policy (seen in bench/online_learning.py on the real model); KL still decides."""
    worse = scores(desirable=1, undesirable=16, preference_accuracy=0.118, loss=0.9)
    decision = gate(worse, SERVING, GateConfig(min_per_class=5), finite=True)
    assert decision.accepted, decision.reasons
    assert "1 desirable and 16 undesirable" in decision.undecided[0]
    refused = gate(scores(desirable=1, kl=9.0), SERVING, GateConfig(max_kl=2.0), finite=True)
    assert not refused.accepted and "KL" in refused.reasons[0]
    enough = gate(scores(desirable=5, undesirable=5, preference_accuracy=0.118), SERVING,
                  GateConfig(min_per_class=5), finite=True)  # fmt: skip
    assert not enough.accepted and not enough.undecided
