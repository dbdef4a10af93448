"""Task RL: group-relative policy gradients on the agent's own rollouts, summaries included.

    samples, stats = trajectory_samples(groups)          # learner/trajectories.py
    objective = TaskObjective(samples, train, update)   # an objective of learner/update.py
    result = train_trajectories(policy, samples, train, update)  # the update, tasks alone

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

No forward pass holds more than `train.micro_batch_tokens` padded tokens (learner/batching.py:
a long agent prompt is cut from the left, whatever `tasks.max_length`). The step itself --
schedule, one AdamW at `train.lr`, clipping, the time budget -- is learner/update.py's, for
every objective. It trains in one process, on `train.device` (learner/device.py): the
data-parallel path (learner/distributed.py) is the feedback objective's only; a task cycle's
time goes to its rollouts, not to this update, and its samples come from the database inside
the worker.
Tested in tests/learner/test_grpo.py (the update) and tests/learner/test_taskcycle.py (in cycles).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch
from peft import PeftModel

from learner.batching import align_rows, batch_of, micro_batches, note_budget
from learner.config import TaskTrainConfig, TrainConfig
from learner.device import model_device
from learner.figures import Gap, logprob_gap
from learner.kto import completion_logits, token_logprobs
from learner.memory import release
from learner.train import completion_token_logprobs
from learner.trajectories import CallSample
from learner.update import Part, UpdateResult, run_update

log = logging.getLogger(__name__)


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
    """The policy-gradient loss on trajectory samples, an objective of the one update
    (learner/update.py; the module docstring gives the loss): `prepare` computes lp_old of
    the samples the plan uses, and the logprob gap against the engine's;
    `backward(policy, picked, scale)` accumulates the gradients of the samples at `picked`.
    One process: a batch is not split over ranks."""

    distributed = False

    def __init__(self, samples: Sequence[CallSample], train: TrainConfig,
                 config: TaskTrainConfig, name: str = "tasks") -> None:  # fmt: skip
        self.samples, self.train, self.config, self.name = list(samples), train, config, name
        note_budget(train)
        self.old: dict[int, list[float]] = {}
        self.gap, self.gap_constrained = Gap(), Gap()
        self.clip_share = 0.0  # of the last micro-batch
        self.tokens = self.micro_batches = 0

    def __len__(self) -> int:
        return len(self.samples)

    def prepare(self, policy: PeftModel, used: Sequence[int]) -> None:
        # lp_old covers the completion tokens the batch keeps (learner/batching.py).
        picks = [self.samples[i] for i in used]
        old = completion_token_logprobs(policy, picks, self.train, adapter=True)
        self.old = dict(zip(used, old, strict=True))
        # The weight's gap over the calls it corrects; a masked call's gap measures the mask.
        self.gap, self.gap_constrained = (
            logprob_gap([o for o, s in zip(old, picks, strict=True) if s.constrained is masked],
                        [s.behaviour_logprobs for s in picks if s.constrained is masked],
                        self.config.is_cap)
            for masked in (False, True)
        )  # fmt: skip

    def figures(self) -> dict[str, float | None]:
        return {"clip_share": self.clip_share}

    def summary(self) -> dict[str, Any]:
        return {"gap": self.gap, "gap_constrained": self.gap_constrained,
                "clip_share": self.clip_share}  # fmt: skip

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
            self.micro_batches += 1
            del batch, policy_lp, old_lp, part_loss  # the pass's tensors: memory goes back
            release()
        return loss


def train_trajectories(
    policy: PeftModel, samples: Sequence[CallSample], train: TrainConfig, config: TaskTrainConfig
) -> UpdateResult:
    """The one update (learner/update.py) on trajectory samples alone: `config.epochs` passes,
    at `train.lr`, `train.max_steps` capping."""
    return run_update(policy, [Part(TaskObjective(samples, train, config), 1.0, config.epochs)],
                      train)  # fmt: skip
