"""Trajectories: a task cycle's stored rollouts, grouped by task, as samples with advantages.

    rollouts = load_rollouts(db, run_id=run_id)          # or Rollout.of(result) in memory
    groups = group_rollouts(rollouts)                    # K rollouts of one task per group
    samples, stats = trajectory_samples(groups)          # one sample per model call

The data half of task RL (learner/grpo.py is the update): per group of K rollouts of one
task, A_i = r_i - mean_{j != i} r_j (leave-one-out, no std division); groups whose rewards
are all equal are dropped; a truncated rollout sets its group's baseline but is masked;
every model call of rollout i, agent steps and self-summaries alike, is one sample with
advantage A_i, and says whether it was decoded under the action grammar (`constrained`:
its logged logprobs are the masked distribution's, grpo.off_policy_weight). Rollouts are
read through feedback/queries/rollouts.py. Tested in tests/learner/test_grpo.py.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from feedback.db import transaction
from feedback.queries import rollouts_with_calls
from learner.batching import compact

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Call:
    """One model call of a rollout, as stored in rollout_calls."""

    seq: int
    kind: str  # "agent" | "summary"
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]  # behaviour logprobs, one per completion id
    constrained: bool = False  # decoded under the action schema's grammar mask


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
            calls.append(Call(seq, recorded.kind, ids, list(c.token_ids), logprobs,
                              recorded.constrained))  # fmt: skip
        return cls(rollout_id or result.rollout_id or f"{result.instance_id}#{id(result)}",
                   result.instance_id, result.reward, result.truncated, tuple(calls))  # fmt: skip


def load_rollouts(
    db: sessionmaker[Session], *, run_id: int | None = None, ids: Sequence[str] | None = None
) -> list[Rollout]:
    """Stored rollouts (task_rollouts and their rollout_calls), of one run or by id, oldest
    first, as the update reads them. A call stored without its prompt ids cannot be replayed
    and makes its whole rollout unusable: such rollouts are left out."""
    with transaction(db) as s:
        stored = rollouts_with_calls(s, run_id=run_id, ids=ids)
    rollouts, unusable = [], []
    for row in stored:
        if any(c.prompt_token_ids is None for c in row.calls):
            unusable.append(row.id)
            continue
        calls = tuple(Call(c.seq, c.kind, list(c.prompt_token_ids or []),
                           list(c.completion_token_ids), list(c.logprobs), c.constrained)
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
    constrained: bool = False  # behaviour logprobs under the grammar mask: weight 1

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
                                          call.logprobs, advantage, call.constrained))  # fmt: skip
    stats.samples = len(samples)
    stats.summary_samples = sum(s.kind == "summary" for s in samples)
    return samples, stats
