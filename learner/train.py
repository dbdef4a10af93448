"""Train: a LoRA adapter on the base model with the KTO-style update (learner/kto.py).

    model = load_base(model_dir)
    policy, parent_used = make_policy(model, config, parent_dir=serving_adapter_or_None)
    result = train_policy(policy, samples, config, progress=print)
    save_adapter(policy, out_dir)           # peft format vLLM loads: no modules_to_save, no DoRA

Only the LoRA weights are trainable (peft freezes the base), and the optimizer sees only
them: every base weight stays bit-identical (tests/learner/test_train.py checks). The
reference policy is the same model under `disable_adapter()` (a no-grad forward per step for
the KL penalty; with kl_coef = 0 its logprobs are computed once before the first step).
`micro_batch_tokens` is a hard budget on every forward pass (learner/batching.py: a sample
longer than it is cut, prompt from the left); a batch over it is split into micro-batches
whose gradients accumulate; each micro-batch's loss (its own z0 and normalisation,
learner/kto.py) counts in proportion to its samples, so an unsplit batch trains exactly as
before. Between micro-batches freed memory goes back to the system (learner/memory.py), with
`gradient_checkpointing` a layer's activations are recomputed in backward rather than kept,
and the result carries the update's peak resident set (`peak_rss_gb`, sampled;
`process_peak_rss_gb`, the process's high-water mark; curve `rss_gb` per step).
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

from learner.batching import align_rows, batch_of, micro_batches, note_budget, unpad
from learner.config import TrainConfig
from learner.data import Sample
from learner.device import Group, describe, model_device, resolve_device, resolve_dtype
from learner.figures import Curves, feedback_figures
from learner.kto import (
    class_weights,
    completion_logits,
    kto_loss,
    masked_mean,
    per_token_kl,
    token_logprobs,
)
from learner.memory import PeakRss, release

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
    peak_rss_gb: float = 0.0  # highest resident set sampled during the update (GB)
    process_peak_rss_gb: float = 0.0  # the process's high-water mark, ru_maxrss (GB)
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
    _checkpointing(getattr(base, "get_base_model", lambda: base)(), config.gradient_checkpointing)
    if parent_dir is not None and config.from_parent and _same_shape(parent_dir, config):
        return PeftModel.from_pretrained(base, str(parent_dir), is_trainable=True), True
    return get_peft_model(base, lora_config(config)), False


def _checkpointing(model: Any, on: bool) -> None:
    """Recompute each layer's activations in backward (TrainConfig.gradient_checkpointing; it
    acts in train mode only). transformers 5 calls it activation checkpointing."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        return
    name = "activation" if hasattr(model, "activation_checkpointing_enable") else "gradient"
    if on:
        getattr(model, f"{name}_checkpointing_enable")({"use_reentrant": False})
    else:
        getattr(model, f"{name}_checkpointing_disable")()


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
            batch = batch_of([samples[k] for k in positions], config, device=model_device(policy))
            lp = token_logprobs(completion_logits(policy, batch), batch)
            mine.update(zip(positions, unpad(lp, batch), strict=True))
            del batch, lp
            release()
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
        note_budget(config)
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
        chunk = [self.samples[i] for i in picked]
        loss, kls, z0s, tokens, passes = 0.0, list[float](), list[float](), 0, 0
        rewards, desirable, importance = list[float](), list[bool](), list[float]()
        for positions in self.group.deal(micro_batches(chunk, self.config,
                                                       pieces=self.group.world)):  # fmt: skip
            # Micro-batches (and ranks) combine in proportion to samples of the whole batch.
            share = len(positions) / len(chunk)
            out = self._pass(policy, [chunk[k] for k in positions], [picked[k] for k in positions],
                             share, scale)  # fmt: skip
            release()  # the pass's tensors went with its frame: their memory goes back
            loss, tokens, passes = loss + out["loss"], tokens + out["tokens"], passes + 1
            rewards += out["rewards"]
            desirable += out["desirable"]
            importance += out["importance"]
            z0s.append(out["z0"])
            if out["kl"] is not None:  # with a KL penalty: its own figure
                kls.append(out["kl"])
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
        self.last = feedback_figures(rewards, desirable, importance, z0s, self.config.is_cap)
        self.last["kl"] = sum(kls) / len(kls) if kls else None  # with a KL penalty only
        return loss

    def _pass(self, policy: PeftModel, part: list[Sample], indices: list[int],
              share: float, scale: float) -> dict[str, Any]:  # fmt: skip
        """One forward/backward of `part` (the samples at `indices`), its loss scaled by
        `share` x `scale`; returns its figures (plain numbers: no tensor outlives the pass)."""
        config = self.config
        batch = batch_of(part, config, self.lambdas, device=model_device(policy))
        logits = completion_logits(policy, batch)
        policy_lp = token_logprobs(logits, batch)
        if self.reference is not None:
            ref = align_rows([self.reference[i] for i in indices], batch)
            kl = torch.zeros((), device=logits.device)
        else:
            with torch.no_grad(), policy.disable_adapter():
                ref_logits = completion_logits(policy, batch)
            ref = token_logprobs(ref_logits, batch)
            kl = masked_mean(per_token_kl(logits, ref_logits), batch.completion_mask)
        parts = kto_loss(policy_lp, ref, batch, beta=config.beta, is_cap=config.is_cap)
        part_loss = (parts.loss + config.kl_coef * kl) * share * scale
        part_loss.backward()
        return {"loss": float(part_loss.detach()), "rewards": parts.rewards.tolist(),
                "desirable": batch.desirable.tolist(), "importance": parts.importance.tolist(),
                "z0": parts.z0, "kl": float(kl.detach()) if self.reference is None else None,
                "tokens": batch.tokens}  # fmt: skip


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
    params = [p for p in policy.parameters() if p.requires_grad]
    per_epoch = math.ceil(len(samples) / config.batch_size)
    total = config.max_steps or max(1, math.ceil(per_epoch * config.epochs))
    order: list[int] = []
    rng = random.Random(config.seed)
    result = TrainResult(0, len(samples), 0, 0.0, 0.0, **describe(policy), processes=group.world)
    curves = Curves()
    with PeakRss() as rss:  # the reference logprobs' pass included
        objective = FeedbackObjective(policy, samples, config, group)
        optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
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
            curves.add(loss=loss, **objective.last, tokens_per_s=step_tokens_per_s,
                       rss_gb=rss.take())  # fmt: skip
            if progress is not None:
                progress(step + 1, total, loss)
    policy.eval()
    result.peak_rss_gb, result.process_peak_rss_gb = rss.peak_gb, rss.process_peak_gb
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


def batches(n: int, batch_size: int, steps: int, rng: random.Random) -> list[list[int]]:
    """The first `steps` batches `draw` gives, drawn ahead (n samples)."""
    out, order = [], list[int]()
    for _ in range(steps):
        picked, order = draw(order, n, batch_size, rng)
        out.append(picked)
    return out
