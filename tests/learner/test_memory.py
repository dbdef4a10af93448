"""Memory has a bound (learner/batching.py, learner/memory.py): no forward pass gets more than
`micro_batch_tokens` padded tokens -- a sample longer than the budget is cut (prompt from the
left, a completion longer than the budget capped) on the feedback path and the trajectory
path, whatever max_length says -- gradient checkpointing trains the same, and the updates
report their peak resident set. The shapes checked are the ones fed to the model (a forward
pre-hook on the base model records every input_ids shape).

Run: .venv/bin/python -m pytest tests/learner/test_memory.py -q
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch

from learner.batching import batch_of, micro_batches, row_length
from learner.config import TaskTrainConfig, TrainConfig
from learner.data import Sample
from learner.grpo import TaskObjective, train_trajectories
from learner.memory import PeakRss, release
from learner.train import make_policy, train_policy
from learner.trajectories import CallSample
from tests.learner.synthetic_feedback import make_samples

BUDGET = 64


@pytest.fixture(scope="module")
def feedback(dev_tokenizer: Any, base_model: torch.nn.Module) -> list[Sample]:
    """Eight samples; the first two far longer than BUDGET: a 10x prompt, and a completion
    alone longer than the budget."""
    samples = make_samples(dev_tokenizer, base_model, 8, seed=5)
    long_prompt = Sample(**{**samples[0].__dict__, "prompt_ids": samples[0].prompt_ids * 10})
    s = samples[1]
    long_completion = Sample(**{**s.__dict__, "completion_ids": s.completion_ids * 40,
                                "behaviour_logprobs": s.behaviour_logprobs * 40})  # fmt: skip
    assert len(long_prompt.prompt_ids) > 4 * BUDGET and len(long_completion.completion_ids) > BUDGET
    return [long_prompt, long_completion, *samples[2:]]


@contextmanager
def shapes_fed(policy: Any) -> Iterator[list[tuple[int, int]]]:
    """Every input_ids shape the base model is called with inside the block."""
    seen: list[tuple[int, int]] = []

    def record(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        seen.append(tuple(ids.shape))

    handle = policy.get_base_model().register_forward_pre_hook(record, with_kwargs=True)
    try:
        yield seen
    finally:
        handle.remove()


def test_one_rule_cuts_every_row_to_the_budget() -> None:
    """micro_batches measures rows as batch_of cuts them, and no run is over the budget."""
    rng = random.Random(0)
    samples = [Sample(f"s{i}", i % 2 == 0, 1.0, [7] * rng.randint(1, 300),
                      [9] * rng.randint(1, 200), [], 0, "accepted", False)
               for i in range(40)]  # fmt: skip
    for config in (TrainConfig(micro_batch_tokens=BUDGET),
                   TrainConfig(micro_batch_tokens=BUDGET, max_completion_length=16),
                   TrainConfig(micro_batch_tokens=256, max_length=100)):  # fmt: skip
        for run in micro_batches(samples, config):
            batch = batch_of([samples[k] for k in run], config)
            rows = batch.attention_mask.sum(-1).tolist()
            assert rows == [row_length(samples[k], config) for k in run]
            assert batch.input_ids.numel() <= config.micro_batch_tokens
            assert max(rows) <= min(config.max_length, config.micro_batch_tokens)
            completions = batch.completion_mask.sum(-1)
            assert bool((completions >= 1).all())
            assert bool((batch.attention_mask.sum(-1) > completions).all())  # a prompt token


@pytest.mark.parametrize("kl_coef", [0.5, 0.0])  # reference per pass / once, up front
def test_no_feedback_pass_is_over_the_budget(
    base_model: torch.nn.Module, feedback: list[Sample], kl_coef: float
) -> None:
    config = TrainConfig(micro_batch_tokens=BUDGET, max_length=4096, kl_coef=kl_coef,
                         max_steps=1, batch_size=8)  # fmt: skip
    policy, _ = make_policy(copy.deepcopy(base_model), config)
    with shapes_fed(policy) as seen:
        result = train_policy(policy, feedback, config)
    assert result.steps == 1 and result.micro_batches >= 2
    assert seen and all(b * t <= BUDGET for b, t in seen), seen
    assert (1, BUDGET) in seen  # the long samples were cut to the budget, not left out
    metrics = result.metrics()
    assert 0 < metrics["peak_rss_gb"] <= metrics["process_peak_rss_gb"] + 0.01
    assert metrics["curves"]["rss_gb"] and metrics["curves"]["rss_gb"][0] > 0


def test_no_trajectory_pass_is_over_the_budget(
    base_model: torch.nn.Module, feedback: list[Sample]
) -> None:
    """A task cycle's max_length (4096, set with model_copy: no validation) over the
    budget: agent prompts are still cut to it, lp_old's pass included."""
    samples = [CallSample(f"r{i}", 1, "agent", s.prompt_ids * 6, s.completion_ids,
                          s.behaviour_logprobs, 1.0 if s.desirable else -1.0)
               for i, s in enumerate(feedback)]  # fmt: skip
    train = TrainConfig(micro_batch_tokens=BUDGET, batch_size=8, max_steps=1).model_copy(
        update={"max_length": 4096}
    )
    policy, _ = make_policy(copy.deepcopy(base_model), train)
    with shapes_fed(policy) as seen:
        result = train_trajectories(policy, samples, train, TaskTrainConfig())
    assert result.steps == 1 and result.tokens > 0
    assert result.objectives["tasks"]["gap"].tokens > 0
    assert seen and all(b * t <= BUDGET for b, t in seen), seen
    assert (1, BUDGET) in seen
    metrics = result.metrics()
    assert 0 < metrics["peak_rss_gb"] <= metrics["process_peak_rss_gb"] + 0.01
    assert metrics["curves"]["rss_gb"][0] > 0
    # an update of one step of 2 computes lp_old for those 2 samples alone
    two = train.model_copy(update={"batch_size": 2})
    objective = TaskObjective(samples, two, TaskTrainConfig())
    with shapes_fed(policy) as seen:
        objective.prepare(policy, [3, 5])
    assert sorted(objective.old) == [3, 5] and sum(b for b, _ in seen) == 2


def test_gradient_checkpointing_trains_the_same(
    base_model: torch.nn.Module, feedback: list[Sample]
) -> None:
    losses, weights = {}, {}
    for on in (False, True):
        config = TrainConfig(gradient_checkpointing=on, max_steps=2, batch_size=4,
                             micro_batch_tokens=256)  # fmt: skip
        policy, _ = make_policy(copy.deepcopy(base_model), config)
        assert any(getattr(m, "gradient_checkpointing", False) for m in policy.modules()) is on
        losses[on] = train_policy(policy, feedback[2:], config).losses
        weights[on] = [p.detach().clone() for n, p in policy.named_parameters() if "lora_" in n]
    assert losses[True] == pytest.approx(losses[False], rel=1e-5)
    for a, b in zip(weights[True], weights[False], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_peak_rss_sees_an_allocation_and_release_returns_it() -> None:
    with PeakRss() as rss:
        before = rss.take()
        block = torch.ones(64 * 1024 * 1024 // 4)  # 64 MiB, touched
        assert rss.take() >= before + 0.05
        del block
        release()
    assert rss.peak_gb >= before + 0.05 and rss.process_peak_gb >= rss.peak_gb - 0.01
