"""The gate's rules, one by one, on made-up scores (the metrics themselves are tested on the
real model in test_train.py; the NaN adapter end to end in test_pipeline.py)."""

from __future__ import annotations

from learner.config import GateConfig
from learner.evaluate import Scores, gate

SERVING = Scores(samples=20, preference_accuracy=0.8, kl=0.3, loss=0.40, reward_margin=2.0)


def scores(**changes: float | None) -> Scores:
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
