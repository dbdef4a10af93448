"""Evidence for the gate: is the candidate better than the serving policy on the same items?

    evidence = paired_evidence(deltas, classes, alpha=0.1, min_per_class=5, seed=0)
    evidence.decision          # "better" | "not_better" | "too_little"
    evidence.as_dict()         # what the run records and the dashboard shows

Each held-out item was scored by both policies; `deltas[i]` is the candidate's improvement on
item i (positive: better), and `classes[i]` names its stratum. For feedback an item is one
held-out suggestion, its delta the change in mean per-token logprob of what was sampled,
signed by the person's verdict (up for an accepted completion, down for a rejected one:
learner/evaluate.py), and the strata are the two verdicts. For tasks an item is one task,
its delta the change in solve rate, and there is one stratum.

The effect is the mean of the strata's mean deltas, so each stratum weighs the same however
many items it has: with 3 accepts and 60 rejects, a candidate that only lowers every
completion (accepts included) has an effect near 0, not a large positive one. The test is a
stratified bootstrap (items resampled with replacement within each stratum, `resamples`
times, seeded): the one-sided p-value is the share of resampled effects <= 0, the lower
bound the alpha-quantile. Decisions:
- `too_little`: a stratum has fewer than `min_per_class` items — nothing can be said yet;
- `not_better`: the effect is <= 0 — the candidate is no better on what it was judged on;
- `too_little` again when the effect is positive but p >= alpha; `needed` then estimates how
  many more items per stratum would make an effect of this size significant
  (n * ((z_{1-alpha} * se / effect)^2 - 1), se the bootstrap's standard deviation);
- `better`: p < alpha.
Pure Python on lists; tested in tests/learner/test_evidence.py.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Literal

Decision = Literal["better", "not_better", "too_little"]


@dataclass(frozen=True)
class Evidence:
    """What the paired comparison found, and what it decides."""

    decision: Decision
    items: dict[str, int]  # per stratum
    effect: float | None  # mean of the strata's mean deltas
    p_value: float | None  # one-sided: P(effect <= 0) under the bootstrap
    lower: float | None  # the one-sided (1 - alpha) lower bound of the effect
    alpha: float
    wins: int = 0  # items the candidate improved
    losses: int = 0  # items it made worse
    needed: int | None = None  # about this many more items per stratum (too_little only)
    why: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in self.__dict__.items()}
        out.pop("extra")
        return {**out, **self.extra}


def _effect(groups: Sequence[Sequence[float]]) -> float:
    return sum(sum(g) / len(g) for g in groups) / len(groups)


def paired_evidence(
    deltas: Sequence[float],
    classes: Sequence[str],
    *,
    alpha: float,
    min_per_class: int,
    seed: int = 0,
    resamples: int = 2000,
    strata: Sequence[str] | None = None,
    unit: str = "held-out items",
) -> Evidence:
    """The decision on paired deltas (see the module docstring). `strata`: the classes that
    must each have `min_per_class` items (default: those present)."""
    if len(deltas) != len(classes):
        raise ValueError(f"{len(deltas)} deltas for {len(classes)} classes")
    names = list(strata) if strata is not None else sorted(set(classes))
    groups = {name: [d for d, c in zip(deltas, classes, strict=True) if c == name]
              for name in names}  # fmt: skip
    items = {name: len(g) for name, g in groups.items()}
    wins = sum(d > 0 for d in deltas)
    losses = sum(d < 0 for d in deltas)
    base = {"items": items, "alpha": alpha, "wins": wins, "losses": losses}
    short = {name: min_per_class - n for name, n in items.items() if n < min_per_class}
    if not names or short:
        if len(items) == 1:  # one stratum: its name says no more than the unit
            what, need = f"{sum(items.values())}", "needs"
        else:
            what = ", ".join(f"{n} {name}" for name, n in items.items()) or "none"
            need = "each kind needs"
        return Evidence(
            "too_little", effect=None, p_value=None, lower=None, needed=max(short.values(),
            default=min_per_class), why=f"{what} {unit}; {need} at least {min_per_class}", **base,
        )  # fmt: skip
    lists = [groups[name] for name in names]
    effect = _effect(lists)
    rng = random.Random(seed)
    boot = sorted(_effect([rng.choices(g, k=len(g)) for g in lists]) for _ in range(resamples))
    p_value = (sum(b <= 0 for b in boot) + 1) / (resamples + 1)
    lower = boot[int(alpha * resamples)]
    mean = sum(boot) / len(boot)
    se = math.sqrt(sum((b - mean) ** 2 for b in boot) / max(1, len(boot) - 1))
    if effect <= 0:
        return Evidence("not_better", effect=effect, p_value=p_value, lower=lower, why=(
            f"not better on {sum(items.values())} {unit}: effect {effect:.4g} "
            f"({wins} better, {losses} worse)"), **base)  # fmt: skip
    if p_value >= alpha:
        z = NormalDist().inv_cdf(1 - alpha)
        n = min(items.values())
        needed = max(1, math.ceil(n * ((z * se / effect) ** 2 - 1))) if se > 0 else 1
        return Evidence("too_little", effect=effect, p_value=p_value, lower=lower,
                        needed=needed, why=(
            f"better by {effect:.4g} but not surely (p={p_value:.3f} >= alpha {alpha}): "
            f"needs about {needed} more {unit} of each kind"), **base)  # fmt: skip
    return Evidence("better", effect=effect, p_value=p_value, lower=lower, why=(
        f"better by {effect:.4g} (p={p_value:.3f} < alpha {alpha}; {wins} better, "
        f"{losses} worse)"), **base)  # fmt: skip
