"""Evaluate and gate: score adapters on held-out feedback and refuse a worse candidate.

    scores = score_adapters(model_dir, heldout, {"candidate": cand_dir, "serving": None},
                            train_config)
    decision = gate(scores["candidate"], scores["serving"], config.gate,
                    finite=adapter_is_finite(cand_dir))

Metrics per adapter (None = the base model), on the held-out samples:
- `preference_accuracy`: P(r(desirable) > r(undesirable)) over all held-out pairs, ties
  counting half (0.5 for the base model, whose implicit reward is 0 everywhere);
- `kl`: mean exact per-token KL(pi || pi_ref) over the completion positions (the full
  next-token distributions, not a sampled estimate);
- `loss`: the KTO loss with the reference point z0 at 0 and no importance weights, lambdas
  balanced on the held-out set: a logistic loss of the implicit reward against the label.
  (The training loss's z0 and importance weights depend on the adapter being scored, which
  makes that loss incomparable between two adapters; this one compares like with like.)
- `reward_margin`: mean r of desirable minus mean r of undesirable samples.
The gate refuses non-finite weights or metrics, accuracy below the serving adapter's by more
than `accuracy_margin`, loss above it by more than `loss_margin`, and KL above `max_kl`. The
accuracy and loss rules decide only when the held-out set has at least `min_per_class`
samples of each class (else the decision says why they were left out: KL still decides).
With `codegen_problems` > 0, `codegen_gate` also runs the first N HumanEval problems with
both adapters (learner/codegen.py) and refuses a pass@1 below the serving adapter's by more
than `codegen_margin` (off by default: see GateConfig). A task cycle adds `solve_rule`: the
candidate's solve rate on held-out tasks (never trained on) below the serving adapter's by
more than `solve_margin` is refused.
Tested in tests/learner/test_train.py, tests/learner/test_gate.py and (solve_rule)
tests/learner/synth/test_evaluate.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from peft import PeftModel
from safetensors.torch import load_file

from learner.config import GateConfig, TrainConfig
from learner.data import Sample
from learner.device import model_device
from learner.kto import (
    class_weights,
    completion_logits,
    make_batch,
    per_token_kl,
    preference_accuracy,
    token_logprobs,
)
from learner.train import load_base, micro_batches


@dataclass(frozen=True)
class Scores:
    samples: int
    desirable: int  # held-out samples of each class: the evidence the pairwise rules rest on
    undesirable: int
    preference_accuracy: float | None
    kl: float
    loss: float
    reward_margin: float | None

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class GateDecision:
    accepted: bool
    reasons: list[str]
    undecided: list[str] = field(default_factory=list)  # rules left out, and why


def adapter_is_finite(adapter_dir: Path) -> bool:
    """Every tensor of the adapter's weights is finite (no NaN, no inf)."""
    for path in sorted(Path(adapter_dir).glob("*.safetensors")):
        for tensor in load_file(str(path)).values():
            if not bool(torch.isfinite(tensor).all()):
                return False
    return True


@torch.no_grad()
def score_adapters(
    model_dir: str | Path,
    samples: Sequence[Sample],
    adapters: Mapping[str, Path | None],
    config: TrainConfig,
) -> dict[str, Scores]:
    """Scores of each named adapter folder (None: the base model) on `samples`, on
    `config.device` in `config.dtype`, `config.micro_batch_tokens` per forward."""
    base = load_base(model_dir, device=config.device, dtype=config.dtype)
    peft: PeftModel | None = None
    for name, folder in adapters.items():
        if folder is None:
            continue
        if peft is None:
            peft = PeftModel.from_pretrained(base, str(folder), adapter_name=name)
        else:
            peft.load_adapter(str(folder), adapter_name=name)
    model = peft if peft is not None else base
    model.eval()
    lambdas = class_weights(samples, config.desirable_weight, config.undesirable_weight)
    results: dict[str, Scores] = {}
    for name, folder in adapters.items():
        rewards, desirable, kls, weights, losses = [], [], [], [], []
        for positions in micro_batches(samples, config):
            batch = make_batch(
                [samples[k] for k in positions],
                max_length=config.max_length,
                max_completion_length=config.max_completion_length,
                lambdas=lambdas,
                device=model_device(model),
            )
            ref_logits = _logits(model, batch, adapter=None, peft=peft)
            pol_logits = _logits(model, batch, adapter=name if folder else None, peft=peft)
            pick_ref = token_logprobs(ref_logits, batch)
            pick_pol = token_logprobs(pol_logits, batch)
            reward = ((pick_pol - pick_ref) * batch.completion_mask).sum(-1)
            sign = torch.where(batch.desirable, 1.0, -1.0)
            per_sample = 1 - torch.sigmoid(config.beta * sign * reward)
            kl = per_token_kl(pol_logits, ref_logits)  # [B, T]
            kls += kl[batch.completion_mask.bool()].tolist()
            rewards += reward.tolist()
            desirable += batch.desirable.tolist()
            losses.append(float((per_sample * batch.weight).sum()))
            weights.append(float(batch.weight.sum()))
        results[name] = _scores(rewards, desirable, kls, losses, weights)
    return results


def _logits(
    model: torch.nn.Module, batch: Any, *, adapter: str | None, peft: PeftModel | None
) -> torch.Tensor:
    if peft is None:
        return completion_logits(model, batch)
    if adapter is None:
        with peft.disable_adapter():
            return completion_logits(model, batch)
    peft.set_adapter(adapter)
    return completion_logits(model, batch)


