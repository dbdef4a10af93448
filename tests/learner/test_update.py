"""The one update (learner/update.py) runs every cycle's step: one optimizer for all of it,
the parts' weights acting inside a step, the schedule of the longest part, the time budget.
Real update steps on the dev model; the directions of each objective are
tests/learner/test_directions.py's."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from learner.config import LearnerConfig, TaskTrainConfig, TrainConfig
from learner.grpo import TaskObjective
from learner.runs import run_config
from learner.train import FeedbackObjective, make_policy
from learner.trajectories import CallSample
from learner.update import Part, plan, run_update, schedule
from tests.learner.synthetic_feedback import base_logprobs, make_samples

REPO = Path(__file__).resolve().parents[2]
FULL = TrainConfig(batch_size=8, max_steps=2, lr=1e-2, kl_coef=0.0)  # every batch: all 8


@pytest.fixture(scope="module")
def feedback(dev_tokenizer: Any, base_model: torch.nn.Module) -> list[Any]:
    return make_samples(dev_tokenizer, base_model, 8, seed=6, heldout_every=10**6)


def calls(samples: list[Any]) -> list[CallSample]:
    return [CallSample(rollout_id=f"r{i}", seq=1, kind="agent", prompt_ids=s.prompt_ids,
                       completion_ids=s.completion_ids, behaviour_logprobs=s.behaviour_logprobs,
                       advantage=-1.0 if s.desirable else 1.0)  # against the feedback
            for i, s in enumerate(samples)]  # fmt: skip


def lora_after(base_model: torch.nn.Module, parts_of: Any, train: TrainConfig,
               samples: list[Any] | None = None) -> Any:  # fmt: skip
    """(the update's result, its LoRA weights[, each sample's mean logprob after it])."""
    policy, _ = make_policy(copy.deepcopy(base_model), train)
    result = run_update(policy, parts_of(train), train)
    weights = {n: p.detach().clone() for n, p in policy.named_parameters() if "lora_" in n}
    if samples is None:
        return result, weights
    policy.eval()
    return result, weights, [sum(lp) / len(lp) for lp in base_logprobs(policy, samples)]


def margin(samples: list[Any], means: list[float]) -> float:
    """Mean logprob of the accepted samples less the rejected ones'."""
    good = [m for s, m in zip(samples, means, strict=True) if s.desirable]
    bad = [m for s, m in zip(samples, means, strict=True) if not s.desirable]
    return sum(good) / len(good) - sum(bad) / len(bad)


def test_one_optimizer_and_the_weights_act_inside_the_step(
    base_model: torch.nn.Module, feedback: list[Any]
) -> None:
    tasks = calls(feedback)

    def alone(train: TrainConfig) -> list[Part]:
        return [Part(FeedbackObjective(feedback, train), 1.0)]

    def beside(weight: float) -> Any:
        def parts(train: TrainConfig) -> list[Part]:
            update = TaskTrainConfig()
            return [Part(FeedbackObjective(feedback, train), 1.0),
                    Part(TaskObjective(tasks, train, update), weight)]  # fmt: skip

        return parts

    one, lone, lone_means = lora_after(base_model, alone, FULL, feedback)
    zero, silent = lora_after(base_model, beside(0.0), FULL)
    both, pulled, pulled_means = lora_after(base_model, beside(1.0), FULL, feedback)
    # A part weighing 0 changes nothing: the same steps, the same weights.
    assert one.steps == zero.steps == both.steps == 2
    # (The batches are the same 8 samples in another order: float sums differ in the last
    # digits, which Adam's normalisation carries to ~1e-4 of a weight.)
    noise = max(float((silent[n] - lone[n]).abs().max()) for n in lone)
    # Weighing 1, the task part (pushing against the feedback) moves every step elsewhere.
    pulled_by = max(float((pulled[n] - lone[n]).abs().max()) for n in lone)
    assert noise < 1e-3 < pulled_by and pulled_by > 20 * noise, (noise, pulled_by)
    # ... in the direction it pulls: the accepted completions' lead over the rejected ones is
    # smaller than the feedback part alone made it (measured 0.704 against 0.717 in 2 steps;
    # reordering alone moves it ~1e-5).
    assert margin(feedback, pulled_means) < margin(feedback, lone_means) - 0.005
    assert len(both.objectives["tasks"]["losses"]) == 2 and "tasks_loss" in both.curves
    assert both.losses[0] == pytest.approx(sum(p["losses"][0] for p in both.objectives.values()))
    assert zero.tokens == both.tokens > one.tokens  # a weight-0 part still runs its passes


def test_the_schedule_is_the_longest_part_and_the_plan_is_drawn_ahead() -> None:
    class Sized:  # the schedule needs an objective's size alone
        def __init__(self, n: int) -> None:
            self.n = n

        def __len__(self) -> int:
            return self.n

    parts = [Part(Sized(8), 1.0, epochs=1.0), Part(Sized(6), 1.0, epochs=2.0)]  # type: ignore[arg-type]
    train = TrainConfig(batch_size=4)
    assert schedule(parts, train) == 4  # the second: 2 batches an epoch, 2 epochs
    assert schedule(parts, train.model_copy(update={"max_steps": 1})) == 1
    steps = plan(parts, train)
    assert len(steps) == 4 and all(len(a) == len(b) == 4 for a, b in steps)
    assert sorted(i for a, _ in steps[:2] for i in a) == list(range(8))  # an epoch: each once
    assert steps == plan(parts, train)  # the seed decides


def test_the_time_budget_stops_the_update(base_model: torch.nn.Module, feedback: list[Any]) -> None:
    train = FULL.model_copy(update={"max_steps": 50, "max_seconds": 1e-9})
    result, _ = lora_after(base_model, lambda t: [Part(FeedbackObjective(feedback, t))], train)
    assert result.stopped_early and result.steps == 0 and result.losses == []


def test_one_loop_runs_every_update() -> None:
    """The house: one AdamW construction in learner/, no mixed-cycle module, and a pipeline
    that does not branch on the kind of cycle (the cycle is data: LearnerConfig.cycle)."""
    sources = {p: p.read_text() for p in (REPO / "learner").rglob("*.py")}
    built = [p.name for p, text in sources.items() if "AdamW(" in text]
    assert built == ["update.py"], built
    assert not (REPO / "learner" / "mixed.py").exists()
    pipeline = (REPO / "learner" / "pipeline.py").read_text()
    assert "config.kind" not in pipeline and ".kind ==" not in pipeline


def test_one_learning_rate_and_runs_recorded_before_still_read() -> None:
    """tasks.update.lr and .max_steps are gone (every objective steps at train.lr, for
    train.max_steps): naming one is an error that says so; a run recorded before, whose
    stored config has them, still reads."""
    with pytest.raises(ValueError, match=r"tasks.update.lr is gone.*set train.lr instead"):
        LearnerConfig().with_overrides({"tasks": {"update": {"lr": 1e-3}}})
    old = LearnerConfig().model_dump(mode="json")
    old["tasks"]["update"] |= {"lr": 0.002, "max_steps": None}
    config = run_config(SimpleNamespace(config=old))  # type: ignore[arg-type]
    assert config.tasks.update.epochs == 1.0 and config.train.lr == LearnerConfig().train.lr
