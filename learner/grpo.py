"""Task RL: group-relative policy gradients on the agent's own rollouts, summaries included.

    samples, stats = trajectory_samples(groups)          # learner/trajectories.py
    result = train_trajectories(policy, samples, config) # the LoRA update; result.gap

The algorithm (Dr.GRPO, Liu et al. 2025; DeepSWE, Agentica 2025), per group of K rollouts of
one task in the product's own harness (learner/synth/rollout.py):

    A_i = r_i - mean_{j != i} r_j                  # leave-one-out baseline, no std division
    groups whose rewards are all equal: dropped    # A = 0 everywhere: cost, no signal
    advantages: positive -- rollouts with A_i < 0 dropped (optional; the default keeps both)
    a truncated rollout (a limit cut it off): in its group's baseline, masked from the loss
    every model call of rollout i -- agent steps and self-summaries alike -- is one sample
    with advantage A_i: a summary that kept what mattered is credited by the trajectory
    that solved the task after it (Composer 2's self-summaries, trained by the reward of
    the whole trajectory). A call made after a summary has the summary in its prompt, so
    the trajectory is split where the context was summarized without further work.

Per completion token t of a sample, with lp_old the trainer's logprobs under the adapter at
the start of the update (computed once, no grad) and lp_behaviour the ones the inference
engine logged when it sampled the token:

    rho = exp(lp_theta - lp_old)
    w   = min(is_cap, exp(lp_old - lp_behaviour))                  # detached (TIS)
    l_t = -w * min(rho * A, clip(rho, 1 - clip_low, 1 + clip_high) * A)
    L   = sum_t l_t / (samples in the batch x max_completion_length)   # Dr.GRPO's constant

Simplifications, and why: lp_old is the policy at the start of the cycle rather than the
exact adapter of each call (the rollouts of a cycle are sampled by the serving adapter,
which is where training starts); the clip's upper bound is higher than its lower one
(DAPO's clip-higher) so that rare good tokens can gain; no KL term, as in Dr.GRPO and
DeepSWE -- the gate's held-out solve rate and max_kl hold the policy instead. The gap
between lp_old and lp_behaviour (`Gap`: mean, max, share of tokens whose weight hit the
cap) is the first thing to read when an update goes wrong: a large gap means the trainer
and the inference engine disagree about what was sampled (precision, template, adapter).
Calls decoded under the action grammar are left out of both the weight (w = 1) and the gap:
their logged logprobs are the masked distribution's, so lp_old - lp_behaviour measures the
mask, not a drift (`off_policy_weight`; before, forced tokens weighed almost nothing:
docs/tasks.md).

No forward pass holds more than `train.micro_batch_tokens` padded tokens (learner/batching.py: a
long agent prompt is cut from the left, whatever `tasks.max_length`). It trains in one process,
on `train.device` (learner/device.py): the data-parallel path (learner/distributed.py) is the
feedback update's only; a task cycle's time goes to its rollouts, not to this update, and its
samples come from the database inside the worker.
Tested in tests/learner/test_grpo.py (the update) and tests/learner/test_taskcycle.py (in cycles).
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from peft import PeftModel

from learner.batching import align_rows, batch_of, micro_batches, note_budget
from learner.config import TaskTrainConfig, TrainConfig
from learner.device import model_device
from learner.figures import Curves, Gap, logprob_gap
from learner.kto import completion_logits, token_logprobs
from learner.memory import PeakRss, release
from learner.train import batches, completion_token_logprobs
from learner.trajectories import CallSample

log = logging.getLogger(__name__)


@dataclass
class TaskTrainResult:
    steps: int
    samples: int
    tokens: int
    seconds: float
    losses: list[float] = field(default_factory=list)
    gap: Gap = field(default_factory=Gap)  # calls decoded without the grammar
    gap_constrained: Gap = field(default_factory=Gap)  # under it: the mask, weight 1
    clip_share: float = 0.0  # tokens whose ratio was clipped, last step
    stopped_early: bool = False
    peak_rss_gb: float = 0.0  # highest resident set sampled during the update (GB)
    process_peak_rss_gb: float = 0.0  # the process's high-water mark, ru_maxrss (GB)
    curves: dict[str, list[float]] = field(default_factory=dict)  # loss, clip_share, rss_gb

    def metrics(self) -> dict[str, Any]:
        out = asdict(self)
        out["losses"] = [round(x, 6) for x in self.losses]
        return out


def pg_loss(
    policy: torch.Tensor,
    old: torch.Tensor,
    behaviour: torch.Tensor,
    advantage: torch.Tensor,
    mask: torch.Tensor,
    *,
    config: TaskTrainConfig,
    constant: float,
    constrained: torch.Tensor | None = None,
) -> tuple[torch.Tensor, float]:
    """The per-token loss of the module docstring summed over `mask`, over `constant`;
    returns (loss, share of masked tokens whose ratio was clipped). Rows `constrained` [B]
    (decoded under the action grammar) take weight 1: see `off_policy_weight`."""
    ratio = (policy - old).exp()
    weight = off_policy_weight(old, behaviour, config.is_cap, constrained)
    adv = advantage.unsqueeze(-1)
    clipped = ratio.clamp(1 - config.clip_low, 1 + config.clip_high)
    per_token = -weight * torch.minimum(ratio * adv, clipped * adv)
    loss = (per_token * mask).sum() / constant
    was_clipped = ((ratio - clipped).abs() > 1e-6).float()
    share = float((was_clipped * mask).sum() / mask.sum().clamp(min=1))
    return loss, share


def off_policy_weight(old: torch.Tensor, behaviour: torch.Tensor, cap: float,
                      constrained: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """w = min(cap, exp(lp_old - lp_behaviour)) per token, detached; 1 on the rows of calls
    decoded under the action grammar. Both backends log those calls' logprobs under the
    grammar's mask (renormalised over the allowed tokens), and the trainer scores without
    it, so lp_old - lp_behaviour there is log(the mass the grammar allowed), not a drift
    between trainer and engine: on a forced token it is far below 0 and the weight would
    throw the token's gradient away although the policy never changed. Scoring the trainer
    under the same mask would need the grammar replayed per call; leaving those rows out of
    the correction costs only the correction itself (for a precision or template drift the
    unconstrained calls, summaries among them, still show it in `gap`)."""
    weight = (old - behaviour).exp().clamp(max=cap).detach()
    if constrained is None:
        return weight
    return torch.where(constrained.unsqueeze(-1), torch.ones_like(weight), weight)


class TaskObjective:
    """The policy-gradient loss on trajectory samples, one batch at a time (the module
    docstring): lp_old is computed once, at construction (of the samples at `used` alone when
    given), with the logprob gap against the engine's. `backward(picked, scale)` accumulates the
    gradients of the samples at `picked`; returns the loss. train_trajectories steps on it
    alone; learner/mixed.py beside the feedback objective."""

    def __init__(self, policy: PeftModel, samples: Sequence[CallSample], train: TrainConfig,
                 config: TaskTrainConfig, used: Sequence[int] | None = None) -> None:  # fmt: skip
        self.samples, self.train, self.config = list(samples), train, config
        note_budget(train)
        used = range(len(self.samples)) if used is None else sorted(set(used))
        # lp_old covers the completion tokens the batch keeps (learner/batching.py).
        picks = [self.samples[i] for i in used]
        old = completion_token_logprobs(policy, picks, train, adapter=True)
        self.old: dict[int, list[float]] = dict(zip(used, old, strict=True))
        # The weight's gap over the calls it corrects; a masked call's gap measures the mask.
        self.gap, self.gap_constrained = (
            logprob_gap([o for o, s in zip(old, picks, strict=True) if s.constrained is masked],
                        [s.behaviour_logprobs for s in picks if s.constrained is masked],
                        config.is_cap)
            for masked in (False, True)
        )  # fmt: skip
        self.clip_share = 0.0  # of the last micro-batch
        self.tokens = 0

    def backward(self, policy: PeftModel, picked: Sequence[int], scale: float = 1.0) -> float:
        chunk = [self.samples[i] for i in picked]
        constant = float(len(chunk) * self.train.max_completion_length)
        loss = 0.0
        for positions in micro_batches(chunk, self.train):
            part = [chunk[k] for k in positions]
            batch = batch_of(part, self.train, device=model_device(policy))
            policy_lp = token_logprobs(completion_logits(policy, batch), batch)
            old_lp = align_rows([self.old[picked[k]] for k in positions], batch)
            advantage = torch.tensor([s.advantage for s in part], device=batch.weight.device)
            constrained = torch.tensor([s.constrained for s in part], device=advantage.device)
            part_loss, self.clip_share = pg_loss(
                policy_lp, old_lp, batch.behaviour, advantage, batch.completion_mask,
                config=self.config, constant=constant, constrained=constrained,
            )  # fmt: skip
            (part_loss * scale).backward()
            loss += float(part_loss.detach()) * scale
            self.tokens += batch.tokens
            del batch, policy_lp, old_lp, part_loss  # the pass's tensors: memory goes back
            release()
        return loss


def train_trajectories(
    policy: PeftModel,
    samples: Sequence[CallSample],
    train: TrainConfig,
    config: TaskTrainConfig,
) -> TaskTrainResult:
    """Optimize the LoRA weights of `policy` on trajectory samples (one pass per epoch)."""
    started = time.monotonic()
    samples = list(samples)
    result = TaskTrainResult(0, len(samples), 0, 0.0)
    if not samples:
        return result
    per_epoch = math.ceil(len(samples) / train.batch_size)
    total = config.max_steps or max(1, math.ceil(per_epoch * config.epochs))
    plan = batches(len(samples), train.batch_size, total, random.Random(train.seed))  # ahead
    params, curves = [p for p in policy.parameters() if p.requires_grad], Curves()
    with PeakRss() as rss:  # lp_old's pass included
        objective = TaskObjective(policy, samples, train, config, [i for p in plan for i in p])
        result.gap, result.gap_constrained = objective.gap, objective.gap_constrained
        optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=train.weight_decay)
        policy.train()
        for step, picked in enumerate(plan):
            if time.monotonic() - started > train.max_seconds:
                result.stopped_early = True
                break
            optimizer.zero_grad(set_to_none=True)
            loss = objective.backward(policy, picked)
            torch.nn.utils.clip_grad_norm_(params, train.grad_clip)
            optimizer.step()
            result.losses.append(loss)
            result.steps = step + 1
            curves.add(loss=loss, clip_share=objective.clip_share, rss_gb=rss.take())
    policy.eval()
    result.peak_rss_gb, result.process_peak_rss_gb = rss.peak_gb, rss.process_peak_gb
    result.clip_share, result.tokens = objective.clip_share, objective.tokens
    result.curves = curves.values
    result.seconds = time.monotonic() - started
    return result
