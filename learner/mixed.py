"""Mixed cycles (`kind: mixed`): people's feedback and the agent's task rollouts in one update.

    result = train_mixed(policy, feedback, trajectories, train, update, mix)
    metrics = train_mixed_step(ctx, run_id, config)     # the "train" step of a mixed cycle
    metrics = evaluate_mixed(ctx, run_id, config)       # its "evaluate" step: both gates

The chain is collect -> tasks -> rollouts -> train -> evaluate -> publish -> deploy. Every
optimizer step draws a batch of each (learner/train.py's FeedbackObjective, learner/grpo.py's
TaskObjective) and sums their losses weighted by `mix.feedback` and `mix.tasks` before one
AdamW step at `train.lr`: weights that act inside a step, where a scale matters (a loss
scaled on its own would be undone by Adam's normalisation). Steps: the longer of the two
schedules (`train.epochs` over the feedback, `tasks.update.epochs` over the trajectories;
`train.max_steps` caps). Either part may be empty (too little feedback: collect says why);
both empty skips the run. The gate: the feedback rules on held-out feedback, when there is
some, and the task solve rule on held-out tasks; either refuses.
One process on `train.device` (learner/device.py), like learner/grpo.py's update.
Tested in tests/learner/test_taskcycle.py.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from peft import PeftModel

from learner.config import LearnerConfig, MixConfig, TaskTrainConfig, TrainConfig
from learner.figures import Curves, Gap
from learner.grpo import TaskObjective
from learner.runs import Context, RunSkipped, save_candidate
from learner.train import FeedbackObjective, TrainResult, draw
from learner.trajectories import CallSample

Evaluation = Callable[[Context, int, LearnerConfig], dict[str, Any]]


@dataclass
class MixedResult:
    steps: int = 0
    feedback_samples: int = 0
    task_samples: int = 0
    tokens: int = 0
    seconds: float = 0.0
    feedback_losses: list[float] = field(default_factory=list)
    task_losses: list[float] = field(default_factory=list)
    gap: Gap = field(default_factory=Gap)  # calls decoded without the grammar (grpo.py)
    gap_constrained: Gap = field(default_factory=Gap)  # under it
    stopped_early: bool = False
    # Per step: each objective's loss and figures (learner/figures.py), the tasks' clip share.
    curves: dict[str, list[float]] = field(default_factory=dict)

    def metrics(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("feedback_losses", "task_losses"):
            out[key] = [round(x, 6) for x in out[key]]
        return out


def train_mixed(
    policy: PeftModel,
    feedback: Sequence[Any],
    trajectories: Sequence[CallSample],
    train: TrainConfig,
    update: TaskTrainConfig,
    mix: MixConfig,
) -> MixedResult:
    """Optimize the LoRA weights of `policy` on both objectives at once (module docstring)."""
    started = time.monotonic()
    result = MixedResult(feedback_samples=len(feedback), task_samples=len(trajectories))
    bookkeeping = TrainResult(0, len(feedback), 0, 0.0, 0.0)
    parts: list[tuple[str, Any, int, float, float]] = []  # name, objective, n, weight, epochs
    if feedback:
        parts.append(("feedback", FeedbackObjective(policy, feedback, train), len(feedback),
                      mix.feedback, train.epochs))  # fmt: skip
    if trajectories:
        tasks = TaskObjective(policy, trajectories, train, update)
        result.gap, result.gap_constrained = tasks.gap, tasks.gap_constrained
        parts.append(("tasks", tasks, len(trajectories), mix.tasks, update.epochs))
    if not parts:
        return result
    total = train.max_steps or max(
        max(1, math.ceil(math.ceil(n / train.batch_size) * epochs)) for _, _, n, _, epochs in parts
    )
    params = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=train.lr, weight_decay=train.weight_decay)
    rng = random.Random(train.seed)
    orders: dict[str, list[int]] = {name: [] for name, *_ in parts}
    curves = Curves()
    policy.train()
    for step in range(total):
        if time.monotonic() - started > train.max_seconds:
            result.stopped_early = True
            break
        optimizer.zero_grad(set_to_none=True)
        for name, objective, n, weight, _ in parts:
            picked, orders[name] = draw(orders[name], n, train.batch_size, rng)
            if name == "feedback":
                loss = objective.backward(policy, picked, weight, result=bookkeeping)
                result.feedback_losses.append(loss)
                curves.add(feedback_loss=loss, **objective.last)
            else:
                result.task_losses.append(objective.backward(policy, picked, weight))
                curves.add(task_loss=result.task_losses[-1], clip_share=objective.clip_share)
        torch.nn.utils.clip_grad_norm_(params, train.grad_clip)
        optimizer.step()
        result.steps = step + 1
    policy.eval()
    result.curves = curves.values
    result.tokens = bookkeeping.tokens + sum(o.tokens for name, o, *_ in parts if name == "tasks")
    result.seconds = time.monotonic() - started
    return result


def train_mixed_step(ctx: Context, run_id: int, config: LearnerConfig) -> dict[str, Any]:
    from learner.data import read_snapshot
    from learner.device import describe
    from learner.taskcycle import run_trajectories, serving
    from learner.train import load_base, make_policy

    feedback = [s for s in read_snapshot(ctx.run_dir(run_id) / "dataset.json") if not s.heldout]
    trajectories, stats = run_trajectories(ctx, run_id, config)
    if not feedback and not trajectories:
        raise RunSkipped(
            f"nothing to learn from: no feedback samples, and {stats.dropped_equal} of "
            f"{stats.groups} task groups had equal rewards"
        )
    version, adapter = serving(ctx)
    train = config.train.model_copy(update={"max_length": config.tasks.max_length})
    base = load_base(ctx.settings.model_name, device=train.device, dtype=train.dtype)
    policy, used = make_policy(base, train, parent_dir=adapter[1] if adapter else None)
    result = train_mixed(policy, feedback, trajectories, train, config.tasks.update, config.mix)
    save_candidate(ctx, run_id, policy)
    return {**result.metrics(), **describe(policy), "groups": asdict(stats),
            "parent_version": version if used else None}  # fmt: skip


def evaluate_mixed(
    ctx: Context, run_id: int, config: LearnerConfig, feedback_evaluation: Evaluation
) -> dict[str, Any]:
    """Both gates: `feedback_evaluation` (pipeline's, when held-out feedback exists) and
    held-out tasks."""
    from learner.data import read_snapshot
    from learner.heldout import evaluate_heldout

    heldout = [s for s in read_snapshot(ctx.run_dir(run_id) / "dataset.json") if s.heldout]
    feedback = feedback_evaluation(ctx, run_id, config) if heldout else {}
    tasks = evaluate_heldout(ctx, run_id, config)
    reasons = [*feedback.get("reasons", []), *tasks["reasons"]]
    verdicts = {feedback.get("decision"), tasks.get("decision", "refuse" if reasons else "deploy")}
    decision = next((v for v in ("refuse", "defer") if v in verdicts), "deploy")
    return {**feedback, "tasks": tasks, "decision": decision, "accepted": decision == "deploy",
            "reasons": reasons}  # fmt: skip
