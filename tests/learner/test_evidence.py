"""The paired test the gate decides on (learner/evidence.py), on made-up deltas: a clear
improvement is `better`, a clear loss or no change is `not_better`, a weak one or too few
items is `too_little` with an estimate of what more is needed, and strata weigh the same."""

from __future__ import annotations

import random

import pytest

from learner.evidence import paired_evidence

STRATA = ("accepted", "rejected")


def deltas(mean: float, n: int, *, spread: float = 1.0, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(mean, spread) for _ in range(n)]


def decide(accepted: list[float], rejected: list[float], **kw: float) -> object:
    return paired_evidence([*accepted, *rejected],
                           ["accepted"] * len(accepted) + ["rejected"] * len(rejected),
                           alpha=kw.get("alpha", 0.1), min_per_class=int(kw.get("min", 5)),
                           strata=STRATA)  # fmt: skip


def test_a_clear_improvement_is_better() -> None:
    e = decide(deltas(1.0, 20, seed=1), deltas(1.0, 40, seed=2))
    assert e.decision == "better" and e.p_value < 0.01 and e.lower > 0
    assert e.items == {"accepted": 20, "rejected": 40} and e.wins > e.losses


def test_a_clear_loss_and_no_change_are_not_better() -> None:
    worse = decide(deltas(-1.0, 20, seed=3), deltas(-1.0, 20, seed=4))
    assert worse.decision == "not_better" and worse.p_value > 0.9
    same = decide([0.0] * 10, [0.0] * 10)
    assert same.decision == "not_better" and same.effect == 0


def test_a_weak_improvement_is_too_little_and_says_how_much_more() -> None:
    weak = [1.0, -0.8, 0.6, -0.7, 0.9, -0.6, 0.5, -0.5]  # mean 0.05, spread ~0.7
    e = decide(weak, weak)
    assert e.effect > 0 and e.p_value >= 0.1, e
    assert e.decision == "too_little" and e.needed >= 1 and "more held-out items" in e.why


def test_too_few_of_a_kind_is_too_little_whatever_the_effect() -> None:
    e = decide(deltas(5.0, 2, seed=7), deltas(5.0, 40, seed=8))
    assert e.decision == "too_little" and e.p_value is None and e.needed == 3
    assert "2 accepted" in e.why
    none = decide([], deltas(5.0, 40))
    assert none.decision == "too_little" and none.items["accepted"] == 0


def test_strata_weigh_the_same_however_many_items() -> None:
    """Lowering every completion (rejects down: good; accepts down: bad) is no gain, though
    rejects outnumber accepts 10 to 1: the effect is the mean of the two strata's means."""
    e = decide([-1.0] * 6 + [-1.2] * 2, [1.0] * 60 + [0.8] * 20)
    assert e.effect == pytest.approx(0.5 * (-1.05 + 0.95))
    assert e.decision == "not_better"


def test_the_same_inputs_give_the_same_decision() -> None:
    a, r = deltas(0.3, 12, seed=9), deltas(0.3, 12, seed=10)
    assert decide(a, r).as_dict() == decide(a, r).as_dict()
    with pytest.raises(ValueError, match="deltas"):
        paired_evidence([1.0], ["accepted", "rejected"], alpha=0.1, min_per_class=1)
