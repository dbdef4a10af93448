"""The figures an update reports: per-step curves, and the trainer / engine logprob gap.

    curves = Curves()
    curves.add(loss=0.41, kl=0.02, tokens_per_s=2650.0)   # once per optimizer step
    result.curves = curves.values                        # {"loss": [...], "kl": [...], ...}
    feedback_figures(rewards, desirable, importance, z0s, cap)  # one KTO step's figures
    logprob_gap(old, behaviour, cap)                     # Gap(mean_abs, max_abs, share_capped)

The curves go into the train step's metrics of the run; the dashboard draws each as a line
over the steps (TRL's curves: loss, KL, implicit reward, preference accuracy, importance
ratios, throughput; for trajectories the clipped share). Nothing to run; tests:
tests/learner/test_figures.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from learner.kto import preference_accuracy


@dataclass
class Curves:
    """Per-step values by name; a name missing at a step (e.g. no rejected sample in the
    batch) leaves that step out of its curve."""

    values: dict[str, list[float]] = field(default_factory=dict)

    def add(self, **figures: float | None) -> None:
        for name, value in figures.items():
            if value is not None and math.isfinite(value):
                self.values.setdefault(name, []).append(round(float(value), 6))


def feedback_figures(
    rewards: Sequence[float],
    desirable: Sequence[bool],
    importance: Sequence[float],
    z0s: Sequence[float],
    cap: float,
) -> dict[str, float | None]:
    """One KTO step's figures from its micro-batches: implicit rewards r = log pi/pi_ref of
    each sample, whether it was desirable, its capped importance ratio, and the batch KL
    reference points z0 (KTO's KL estimate)."""
    good = [r for r, d in zip(rewards, desirable, strict=True) if d]
    bad = [r for r, d in zip(rewards, desirable, strict=True) if not d]
    margin = sum(good) / len(good) - sum(bad) / len(bad) if good and bad else None
    return {
        "reward_desirable": sum(good) / len(good) if good else None,
        "reward_undesirable": sum(bad) / len(bad) if bad else None,
        "reward_margin": margin,
        "preference_accuracy": preference_accuracy(rewards, desirable),
        "kl_estimate": sum(z0s) / len(z0s) if z0s else None,
        "importance_mean": sum(importance) / len(importance) if importance else None,
        "importance_max": max(importance) if importance else None,
        "importance_capped": (
            sum(w >= cap - 1e-6 for w in importance) / len(importance) if importance else None
        ),
    }


@dataclass
class Gap:
    """lp_old (trainer) against lp_behaviour (inference engine), over every trained token."""

    mean_abs: float = 0.0
    max_abs: float = 0.0
    share_capped: float = 0.0  # tokens whose importance weight hit is_cap
    tokens: int = 0


def logprob_gap(
    old: Sequence[Sequence[float]], behaviour: Sequence[Sequence[float]], cap: float
) -> Gap:
    """The gap over the tokens `old` covers (each row may be shorter than its behaviour)."""
    diffs = [
        o - b
        for rows, logged in zip(old, behaviour, strict=True)
        for o, b in zip(rows, logged[: len(rows)], strict=True)
    ]
    if not diffs:
        return Gap()
    log_cap = math.log(cap)
    return Gap(
        mean_abs=sum(map(abs, diffs)) / len(diffs),
        max_abs=max(map(abs, diffs)),
        share_capped=sum(d >= log_cap for d in diffs) / len(diffs),
        tokens=len(diffs),
    )
