"""The update: every cycle's LoRA step runs here, whatever objectives the cycle names.

    parts = [Part(FeedbackObjective(samples, train), weight=1.0, epochs=train.epochs),
             Part(TaskObjective(calls, train, update), weight=1.0, epochs=update.epochs)]
    result = run_update(policy, parts, train, progress=print)   # UpdateResult

An objective (the `Objective` protocol: learner/train.py's `FeedbackObjective`, learner/grpo.py's
`TaskObjective`) supplies its batches and its loss and nothing else: `prepare(policy, used)`
computes what must be fixed before the first step (the reference or the old policy's logprobs
of the samples the plan uses), `backward(policy, picked, scale)` accumulates the gradients of
its samples at `picked`, micro-batch by micro-batch under the token budget
(learner/batching.py), and returns the loss. This loop owns the rest, once for all of them:
- the schedule: `train.max_steps`, else the longest of the parts' (epochs x batches per epoch),
  planned ahead: each step draws a batch of each part (`draw`: shuffled epochs, `train.seed`);
- one AdamW at `train.lr` over the LoRA weights, gradients summed over the parts weighted by
  `Part.weight` (weights act inside a step, where a scale matters: a loss scaled on its own
  would be undone by Adam's normalisation), clipped to `train.grad_clip`;
- the time budget `train.max_seconds`, ranks (a `Group` of several processes sums the
  gradients: learner/distributed.py; objectives that do not split their batches over ranks
  refuse one), and per-step figures: the loss, each part's loss when there are several, each
  objective's own figures, tokens/s and the peak resident set (learner/memory.py).
Tested in tests/learner/test_update.py (one optimizer, weights, schedule) and through every
objective's tests.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import torch
from peft import PeftModel

from learner.config import TrainConfig
from learner.device import Group, describe
from learner.figures import Curves
from learner.memory import PeakRss

Progress = Callable[[int, int, float], None]  # (step, total steps, loss)


class Objective(Protocol):
    """What the update needs of an objective: its samples and its loss."""

    name: str  # "feedback", "tasks": names its figures and its part of the metrics
    distributed: bool  # splits each batch over a Group's ranks itself
    tokens: int  # tokens through the policy so far
    micro_batches: int  # forward/backward passes so far

    def __len__(self) -> int: ...

    def prepare(self, policy: PeftModel, used: Sequence[int]) -> None:
        """Before the first step: what stays fixed through the update, for samples `used`."""
        ...

    def backward(self, policy: PeftModel, picked: Sequence[int], scale: float) -> float:
        """Accumulate the gradients of the samples at `picked`, loss x `scale`; the loss."""
        ...

    def figures(self) -> dict[str, float | None]:
        """The last backward's figures (a point of each per-step curve)."""
        ...

    def summary(self) -> dict[str, Any]:
        """Figures of the whole update (e.g. the logprob gap), for the metrics."""
        ...


@dataclass
class Part:
    objective: Objective
    weight: float = 1.0  # of its loss in each step's sum
    epochs: float = 1.0  # passes over its samples the schedule asks for


@dataclass
class UpdateResult:
    steps: int = 0
    samples: int = 0  # of every part
    tokens: int = 0  # prompt + completion tokens through the policy, all steps
    seconds: float = 0.0
    tokens_per_s: float = 0.0
    losses: list[float] = field(default_factory=list)  # each step's weighted sum
    final_loss: float = float("nan")
    stopped_early: bool = False  # the max_seconds budget ran out
    micro_batches: int = 0  # forward/backward passes: more than steps when batches were split
    parent_used: bool = False
    device: str = ""  # where the base ran, e.g. "cpu", "cuda:0"
    dtype: str = ""  # its compute dtype, e.g. "float32", "bfloat16"
    processes: int = 1  # data-parallel ranks that shared each batch
    peak_rss_gb: float = 0.0  # highest resident set sampled during the update (GB)
    process_peak_rss_gb: float = 0.0  # the process's high-water mark, ru_maxrss (GB)
    # Per part: samples, weight, epochs, its losses, and its objective's summary.
    objectives: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Per step (learner/figures.py): loss, each objective's figures, tokens/s, rss_gb.
    curves: dict[str, list[float]] = field(default_factory=dict)

    def metrics(self) -> dict[str, Any]:
        """The train step's metrics: these fields, and each objective's summary at the top
        (a task update's `gap`, `gap_constrained`, `clip_share`)."""
        out = asdict(self)
        out["losses"] = [round(x, 6) for x in self.losses]
        for part in out["objectives"].values():
            part["losses"] = [round(x, 6) for x in part["losses"]]
            out.update({k: v for k, v in part.items()
                        if k not in ("samples", "weight", "epochs", "losses")})  # fmt: skip
        return out