def _scores(
    rewards: list[float],
    desirable: list[bool],
    kls: list[float],
    losses: list[float],
    weights: list[float],
) -> Scores:
    good = [r for r, d in zip(rewards, desirable, strict=True) if d]
    bad = [r for r, d in zip(rewards, desirable, strict=True) if not d]
    margin = (sum(good) / len(good) - sum(bad) / len(bad)) if good and bad else None
    return Scores(
        samples=len(rewards),
        desirable=len(good),
        undesirable=len(bad),
        preference_accuracy=preference_accuracy(rewards, desirable),
        kl=sum(kls) / len(kls) if kls else 0.0,
        loss=sum(losses) / sum(weights) if sum(weights) > 0 else float("nan"),
        reward_margin=margin,
    )


def gate(candidate: Scores, serving: Scores, config: GateConfig, *, finite: bool) -> GateDecision:
    """Accept the candidate unless one of the module docstring's rules refuses it."""
    reasons = []
    if not finite:
        reasons.append("the adapter has non-finite weights (NaN or inf)")
    values = [candidate.kl, candidate.loss, candidate.preference_accuracy or 0.0]
    if not all(math.isfinite(v) for v in values):
        reasons.append(f"non-finite held-out metrics: {candidate.as_dict()}")
    undecided = []
    fewest = min(candidate.desirable, candidate.undesirable)
    if fewest < config.min_per_class:
        # One accepted sample among twenty made the pairwise accuracy 0.118 = 2/17 and the
        # class-balanced loss hang on that one sample: noise, not evidence of a worse policy.
        undecided.append(
            f"preference accuracy and held-out loss not compared: {candidate.desirable} "
            f"desirable and {candidate.undesirable} undesirable held-out samples (fewer than "
            f"min_per_class {config.min_per_class} of one class)"
        )
    else:
        reasons += _pairwise_rules(candidate, serving, config)
    if candidate.kl > config.max_kl:
        reasons.append(f"KL to the reference {candidate.kl:.4f} exceeds max_kl {config.max_kl}")
    return GateDecision(accepted=not reasons, reasons=reasons, undecided=undecided)


def _pairwise_rules(candidate: Scores, serving: Scores, config: GateConfig) -> list[str]:
    reasons = []
    if (
        candidate.preference_accuracy is not None
        and serving.preference_accuracy is not None
        and candidate.preference_accuracy < serving.preference_accuracy - config.accuracy_margin
    ):
        reasons.append(
            f"preference accuracy {candidate.preference_accuracy:.3f} is below the serving "
            f"adapter's {serving.preference_accuracy:.3f} by more than {config.accuracy_margin}"
        )
    if candidate.loss > serving.loss + config.loss_margin:
        reasons.append(
            f"held-out loss {candidate.loss:.4f} is above the serving adapter's "
            f"{serving.loss:.4f} by more than {config.loss_margin}"
        )
    return reasons


def codegen_rule(candidate: float, serving: float, config: GateConfig) -> list[str]:
    """The gate's codegen rule on two pass@1 values: a reason when the candidate is lower."""
    if candidate < serving - config.codegen_margin - 1e-9:
        return [
            f"HumanEval pass@1 {candidate:.3f} (first {config.codegen_problems} problems) is "
            f"below the serving adapter's {serving:.3f} by more than {config.codegen_margin}"
        ]
    return []


@dataclass(frozen=True)
class SolveRate:
    """Held-out task rollouts solved by one adapter."""

    solved: int
    tried: int

    @property
    def rate(self) -> float:
        return self.solved / self.tried if self.tried else 0.0

    @classmethod
    def of(cls, report: dict[str, Any]) -> SolveRate:
        """From learner.synth.evaluate's report of one adapter on the held-out tasks."""
        return cls(int(report["solved"]), int(report["rollouts"]))


def solve_rule(candidate: SolveRate, serving: SolveRate, config: GateConfig) -> list[str]:
    """The gate's task rule: a reason when the candidate solves fewer held-out tasks than the
    serving adapter by more than `solve_margin` (rates of the same tasks; the serving one may
    pool earlier runs' rollouts, learner/heldout.py, so the counts may differ)."""
    if not candidate.tried or not serving.tried:
        return [f"held-out solve rates are not comparable: {candidate.tried} rollouts of the "
                f"candidate against {serving.tried} of the serving adapter"]  # fmt: skip
    if candidate.rate < serving.rate - config.solve_margin - 1e-9:
        return [
            f"held-out solve rate {candidate.rate:.3f} ({candidate.solved}/{candidate.tried}) "
            f"is below the serving adapter's {serving.rate:.3f} ({serving.solved}/"
            f"{serving.tried}) by more than {config.solve_margin}"
        ]
    return []


def codegen_gate(
    model_dir: str | Path,
    candidate: Path,
    serving: Path | None,
    config: GateConfig,
    *,
    max_tokens: int | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """(metrics, reasons) of the codegen check; ({}, []) when `codegen_problems` is 0.
    `max_tokens`: per completion (None: learner.codegen's default)."""
    if config.codegen_problems == 0:
        return {}, []
    import asyncio

    from learner.codegen import DEFAULT_MAX_TOKENS, evaluate_embedded, load_problems

    problems = load_problems(config.codegen_problems)
    adapters = {"candidate": candidate, "serving": serving}
    tokens = max_tokens or DEFAULT_MAX_TOKENS
    reports = asyncio.run(evaluate_embedded(model_dir, problems, adapters, max_tokens=tokens))
    metrics = {name: report.summary() for name, report in reports.items()}
    rule = codegen_rule(reports["candidate"].pass_at_1, reports["serving"].pass_at_1, config)
    return metrics, rule
