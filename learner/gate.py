"""The gate: deploy a candidate only on evidence that it is better than what serves now.

    decision = feedback_decision(scores, config.gate, finite=adapter_is_finite(candidate))
    decision = task_decision(candidate_tasks, serving_tasks, config.gate, finite=finite)
    decision.verdict      # "deploy" | "refuse" | "defer"
    decision.reasons      # why not deployed (empty when deployed)
    decision.evidence     # the paired test's numbers (learner/evidence.py)

Three verdicts:
- `refuse`: a rule says the candidate is worse or unsafe — non-finite weights or scores, mean
  per-token KL to the serving policy above `max_kl`, perplexity on general code above the
  serving policy's by more than `max_perplexity_increase`, or a held-out effect <= 0 (not
  better on what people judged);
- `defer`: too little evidence to say it is better — fewer than `min_per_class` held-out
  items of a kind, or a positive effect with p >= `alpha`. The run deploys nothing and keeps
  its data (the training cursor moves only with a deployed run), and the reason says about how
  many more held-out items it needs;
- `deploy`: better with p < `alpha` and no rule refuses.
Task cycles decide the same way on held-out selection tasks (`task_decision`: per task, the
difference of the two adapters' solve rates); their confirmation tasks never decide.
Non-inferiority is not enough: a candidate that is merely "not worse" is deferred, so nothing
ships on noise. Tested in tests/learner/test_gate.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from feedback.vocab import WRITTEN
from learner.config import GateConfig
from learner.evaluate import VERDICTS, HeldoutScores
from learner.evidence import Evidence, paired_evidence

Verdict = Literal["deploy", "refuse", "defer"]


@dataclass(frozen=True)
class GateDecision:
    verdict: Verdict
    reasons: list[str]
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return self.verdict == "deploy"

    def as_dict(self) -> dict[str, Any]:
        return {"decision": self.verdict, "accepted": self.accepted, "reasons": self.reasons,
                "evidence": self.evidence}  # fmt: skip


def safety_reasons(scores: HeldoutScores, config: GateConfig, *, finite: bool) -> list[str]:
    """The rules that refuse whatever the evidence: broken weights, too far, forgetting."""
    reasons = []
    if not finite:
        reasons.append("the adapter has non-finite weights (NaN or inf)")
    values = [*scores.deltas, scores.kl_to_serving, scores.perplexity.get("ratio", 1.0)]
    if not all(math.isfinite(v) for v in values):
        reasons.append(f"non-finite held-out metrics: {scores.summary()}")
        return reasons
    if scores.kl_to_serving > config.max_kl:
        reasons.append(f"KL to the serving policy {scores.kl_to_serving:.4f} nats/token "
                       f"exceeds max_kl {config.max_kl}")  # fmt: skip
    ratio = scores.perplexity.get("ratio")
    if ratio is not None and ratio > 1 + config.max_perplexity_increase:
        reasons.append(
            f"perplexity on general code {scores.perplexity['candidate']} is "
            f"{(ratio - 1) * 100:.1f} % above the serving policy's "
            f"{scores.perplexity['serving']} (max {config.max_perplexity_increase * 100:.0f} %)"
        )
    return reasons


def decide(evidence: Evidence, refused: list[str]) -> GateDecision:
    """The verdict from the evidence and the rules that refused (see the module docstring)."""
    record = evidence.as_dict()
    if refused:
        return GateDecision("refuse", refused, record)
    if evidence.decision == "not_better":
        return GateDecision("refuse", [evidence.why], record)
    if evidence.decision == "too_little":
        return GateDecision("defer", [f"deferred: {evidence.why}"], record)
    return GateDecision("deploy", [], record)


def signs(deltas: list[float], tolerance: float = 1e-6) -> list[float]:
    """+1 for an item the candidate improved, -1 for one it made worse, 0 for no change."""
    return [0.0 if abs(d) <= tolerance else math.copysign(1.0, d) for d in deltas]


def feedback_strata(items: dict[str, int], min_per_class: int) -> tuple[str, ...]:
    """The strata the feedback gate tests: the rejected items, and each stratum that would
    show a good change -- accepted items, and what people wrote instead (`written`) -- that
    has `min_per_class` items; when neither has, accepted and rejected (so the deferral says
    what is missing). Why `written` may stand in for `accepted`: both guard against a
    candidate that merely lowers every completion, which makes no written text likelier; a
    person who accepts rarely writes often."""
    good = {k for k in ("accepted", WRITTEN) if items.get(k, 0) >= min_per_class}
    return tuple(k for k in VERDICTS if k in good or k == "rejected") if good else (
        "accepted", "rejected")  # fmt: skip


def feedback_decision(scores: HeldoutScores, config: GateConfig, *, finite: bool) -> GateDecision:
    """The verdict on held-out feedback: the strata of `feedback_strata` (rejected items, and
    accepted items or demonstrations or both), each item counting by the sign of its delta
    (a stratified sign test); items of a stratum left out are reported, not tested. Signs,
    not the deltas themselves: a mean of logprob changes is carried by a few large moves (a
    candidate trained on coin-flip labels was "better by 0.11" while it made 14 of 24 items
    worse); the sign
    asks what the gate means to ask, on how many of the things people judged the candidate
    moved the right way. The mean delta is reported beside it."""
    items = {v: scores.classes.count(v) for v in VERDICTS}
    strata = feedback_strata(items, config.min_per_class)
    evidence = paired_evidence(
        signs(scores.deltas), scores.classes, alpha=config.alpha,
        min_per_class=config.min_per_class, seed=config.seed, strata=strata,
        unit="held-out outcomes",
    )  # fmt: skip
    left = {v: n for v, n in items.items() if v not in strata and n}
    if left:
        evidence.extra["left_out"] = left
    means = [sum(d for d, c in zip(scores.deltas, scores.classes, strict=True) if c == v)
             / max(1, scores.classes.count(v)) for v in strata]  # fmt: skip
    evidence.extra["mean_delta"] = round(sum(means) / len(means), 6) if scores.deltas else None
    return decide(evidence, safety_reasons(scores, config, finite=finite))


def code_decision(scores: HeldoutScores, config: GateConfig, *, finite: bool) -> GateDecision:
    """The verdict on the person's repository (learner/repo_code.py): per held-out file, did
    the candidate make its code likelier than the serving policy does (the sign of the
    per-token logprob change), the files one stratum of at least `min_per_class`; the
    safety rules as for feedback (general-code perplexity, KL, finite)."""
    evidence = paired_evidence(
        signs(scores.deltas), ["files"] * len(scores.deltas), alpha=config.alpha,
        min_per_class=config.min_per_class, seed=config.seed, strata=("files",),
        unit="held-out files of the repository",
    )  # fmt: skip
    deltas = scores.deltas
    evidence.extra["mean_delta"] = round(sum(deltas) / len(deltas), 6) if deltas else None
    return decide(evidence, safety_reasons(scores, config, finite=finite))


def task_decision(
    candidate: dict[str, list[int]], serving: dict[str, list[int]], config: GateConfig,
    *, finite: bool,
) -> GateDecision:  # fmt: skip
    """The verdict on held-out selection tasks: per task, [solved, rollouts] of each adapter
    (the serving one may pool earlier runs'); the paired delta of a task is the difference of
    its two solve rates, and the tasks are one stratum (`min_tasks` of them at least)."""
    tried = [i for i in candidate if candidate[i][1] and serving.get(i, [0, 0])[1]]
    deltas = [candidate[i][0] / candidate[i][1] - serving[i][0] / serving[i][1] for i in tried]
    evidence = paired_evidence(
        deltas, ["tasks"] * len(deltas), alpha=config.alpha, min_per_class=config.min_tasks,
        seed=config.seed, strata=("tasks",), unit="held-out tasks",
    )  # fmt: skip
    refused = [] if finite else ["the candidate's weights are not finite"]
    return decide(evidence, refused)
