"""Train: the LoRA policy on the base model, and the feedback objective (KTO, learner/kto.py).

    model = load_base(model_dir)
    policy, parent_used = make_policy(model, config, parent_dir=serving_adapter_or_None)
    objective = FeedbackObjective(samples, config)    # an objective of learner/update.py
    result = train_policy(policy, samples, config, progress=print)  # the update, feedback alone
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
and the update's result (learner/update.py) carries its peak resident set (`peak_rss_gb`,
sampled; `process_peak_rss_gb`, the process's high-water mark; curve `rss_gb` per step).
Device and precision come from `TrainConfig.device` / `dtype` (learner/device.py: CUDA in
bfloat16 when present, else the CPU in float32; LoRA weights always float32); batches are
made on the model's device. With a `Group` of several processes (learner/distributed.py)
each rank runs its share of every batch's micro-batches and the gradients are summed.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM

from learner.batching import align_rows, batch_of, micro_batches, note_budget, unpad
from learner.config import TrainConfig
from learner.data import Sample
from learner.device import Group, model_device, resolve_device, resolve_dtype
from learner.figures import feedback_figures
from learner.kto import (
    class_weights,
    completion_logits,
    kto_loss,
    masked_mean,
    per_token_kl,
    token_logprobs,
)
from learner.memory import release
from learner.update import Part, Progress, UpdateResult, run_update


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
    """The KTO-style loss on people's feedback (learner/kto.py), an objective of the one
    update (learner/update.py): `prepare` fixes the reference logprobs when there is no KL
    penalty, `backward(policy, picked, scale)` accumulates the gradients of the samples at
    `picked` micro-batch by micro-batch (split over a Group's ranks)."""

    name = "feedback"
    distributed = True

    def __init__(self, samples: Sequence[Sample], config: TrainConfig,
                 group: Group | None = None):  # fmt: skip
        self.samples, self.config, self.group = list(samples), config, group or Group()
        note_budget(config)
        self.lambdas = class_weights(self.samples, config.desirable_weight,
                                     config.undesirable_weight)  # fmt: skip
        self.reference: dict[int, list[float]] | None = None
        self.last: dict[str, float | None] = {}  # the figures of the last backward()
        self.tokens = self.micro_batches = 0

    def __len__(self) -> int:
        return len(self.samples)

    def prepare(self, policy: PeftModel, used: Sequence[int]) -> None:
        # With a KL penalty the reference's full distributions are needed at every step (one
        # no-grad forward); without, its token logprobs never change: computed once, here.
        if not self.config.kl_coef:
            picks = [self.samples[i] for i in used]
            ref = completion_token_logprobs(policy, picks, self.config, group=self.group)
            self.reference = dict(zip(used, ref, strict=True))

    def figures(self) -> dict[str, float | None]:
        return self.last

    def summary(self) -> dict[str, Any]:
        return {}

    def backward(self, policy: PeftModel, picked: Sequence[int], scale: float = 1.0) -> float:
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
        self.tokens += tokens
        self.micro_batches += passes
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
) -> UpdateResult:
    """The one update (learner/update.py) on people's feedback alone: the LoRA weights of
    `policy` on `samples` (the training split). With a `group` of several ranks
    (learner/distributed.py), every rank calls this with the same samples and config and ends
    with the same weights."""
    objective = FeedbackObjective(samples, config, group)
    return run_update(policy, [Part(objective, 1.0, config.epochs)], config,
                      progress=progress, group=group)  # fmt: skip


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