def schedule(parts: Sequence[Part], train: TrainConfig) -> int:
    """Optimizer steps: `train.max_steps`, else the longest part's epochs of batches."""
    if train.max_steps:
        return train.max_steps
    return max(max(1, math.ceil(math.ceil(len(p.objective) / train.batch_size) * p.epochs))
               for p in parts)  # fmt: skip


def run_update(
    policy: PeftModel,
    parts: Sequence[Part],
    train: TrainConfig,
    *,
    progress: Progress | None = None,
    group: Group | None = None,
) -> UpdateResult:
    """Optimize the LoRA weights of `policy` on the parts' objectives (module docstring). With
    a `group` of several ranks each calls this with the same samples and config and ends with
    the same weights. Parts without samples are left out; none at all: no step."""
    started = time.monotonic()
    group = group or Group()
    parts = [p for p in parts if len(p.objective)]
    result = UpdateResult(samples=sum(len(p.objective) for p in parts), **describe(policy),
                          processes=group.world)  # fmt: skip
    if group.world > 1 and not all(p.objective.distributed for p in parts):
        raise ValueError("only objectives that split their batches over ranks run on several "
                         "processes (train.processes > 1): the feedback objective")  # fmt: skip
    for p in parts:
        result.objectives[p.objective.name] = {"samples": len(p.objective), "weight": p.weight,
                                               "epochs": p.epochs, "losses": []}  # fmt: skip
    if train.threads is not None:
        torch.set_num_threads(train.threads)
    with PeakRss() as rss:  # whatever the objectives computed before the first step included
        if parts:
            _steps(policy, parts, train, result, rss, progress, group, started)
    result.peak_rss_gb, result.process_peak_rss_gb = rss.peak_gb, rss.process_peak_gb
    for p in parts:
        result.objectives[p.objective.name].update(p.objective.summary())
    result.tokens = sum(p.objective.tokens for p in parts)
    result.micro_batches = sum(p.objective.micro_batches for p in parts)
    result.seconds = time.monotonic() - started
    result.tokens_per_s = result.tokens / result.seconds if result.seconds > 0 else 0.0
    result.final_loss = result.losses[-1] if result.losses else float("nan")
    return result


def draw(
    order: list[int], n: int, batch_size: int, rng: random.Random
) -> tuple[list[int], list[int]]:
    """(the next batch of sample indices, what is left): epochs of shuffled indices."""
    if len(order) < batch_size:
        fresh = list(range(n))
        rng.shuffle(fresh)
        order = order + fresh
    return order[:batch_size], order[batch_size:]


def plan(parts: Sequence[Part], train: TrainConfig) -> list[list[list[int]]]:
    """Every step's batch of each part (step -> part -> sample indices), drawn ahead."""
    rng, orders, steps = random.Random(train.seed), [list[int]() for _ in parts], []
    for _ in range(schedule(parts, train)):
        step = []
        for k, part in enumerate(parts):
            picked, orders[k] = draw(orders[k], len(part.objective), train.batch_size, rng)
            step.append(picked)
        steps.append(step)
    return steps


def _steps(
    policy: PeftModel, parts: list[Part], train: TrainConfig, result: UpdateResult,
    rss: PeakRss, progress: Progress | None, group: Group, started: float,
) -> None:  # fmt: skip
    steps = plan(parts, train)
    for k, part in enumerate(parts):
        part.objective.prepare(policy, sorted({i for step in steps for i in step[k]}))
    params = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=train.lr, weight_decay=train.weight_decay)
    curves, several = Curves(), len(parts) > 1
    policy.train()
    try:
        for number, batches in enumerate(steps, start=1):
            if group.any(time.monotonic() - started > train.max_seconds):
                result.stopped_early = True
                break
            optimizer.zero_grad(set_to_none=True)
            step_started = time.monotonic()
            tokens_before = sum(p.objective.tokens for p in parts)
            loss, point = 0.0, dict[str, float | None]()
            for part, picked in zip(parts, batches, strict=True):
                part_loss = part.objective.backward(policy, picked, part.weight)
                result.objectives[part.objective.name]["losses"].append(part_loss)
                loss += part_loss
                point.update(part.objective.figures())
                if several:
                    point[f"{part.objective.name}_loss"] = part_loss
            group.sum_grads(params)  # every rank: the whole batch's gradient
            torch.nn.utils.clip_grad_norm_(params, train.grad_clip)
            optimizer.step()
            result.losses.append(loss)
            result.steps = number
            took = time.monotonic() - step_started
            tokens = sum(p.objective.tokens for p in parts) - tokens_before
            curves.add(loss=loss, **point, tokens_per_s=tokens / took if took > 0 else None,
                       rss_gb=rss.take())  # fmt: skip
            if progress is not None:
                progress(number, len(steps), loss)
    finally:
        policy.eval()
        result.curves = curves.values
