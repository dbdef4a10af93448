"""Evaluate: the candidate against the serving policy on held-out feedback, item by item.

    scores = score_heldout(model_dir, heldout, candidate_dir, serving_dir, train, gate)
    scores.deltas, scores.classes     # per held-out item: the paired evidence (learner/gate.py)
    scores.kl_to_serving              # mean per-token KL(candidate || serving)
    scores.perplexity                 # general code (learner/general_code.py), both policies

Each held-out item is one suggestion a person judged. Both policies score what was sampled
(its mean per-token logprob); the item's delta is the candidate's minus the serving one's,
signed by the verdict: positive when the candidate makes an accepted completion likelier or a
rejected one less likely. A held-out demonstration (what a person wrote instead of a
completion, learner/demos.py) is an item of its own stratum, "written": positive when the
candidate makes what they wrote likelier. The serving policy is the adapter deployed now (the
base model when none is), so the gate asks "is this better than what people get today", not
"than the base".
`kl_to_serving` is the exact per-token KL over the held-out completion positions (the full
next-token distributions): how far this one update moves what is served. Perplexity on
general code guards against forgetting. `codegen_gate` (HumanEval pass@1, off by default) and
`adapter_is_finite` are the other measures the gate reads. learner/gate.py decides.
Tested in tests/learner/test_gate.py (real training on the dev model) and test_codegen.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from peft import PeftModel
from safetensors.torch import load_file

from feedback.vocab import WRITTEN
from learner.batching import batch_of, micro_batches
from learner.config import GateConfig, TrainConfig
from learner.data import Sample
from learner.device import model_device
from learner.kto import completion_logits, per_token_kl, token_logprobs
from learner.train import load_base

# The strata of held-out feedback: the person's verdict, and what they wrote instead
# (a demonstration, learner/demos.py: better when the candidate makes it likelier).
VERDICTS = ("accepted", "rejected", WRITTEN)


@dataclass(frozen=True)
class HeldoutScores:
    """Both policies on the same held-out items (and on general code)."""

    deltas: list[float]  # per item: signed change in mean token logprob (positive: better)
    classes: list[str]  # per item: "accepted" | "rejected" (the verdict) | "written"
    kl_to_serving: float
    mean_logprob: dict[str, dict[str, float | None]]  # policy -> verdict -> mean
    perplexity: dict[str, Any]  # {"candidate", "serving", "ratio", "files", "tokens"}

    def summary(self) -> dict[str, Any]:
        return {
            "items": {v: self.classes.count(v) for v in VERDICTS},
            "kl_to_serving": round(self.kl_to_serving, 6),
            "mean_logprob": self.mean_logprob,
            "perplexity": self.perplexity,
        }


def adapter_is_finite(adapter_dir: Path) -> bool:
    """Every tensor of the adapter's weights is finite (no NaN, no inf)."""
    for path in sorted(Path(adapter_dir).glob("*.safetensors")):
        for tensor in load_file(str(path)).values():
            if not bool(torch.isfinite(tensor).all()):
                return False
    return True


def _policies(model_dir: str | Path, candidate: Path, serving: Path | None,
              config: TrainConfig) -> PeftModel:  # fmt: skip
    base = load_base(model_dir, device=config.device, dtype=config.dtype)
    model = PeftModel.from_pretrained(base, str(candidate), adapter_name="candidate")
    if serving is not None:
        model.load_adapter(str(serving), adapter_name="serving")
    return model.eval()


def _logits(model: PeftModel, batch: Any, policy: str | None) -> torch.Tensor:
    """Completion logits of one policy: an adapter by name, or None for the base model."""
    if policy is None:
        with model.disable_adapter():
            return completion_logits(model, batch)
    model.set_adapter(policy)
    return completion_logits(model, batch)


