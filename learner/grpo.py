"""Task RL: group-relative policy gradients on the agent's own rollouts, summaries included.

    rollouts = load_rollouts(db, run_id=run_id)          # or Rollout.of(result) in memory
    groups = group_rollouts(rollouts)                    # K rollouts of one task per group
    samples, stats = trajectory_samples(groups)          # one sample per model call
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
and the inference engine disagree about what was sampled (precision, template, adapter) --
or, for grammar-constrained actions on vLLM, that the engine logged the masked
distribution's logprobs (measured: docs/tasks.md), so forced tokens weigh almost nothing.

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
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from peft import PeftModel
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload, sessionmaker

from feedback.db import transaction
from feedback.models import TaskRollout
from learner.batching import align_rows, batch_of, compact, micro_batches, note_budget
from learner.config import TaskTrainConfig, TrainConfig
from learner.device import model_device
from learner.figures import Curves, Gap, logprob_gap
from learner.kto import completion_logits, token_logprobs
from learner.memory import PeakRss, release
from learner.train import batches, completion_token_logprobs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Call:
    """One model call of a rollout, as stored in rollout_calls."""

    seq: int
    kind: str  # "agent" | "summary"
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]  # behaviour logprobs, one per completion id


@dataclass(frozen=True)
class Rollout:
    """What the update needs of a task_rollouts row."""

    rollout_id: str
    instance_id: str
    reward: float
    truncated: bool
    calls: tuple[Call, ...]

    @classmethod
    def of(cls, result: Any, rollout_id: str | None = None) -> Rollout:
        """From a learner.synth.rollout.RolloutResult (its recorded model calls, in order)."""
        calls = []
        for seq, recorded in enumerate(result.calls, start=1):
            c = recorded.completion
            ids, logprobs = list(c.prompt_token_ids or []), list(c.logprobs)
            calls.append(Call(seq, recorded.kind, ids, list(c.token_ids), logprobs))
        return cls(rollout_id or result.rollout_id or f"{result.instance_id}#{id(result)}",
                   result.instance_id, result.reward, result.truncated, tuple(calls))  # fmt: skip


def load_rollouts(
    db: sessionmaker[Session], *, run_id: int | None = None, ids: Sequence[str] | None = None
) -> list[Rollout]:
    """Stored rollouts (task_rollouts and their rollout_calls), of one run or by id, oldest
    first, as the update reads them. A call stored without its prompt ids cannot be replayed
    and makes its whole rollout unusable: such rollouts are left out."""
    with transaction(db) as s:
        query = select(TaskRollout).options(selectinload(TaskRollout.calls))
        if run_id is not None:
            query = query.where(TaskRollout.run_id == run_id)
        if ids is not None:
            query = query.where(TaskRollout.id.in_(list(ids)))
        rows = s.scalars(query.order_by(TaskRollout.created_at, TaskRollout.id)).all()
        rollouts, unusable = [], []
        for row in rows:
            if any(c.prompt_token_ids is None for c in row.calls):
                unusable.append(row.id)
                continue
            calls = tuple(Call(c.seq, c.kind, list(c.prompt_token_ids),
                               list(c.completion_token_ids), list(c.logprobs))
                          for c in row.calls)  # fmt: skip
            rollouts.append(Rollout(row.id, row.instance_id, row.reward, row.truncated, calls))
    if unusable:
        log.warning("%d stored rollouts left out: a call without its prompt ids (%s)",
                    len(unusable), ", ".join(unusable[:5]))  # fmt: skip
    return rollouts


@dataclass(frozen=True)
class CallSample:
    """One model call to train on, with its trajectory's advantage. `desirable` and `weight`
    are what learner.kto.make_batch lays out: here the weight is the (signed) advantage.
    Token ids as trajectory_samples makes them are 4-byte arrays (learner/batching.py)."""

    rollout_id: str
    seq: int
    kind: str
    prompt_ids: Sequence[int]
    completion_ids: Sequence[int]
    behaviour_logprobs: list[float]
    advantage: float

    @property
    def desirable(self) -> bool:
        return self.advantage > 0

    @property
    def weight(self) -> float:
        return self.advantage


@dataclass
class GroupStats:
    groups: int = 0
    dropped_equal: int = 0  # groups whose rewards were all equal
    dropped_negative: int = 0  # rollouts below their group's baseline, with positive_only
    rollouts: int = 0
    truncated_masked: int = 0
    samples: int = 0
    summary_samples: int = 0
    reward_mean: float = 0.0
    reward_std: float = 0.0


def leave_one_out(rewards: Sequence[float]) -> list[float]:
    """A_i = r_i - mean of the other rewards of the group (0 for a group of one)."""
    n, total = len(rewards), sum(rewards)
    if n < 2:
        return [0.0] * n
    return [r - (total - r) / (n - 1) for r in rewards]


def group_rollouts(rollouts: Iterable[Rollout]) -> list[list[Rollout]]:
    """Rollouts grouped by task, in first-seen order."""
    groups: dict[str, list[Rollout]] = {}
    for rollout in rollouts:
        groups.setdefault(rollout.instance_id, []).append(rollout)
    return list(groups.values())


def trajectory_samples(
    groups: Sequence[Sequence[Rollout]], *, positive_only: bool = False
) -> tuple[list[CallSample], GroupStats]:
    """One sample per model call of every kept rollout, with its leave-one-out advantage;
    with `positive_only`, of the rollouts whose advantage is above 0 alone (the negative
    ones still set their group's baseline)."""
    samples: list[CallSample] = []
    stats = GroupStats(groups=len(groups))
    rewards = [r.reward for group in groups for r in group]
    stats.rollouts = len(rewards)
    if rewards:
        mean = sum(rewards) / len(rewards)
        stats.reward_mean = mean
        stats.reward_std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    for group in groups:
        if len({r.reward for r in group}) <= 1:
            stats.dropped_equal += 1
            continue
        for rollout, advantage in zip(group, leave_one_out([r.reward for r in group]), strict=True):
            if rollout.truncated:
                stats.truncated_masked += 1
                continue
            if advantage == 0:
                continue
            if positive_only and advantage < 0:
                stats.dropped_negative += 1
                continue
            for call in rollout.calls:
                if not call.completion_ids or len(call.logprobs) != len(call.completion_ids):
                    continue  # nothing sampled, or no behaviour logprobs to weigh it by
                samples.append(CallSample(rollout.rollout_id, call.seq, call.kind,
                                          compact(call.prompt_ids), compact(call.completion_ids),
                                          call.logprobs, advantage))  # fmt: skip
    stats.samples = len(samples)
    stats.summary_samples = sum(s.kind == "summary" for s in samples)
    return samples, stats


@dataclass
class TaskTrainResult:
    steps: int
    samples: int
    tokens: int
    seconds: float
    losses: list[float] = field(default_factory=list)
    gap: Gap = field(default_factory=Gap)
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
) -> tuple[torch.Tensor, float]:
    """The per-token loss of the module docstring summed over `mask`, over `constant`;
    returns (loss, share of masked tokens whose ratio was clipped)."""
    ratio = (policy - old).exp()
    weight = (old - behaviour).exp().clamp(max=config.is_cap).detach()
    adv = advantage.unsqueeze(-1)
    clipped = ratio.clamp(1 - config.clip_low, 1 + config.clip_high)
    per_token = -weight * torch.minimum(ratio * adv, clipped * adv)
    loss = (per_token * mask).sum() / constant
    was_clipped = ((ratio - clipped).abs() > 1e-6).float()
    share = float((was_clipped * mask).sum() / mask.sum().clamp(min=1))
    return loss, share


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
        self.gap = logprob_gap(old, [s.behaviour_logprobs for s in picks], config.is_cap)
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
            part_loss, self.clip_share = pg_loss(
                policy_lp, old_lp, batch.behaviour, advantage, batch.completion_mask,
                config=self.config, constant=constant,
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
        result.gap = objective.gap
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
