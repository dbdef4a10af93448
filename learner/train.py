"""Train: a LoRA adapter on the base model with the KTO-style update (learner/kto.py).

    model = load_base(model_dir)
    policy, parent_used = make_policy(model, config, parent_dir=serving_adapter_or_None)
    result = train_policy(policy, samples, config, progress=print)
    save_adapter(policy, out_dir)           # peft format vLLM loads: no modules_to_save, no DoRA

Only the LoRA weights are trainable (peft freezes the base), and the optimizer sees only
them: every base weight stays bit-identical (tests/learner/test_train.py checks). The
reference policy is the same model under `disable_adapter()` (a no-grad forward per step for
the KL penalty; with kl_coef = 0 its logprobs are computed once before the first step).
A batch whose padded tokens exceed `micro_batch_tokens` is split into micro-batches whose
gradients accumulate; each micro-batch's loss (its own z0 and normalisation, learner/kto.py)
counts in proportion to its samples, so an unsplit batch trains exactly as before.
Device and precision come from `TrainConfig.device` / `dtype` (learner/device.py: CUDA in
bfloat16 when present, else the CPU in float32; LoRA weights always float32); batches are
made on the model's device. With a `Group` of several processes (learner/distributed.py)
each rank runs its share of every batch's micro-batches and the gradients are summed.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM

from learner.config import TrainConfig
from learner.data import Sample
from learner.device import Group, describe, model_device, resolve_device, resolve_dtype
from learner.figures import Curves, feedback_figures
from learner.kto import (
    Batch,
    class_weights,
    completion_logits,
    kto_loss,
    make_batch,
    masked_mean,
    per_token_kl,
    token_logprobs,
)

Progress = Callable[[int, int, float], None]  # (step, total steps, loss)


@dataclass
class TrainResult:
    steps: int
    samples: int
    tokens: int  # prompt + completion tokens through the policy, all steps
    seconds: float
    tokens_per_s: float
    losses: list[float] = field(default_factory=list)
    final_loss: float = float("nan")
    stopped_early: bool = False  # the max_seconds budget ran out
    micro_batches: int = 0  # forward/backward passes: more than steps when batches were split
    parent_used: bool = False
    device: str = ""  # where the base ran, e.g. "cpu", "cuda:0"
    dtype: str = ""  # its compute dtype, e.g. "float32", "bfloat16"
    processes: int = 1  # data-parallel ranks that shared each batch
    # Per step (learner/figures.py): loss, rewards, preference accuracy, KL, importance, tokens/s.
    curves: dict[str, list[float]] = field(default_factory=dict)

    def metrics(self) -> dict[str, Any]:
        out = asdict(self)
        out["losses"] = [round(x, 5) for x in self.losses]
        return out


def load_base(
    model_dir: str | Path, *, device: str | torch.device = "auto", dtype: str | torch.dtype = "auto"
) -> torch.nn.Module:
    """The base model on `device` in `dtype` (learner/device.py resolves "auto": CUDA in
    bfloat16 when present, else the CPU in float32), in eval mode (no dropout in the base)."""
    where = resolve_device(device)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=resolve_dtype(dtype, where))
    return model.to(where).eval()


def lora_config(config: TrainConfig) -> LoraConfig:
    return LoraConfig(
        r=config.rank,
        lora_alpha=config.alpha,
        lora_dropout=config.dropout,
        target_modules=list(config.target_modules),
        bias="none",
        task_type="CAUSAL_LM",
        use_dora=False,  # vLLM does not serve DoRA
    )


def make_policy(
    base: torch.nn.Module, config: TrainConfig, *, parent_dir: Path | None = None
) -> tuple[PeftModel, bool]:
    """The trainable policy: the parent adapter continued, or a fresh LoRA (B = 0: the policy
    starts equal to the reference). Returns (model, whether the parent was used)."""
    torch.manual_seed(config.seed)
    if parent_dir is not None and config.from_parent and _same_shape(parent_dir, config):
        return PeftModel.from_pretrained(base, str(parent_dir), is_trainable=True), True
    return get_peft_model(base, lora_config(config)), False


def _same_shape(parent_dir: Path, config: TrainConfig) -> bool:
    saved = json.loads((parent_dir / "adapter_config.json").read_text())
    return int(saved.get("r", -1)) == config.rank and set(saved.get("target_modules") or []) == set(
        config.target_modules
    )


@torch.no_grad()
def completion_token_logprobs(
    policy: PeftModel,
    samples: Sequence[Sample],
    config: TrainConfig,
    *,
    adapter: bool = False,
    group: Group | None = None,
) -> list[list[float]]:
    """log pi of each kept completion token, per sample: the reference (adapter disabled)
    by default, the policy as it is now with `adapter`. With a `group`, each rank computes
    its share and every rank gets all of them."""
    group = group or Group()
    mine: dict[int, list[float]] = {}
    policy.eval()
    with contextlib.nullcontext() if adapter else policy.disable_adapter():
        for positions in group.deal(micro_batches(samples, config, pieces=group.world)):
            batch = _batch([samples[k] for k in positions], config, device=model_device(policy))
            lp = token_logprobs(completion_logits(policy, batch), batch)
            mine.update(zip(positions, _unpad(lp, batch), strict=True))
    merged = {k: v for part in group.gather(mine) for k, v in part.items()}
    return [merged[k] for k in range(len(samples))]


class FeedbackObjective:
    """The KTO-style loss on people's feedback (learner/kto.py), one batch at a time:
    `backward(picked)` accumulates the gradients of the samples at `picked`, scaled by
    `scale`, micro-batch by micro-batch. train_policy steps on it alone; learner/mixed.py
    beside the task objective."""

    def __init__(self, policy: PeftModel, samples: Sequence[Sample], config: TrainConfig,
                 group: Group | None = None):  # fmt: skip
        self.samples, self.config, self.group = list(samples), config, group or Group()
        self.lambdas = class_weights(self.samples, config.desirable_weight,
                                     config.undesirable_weight)  # fmt: skip
        # With a KL penalty the reference's full distributions are needed at every step (one
        # no-grad forward); without, its token logprobs never change: compute them once.
        self.reference = (
            completion_token_logprobs(policy, self.samples, config, group=self.group)
            if not config.kl_coef
            else None
        )
        self.last: dict[str, float | None] = {}  # the figures of the last backward()

    def backward(self, policy: PeftModel, picked: Sequence[int], scale: float = 1.0,
                 result: TrainResult | None = None) -> float:  # fmt: skip
        config, chunk = self.config, [self.samples[i] for i in picked]
        loss, kls, z0s, tokens, passes = 0.0, list[float](), list[float](), 0, 0
        rewards, desirable, importance = list[float](), list[bool](), list[float]()
        for positions in self.group.deal(micro_batches(chunk, config, pieces=self.group.world)):
            part = [chunk[k] for k in positions]
            batch = _batch(part, config, self.lambdas, device=model_device(policy))
            logits = completion_logits(policy, batch)
            policy_lp = token_logprobs(logits, batch)
            if self.reference is not None:
                ref = align_rows([self.reference[picked[k]] for k in positions], batch)
                kl = torch.zeros((), device=logits.device)
            else:
                with torch.no_grad(), policy.disable_adapter():
                    ref_logits = completion_logits(policy, batch)
                ref = token_logprobs(ref_logits, batch)
                kl = masked_mean(per_token_kl(logits, ref_logits), batch.completion_mask)
            parts = kto_loss(policy_lp, ref, batch, beta=config.beta, is_cap=config.is_cap)
            # Micro-batches (and ranks) combine in proportion to samples of the whole batch.
            share = len(part) / len(chunk)
            part_loss = (parts.loss + config.kl_coef * kl) * share * scale
            part_loss.backward()
            loss += float(part_loss.detach())
            rewards += parts.rewards.tolist()
            desirable += batch.desirable.tolist()
            importance += parts.importance.tolist()
            z0s.append(parts.z0)
            if self.reference is None:  # the KL penalty's own figure
                kls.append(float(kl.detach()))
            tokens, passes = tokens + batch.tokens, passes + 1
        if self.group.world > 1:  # every rank's figures, in rank order
            ranks = self.group.gather(
                (loss, tokens, passes, kls, z0s, rewards, desirable, importance)
            )
            loss, tokens, passes = (sum(r[i] for r in ranks) for i in range(3))
            kls, z0s, rewards, desirable, importance = (
                [x for r in ranks for x in r[i]] for i in range(3, 8)
            )
        if result is not None:
            result.tokens += tokens
            result.micro_batches += passes
        self.last = feedback_figures(rewards, desirable, importance, z0s, config.is_cap)
        self.last["kl"] = sum(kls) / len(kls) if kls else None  # with a KL penalty only
        return loss


def train_policy(
    policy: PeftModel,
    samples: Sequence[Sample],
    config: TrainConfig,
    *,
    progress: Progress | None = None,
    group: Group | None = None,
) -> TrainResult:
    """Optimize the LoRA weights of `policy` on `samples` (the training split). With a
    `group` of several ranks (learner/distributed.py), every rank calls this with the same
    samples and config and ends with the same weights."""
    started = time.monotonic()
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    samples, group = list(samples), group or Group()
    objective = FeedbackObjective(policy, samples, config, group)
    params = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    per_epoch = math.ceil(len(samples) / config.batch_size)
    total = config.max_steps or max(1, math.ceil(per_epoch * config.epochs))
    order: list[int] = []
    rng = random.Random(config.seed)
    result = TrainResult(0, len(samples), 0, 0.0, 0.0, **describe(policy), processes=group.world)
    curves = Curves()
    policy.train()
    for step in range(total):
        if group.any(time.monotonic() - started > config.max_seconds):
            result.stopped_early = True
            break
        picked, order = draw(order, len(samples), config.batch_size, rng)
        optimizer.zero_grad(set_to_none=True)
        step_started, tokens_before = time.monotonic(), result.tokens
        loss = objective.backward(policy, picked, result=result)
        group.sum_grads(params)  # every rank: the whole batch's gradient
        torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        optimizer.step()
        result.losses.append(loss)
        result.steps = step + 1
        took = time.monotonic() - step_started
        step_tokens_per_s = (result.tokens - tokens_before) / took if took > 0 else None
        curves.add(loss=loss, **objective.last, tokens_per_s=step_tokens_per_s)
        if progress is not None:
            progress(step + 1, total, loss)
    policy.eval()
    result.curves = curves.values
    result.seconds = time.monotonic() - started
    result.tokens_per_s = result.tokens / result.seconds if result.seconds > 0 else 0.0
    result.final_loss = result.losses[-1] if result.losses else float("nan")
    return result


def save_adapter(policy: PeftModel, out_dir: Path) -> None:
    """Write the adapter in peft format (adapter_config.json + adapter_model.safetensors)."""
    policy.save_pretrained(str(out_dir), safe_serialization=True)


def save_whole(policy: PeftModel, final: Path) -> None:
    """The adapter as `final`, whole or not at all: written under a temporary name beside
    it (`.NAME-xxxxxxxx`, which the artifact store never moves), then renamed over any
    complete one an earlier attempt left."""
    tmp = final.with_name(f".{final.name}-{uuid.uuid4().hex[:8]}")
    save_adapter(policy, tmp)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)


def draw(
    order: list[int], n: int, batch_size: int, rng: random.Random
) -> tuple[list[int], list[int]]:
    """(the next batch of sample indices, what is left): epochs of shuffled indices."""
    if len(order) < batch_size:
        fresh = list(range(n))
        rng.shuffle(fresh)
        order = order + fresh
    return order[:batch_size], order[batch_size:]


def micro_batches(
    chunk: Sequence[Sample], config: TrainConfig, *, pieces: int = 1
) -> list[list[int]]:
    """Positions of `chunk` cut, in order, into runs whose padded size (samples x longest
    row) stays within `config.micro_batch_tokens` (one sample at least): activation memory
    grows with the padded tokens of a forward (~2 MB a token on SmolLM2-135M in float32: 8
    prompts of 1,000 tokens in one pass held 18 GB), so gradients accumulate over runs.
    At least `pieces` runs when there are that many samples (the largest halved until then):
    with N data-parallel processes every rank gets a share of each batch."""
    out: list[list[int]] = []
    longest = 0
    for position, sample in enumerate(chunk):
        completion = min(len(sample.completion_ids), config.max_completion_length)
        length = min(len(sample.prompt_ids) + completion, max(config.max_length, completion + 1))
        if out and (len(out[-1]) + 1) * max(longest, length) <= config.micro_batch_tokens:
            out[-1].append(position)
            longest = max(longest, length)
        else:
            out.append([position])
            longest = length
    while len(out) < min(pieces, len(chunk)):
        largest = max(range(len(out)), key=lambda i: len(out[i]))
        run = out[largest]
        out[largest : largest + 1] = [run[: len(run) // 2], run[len(run) // 2 :]]
    return out


def _batch(
    chunk: Sequence[Sample],
    config: TrainConfig,
    lambdas: tuple[float, float] = (1.0, 1.0),
    *,
    device: torch.device | None = None,
) -> Batch:
    return make_batch(
        chunk,
        max_length=config.max_length,
        max_completion_length=config.max_completion_length,
        lambdas=lambdas,
        device=device,
    )


def _unpad(values: torch.Tensor, batch: Batch) -> list[list[float]]:
    rows = []
    for row, mask in zip(values, batch.completion_mask, strict=True):
        rows.append(row[mask.bool()].tolist())
    return rows


def align_rows(rows: Sequence[Sequence[float]], batch: Batch) -> torch.Tensor:
    """Per-sample lists back into the batch's right-aligned [B, T] layout."""
    out = torch.zeros_like(batch.completion_mask)
    span = out.shape[1]
    for i, row in enumerate(rows):
        if row:
            out[i, span - len(row) :] = torch.tensor(row, dtype=out.dtype)
    return out
