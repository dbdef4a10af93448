"""The task-RL update (learner/grpo.py): leave-one-out advantages on a group of real
rollouts of the product's agent (ScriptedModel, sandbox, grading), equal groups dropped,
truncated rollouts masked, summaries trained with their trajectory's advantage, and one
update on the dev model that moves the LoRA weights and no base weight.

Run: .venv/bin/python -m pytest tests/learner/test_grpo.py -q
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from agent_server.agent.config import AgentConfig
from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.summarizer import SummarizerConfig
from learner.config import TaskTrainConfig, TrainConfig
from learner.grpo import pg_loss, train_trajectories
from learner.synth.rollout import RolloutConfig, run_rollout
from learner.train import make_policy
from learner.trajectories import (
    Call,
    Rollout,
    group_rollouts,
    leave_one_out,
    trajectory_samples,
)
from tests.learner.synth.test_rollout import FILES, FINISH, FIX, SANDBOX, TASK, act
from tests.learner.synthetic_feedback import make_samples


def fake(rid: str, task: str, reward: float, *, truncated: bool = False,
         kinds: tuple[str, ...] = ("agent",)) -> Rollout:  # fmt: skip
    calls = tuple(Call(i + 1, k, [1, 2, 3], [4, 5], [-0.1, -0.2]) for i, k in enumerate(kinds))
    return Rollout(rid, task, reward, truncated, calls)


def test_leave_one_out_of_one_zero_zero_one() -> None:
    assert leave_one_out([1, 0, 0, 1]) == pytest.approx([2 / 3, -2 / 3, -2 / 3, 2 / 3])
    assert leave_one_out([0.5]) == [0.0]


async def test_a_group_of_real_rollouts_gets_leave_one_out_advantages() -> None:
    """Four runs of the agent on one task: two fix it (reward 1), two give up (0)."""
    config = RolloutConfig(step_limit=6, wall_s=60, max_tokens=256, sandbox=SANDBOX)
    scripts = [[FIX, FINISH], [FINISH], [act("read_file", path="calc.py"), FINISH], [FIX, FINISH]]
    results = [await run_rollout(TASK, ScriptedModel(s, context_window=8192), files=FILES,
                                 config=config) for s in scripts]  # fmt: skip
    assert [r.reward for r in results] == [1.0, 0.0, 0.0, 1.0], [r.message for r in results]
    rollouts = [Rollout.of(r, rollout_id=f"r{i}") for i, r in enumerate(results)]
    samples, stats = trajectory_samples(group_rollouts(rollouts))
    by_rollout = {s.rollout_id: s.advantage for s in samples}
    assert by_rollout == pytest.approx({"r0": 2 / 3, "r1": -2 / 3, "r2": -2 / 3, "r3": 2 / 3})
    calls = sum(len(r.calls) for r in results)
    assert stats.samples == len(samples) == calls and stats.dropped_equal == 0
    for sample in samples:  # each is one recorded model call, ids and logprobs as served
        assert sample.completion_ids and len(sample.behaviour_logprobs) == len(
            sample.completion_ids
        )


def test_equal_groups_are_dropped_and_truncated_rollouts_masked() -> None:
    groups = group_rollouts([
        fake("a1", "same", 1.0), fake("a2", "same", 1.0), fake("a3", "same", 1.0),
        fake("b1", "mixed", 1.0), fake("b2", "mixed", 0.0, truncated=True),
        fake("b3", "mixed", 0.0),
    ])  # fmt: skip
    samples, stats = trajectory_samples(groups)
    assert stats.groups == 2 and stats.dropped_equal == 1 and stats.truncated_masked == 1
    # the truncated rollout still counts in the baseline: b1's A = 1 - (0 + 0) / 2
    assert {s.rollout_id: s.advantage for s in samples} == pytest.approx({"b1": 1.0, "b3": -0.5})


def test_positive_only_trains_on_the_rollouts_above_their_baseline() -> None:
    """advantages: positive drops the rollouts below their group's baseline; they still set
    it, so the kept advantages are the ones `both` gives."""
    rollouts = [
        fake("b1", "mixed", 1.0), fake("b2", "mixed", 0.0), fake("b3", "mixed", 0.0),
        fake("c1", "rare", 0.0), fake("c2", "rare", 0.0), fake("c3", "rare", 1.0),
    ]  # fmt: skip
    both, _ = trajectory_samples(group_rollouts(rollouts))
    positive, stats = trajectory_samples(group_rollouts(rollouts), positive_only=True)
    assert {s.rollout_id: s.advantage for s in positive} == pytest.approx({"b1": 1.0, "c3": 1.0})
    assert [s for s in both if s.advantage > 0] == positive
    assert stats.dropped_negative == 4 and stats.samples == len(positive)
    assert len(both) == len(positive) + 4 * len(rollouts[1].calls)


def test_summary_calls_are_samples_with_the_trajectorys_advantage() -> None:
    groups = group_rollouts([
        fake("good", "t", 1.0, kinds=("agent", "summary", "agent")),
        fake("bad", "t", 0.0, kinds=("agent", "summary")),
    ])  # fmt: skip
    samples, stats = trajectory_samples(groups)
    assert [(s.rollout_id, s.kind, s.advantage) for s in samples] == [
        ("good", "agent", 1.0), ("good", "summary", 1.0), ("good", "agent", 1.0),
        ("bad", "agent", -1.0), ("bad", "summary", -1.0),
    ]  # fmt: skip
    assert stats.summary_samples == 2


async def test_real_summary_calls_carry_the_advantage() -> None:
    """A rollout whose context was summarized: its summary call is trained on too."""
    files = FILES | {f"data/f{i}.py": f'DATA_{i} = "{"x" * 300}"\n' for i in range(6)}
    reads = [act("read_file", path=f"data/f{i}.py") for i in range(6)]
    summarizer = SummarizerConfig(budget_ratio=0.8, target_ratio=0.5, max_summary_tokens=200,
                                  keep_last_turns=1)  # fmt: skip
    config = RolloutConfig(step_limit=12, wall_s=60, max_tokens=256, sandbox=SANDBOX,
                           summarizer=summarizer, agent=AgentConfig(few_shot=False))  # fmt: skip
    solved = await run_rollout(TASK, ScriptedModel([*reads, FIX, FINISH], context_window=4096),
                               files=files, config=config)  # fmt: skip
    failed = await run_rollout(TASK, ScriptedModel([FINISH], context_window=4096),
                               files=files, config=config)  # fmt: skip
    assert solved.summaries >= 1 and (solved.reward, failed.reward) == (1.0, 0.0)
    rollouts = [Rollout.of(solved, "s"), Rollout.of(failed, "f")]
    samples, _ = trajectory_samples(group_rollouts(rollouts))
    summaries = [s for s in samples if s.kind == "summary"]
    assert summaries and all(s.rollout_id == "s" and s.advantage == 1.0 for s in summaries)


def test_the_clip_is_higher_above_than_below() -> None:
    config = TaskTrainConfig(clip_low=0.2, clip_high=0.28)
    old = torch.zeros(1, 2)
    mask, behaviour = torch.ones(1, 2), torch.zeros(1, 2)
    up = torch.log(torch.tensor([[1.5, 1.1]]))  # ratio 1.5 is clipped to 1.28, 1.1 is not
    loss, share = pg_loss(up, old, behaviour, torch.tensor([1.0]), mask, config=config,
                          constant=2.0)  # fmt: skip
    assert float(loss) == pytest.approx(-(1.28 + 1.1) / 2) and share == 0.5
    far = torch.log(torch.tensor([[3.0, 3.0]]))  # the trainer / engine gap: weight capped at 2
    loss, _ = pg_loss(old, old, -far, torch.tensor([1.0]), mask, config=config, constant=2.0)
    assert float(loss) == pytest.approx(-2.0)


def test_one_update_moves_lora_weights_and_no_base_weight(
    dev_tokenizer: Any, base_model: torch.nn.Module
) -> None:
    feedback = make_samples(dev_tokenizer, base_model, 8, seed=3)
    rollouts = []
    for i, s in enumerate(feedback):  # one call each, half of them summaries
        call = Call(1, "agent" if i % 2 else "summary", s.prompt_ids, s.completion_ids,
                    s.behaviour_logprobs)  # fmt: skip
        rollouts.append(Rollout(f"r{i}", "task", 1.0 if s.desirable else 0.0, False, (call,)))
    samples, stats = trajectory_samples(group_rollouts(rollouts))
    assert stats.samples == 8 and stats.summary_samples == 4
    model = copy.deepcopy(base_model)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    train = TrainConfig(batch_size=8, max_steps=1, lr=1e-2)
    policy, _ = make_policy(model, train)
    lora = {n: p.detach().clone() for n, p in policy.named_parameters() if "lora_" in n}
    result = train_trajectories(policy, samples, train, TaskTrainConfig())
    assert result.steps == 1 and result.tokens > 0
    # the behaviour logprobs were the base model's own: no gap between trainer and "engine"
    gap = result.objectives["tasks"]["gap"]
    assert gap.tokens > 0 and gap.mean_abs < 1e-3 and gap.share_capped == 0
    moved = [n for n, p in policy.named_parameters()
             if "lora_" in n and not torch.equal(p.detach(), lora[n])]  # fmt: skip
    assert moved, "no LoRA weight moved"
    for name, param in policy.named_parameters():
        if "lora_" in name:
            continue
        key = name.replace("base_model.model.", "").replace(".base_layer", "")
        assert torch.equal(param.detach(), before[key]), f"base weight {name} changed"