@torch.no_grad()
def _item_scores(
    model: PeftModel, samples: Sequence[Sample], serving: str | None, config: TrainConfig
) -> tuple[list[float], list[float], list[float]]:
    """(candidate mean logprobs, serving mean logprobs, per-token KLs) over `samples`."""
    cand, serv, kls = [], [], []
    for positions in micro_batches(samples, config):
        batch = batch_of([samples[k] for k in positions], config, device=model_device(model))
        mask = batch.completion_mask
        count = mask.sum(-1).clamp(min=1)
        c_logits = _logits(model, batch, "candidate")
        s_logits = _logits(model, batch, serving)
        cand += ((token_logprobs(c_logits, batch) * mask).sum(-1) / count).tolist()
        serv += ((token_logprobs(s_logits, batch) * mask).sum(-1) / count).tolist()
        kls += per_token_kl(c_logits, s_logits)[mask.bool()].tolist()
        del c_logits, s_logits
    return cand, serv, kls


def _code_samples(model_dir: str | Path, gate: GateConfig) -> list[Sample]:
    from transformers import AutoTokenizer

    from learner.general_code import code_chunks

    folder = Path(gate.perplexity_dir) if gate.perplexity_dir else None
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    chunks = code_chunks(tokenizer, files=gate.perplexity_files, tokens=gate.perplexity_tokens,
                         folder=folder)  # fmt: skip
    return [Sample(suggestion_id=f"code-{i}", desirable=True, weight=1.0,
                   prompt_ids=ids[:1], completion_ids=ids[1:], behaviour_logprobs=[],
                   adapter_version=0, outcome="accepted", heldout=True)
            for i, ids in enumerate(chunks)]  # fmt: skip


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def score_heldout(
    model_dir: str | Path,
    heldout: Sequence[Sample],
    candidate: Path,
    serving: Path | None,
    train: TrainConfig,
    gate: GateConfig,
) -> HeldoutScores:
    """The candidate and the serving policy (None: the base model) on `heldout` and on
    general code, on `train.device` in `train.dtype`, no forward over `train.micro_batch_tokens`
    padded tokens (learner/batching.py cuts and packs rows by the learner's one rule)."""
    model = _policies(model_dir, candidate, serving, train)
    serving_name = "serving" if serving is not None else None
    cand, serv, kls = _item_scores(model, heldout, serving_name, train)
    classes = [WRITTEN if s.outcome == WRITTEN else "accepted" if s.desirable else "rejected"
               for s in heldout]  # fmt: skip
    deltas = [(c - s) if s_.desirable else (s - c)
              for c, s, s_ in zip(cand, serv, heldout, strict=True)]  # fmt: skip
    means = {
        name: {v: _mean([x for x, k in zip(values, classes, strict=True) if k == v])
               for v in VERDICTS}
        for name, values in (("candidate", cand), ("serving", serv))
    }  # fmt: skip
    perplexity: dict[str, Any] = {}
    if gate.perplexity_files:
        code = _code_samples(model_dir, gate)
        c_code, s_code, _ = _item_scores(model, code, serving_name, train)
        tokens = [len(s.completion_ids) for s in code]
        nll = {name: -sum(m * n for m, n in zip(v, tokens, strict=True)) / sum(tokens)
               for name, v in (("candidate", c_code), ("serving", s_code))}  # fmt: skip
        perplexity = {"candidate": round(math.exp(nll["candidate"]), 4),
                      "serving": round(math.exp(nll["serving"]), 4),
                      "ratio": round(math.exp(nll["candidate"] - nll["serving"]), 6),
                      "files": len(code), "tokens": sum(tokens)}  # fmt: skip
    return HeldoutScores(deltas=deltas, classes=classes,
                         kl_to_serving=_mean(kls) or 0.0, mean_logprob=means,
                         perplexity=perplexity)  # fmt: skip


def codegen_rule(candidate: float, serving: float, config: GateConfig) -> list[str]:
    """The gate's codegen rule on two pass@1 values: a reason when the candidate is lower."""
    if candidate < serving - config.codegen_margin - 1e-9:
        return [
            f"HumanEval pass@1 {candidate:.3f} (first {config.codegen_problems} problems) is "
            f"below the serving adapter's {serving:.3f} by more than {config.codegen_margin}"
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
