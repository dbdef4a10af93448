"""The reward of one rollout, and every term that made it (stored with the rollout).

    terms = reward_terms(RewardInputs(...), RewardConfig())
    terms["reward"], terms["truncated"]

The rules (issue 12, Composer 2's shape):
- outcome: 1 when every FAIL_TO_PASS and PASS_TO_PASS test passes after grading restored the
  tests, else 0; with `partial_credit`, the share of FAIL_TO_PASS passing times the share of
  PASS_TO_PASS passing. An empty diff earns no outcome at all (nothing was done).
- effort: a concave penalty on completion tokens and tool calls beyond a free allowance,
  `coef * sqrt(excess / scale)` each, their sum capped at `max_penalty` (< 1, so a solved
  run always scores above every unsolved one).
- format: each malformed action (a format error the loop reflected back) costs
  `format_coef`, capped at `max_format_penalty`.
- invalid: a run ended by malformed or invalid actions (status "too_many_errors") scores
  `invalid_reward`, which the config keeps strictly below the worst honest failure
  (-(max_penalty + max_format_penalty)).
- outcome only (`outcome_only`): the reward is the outcome and nothing else (DeepSWE's binary
  reward): no effort, format or invalid term, so giving up (an empty diff, an unsolved
  `finish`) scores what trying and failing scores. The shaped terms pay a policy for finishing
  cleanly without solving; this one pays only for solving. The terms are still reported.
- truncated: a run cut off by a limit (step or time limit, context overflow) or ended by the
  infrastructure (model error, cancel, crash) is marked; the learner masks it from the loss.
Nothing here runs a test; rollout.py feeds it the graded outcome.
Tested in tests/learner/synth/test_reward.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

LIMIT_STATUSES = frozenset({"step_limit", "time_limit", "context_overflow"})
INFRA_STATUSES = frozenset({"model_error", "cancelled", "error", "crashed"})
INVALID_STATUSES = frozenset({"too_many_errors"})


@dataclass(frozen=True)
class RewardConfig:
    partial_credit: bool = False
    free_tokens: int = 2000  # completion tokens without penalty
    token_coef: float = 0.1
    token_scale: float = 20_000.0
    free_tool_calls: int = 10  # tool calls (agent steps) without penalty
    tool_coef: float = 0.05
    tool_scale: float = 40.0
    max_penalty: float = 0.3  # cap of the whole effort penalty
    format_coef: float = 0.05  # per malformed action
    max_format_penalty: float = 0.2
    invalid_reward: float = -1.0  # a run ended by malformed / invalid actions
    outcome_only: bool = False  # reward = outcome: no effort, format or invalid term

    def __post_init__(self) -> None:
        for name in ("free_tokens", "free_tool_calls", "token_coef", "tool_coef", "format_coef"):
            if getattr(self, name) < 0:
                raise ValueError(f"RewardConfig.{name} must be >= 0, got {getattr(self, name)}")
        if min(self.token_scale, self.tool_scale) <= 0:
            raise ValueError("RewardConfig.token_scale and tool_scale must be > 0")
        if not 0 <= self.max_penalty < 1 or self.max_format_penalty < 0:
            raise ValueError("RewardConfig.max_penalty must be in [0, 1), max_format_penalty >= 0")
        if self.outcome_only:
            return  # the penalties below are reported, not paid
        worst_honest = -(self.max_penalty + self.max_format_penalty)
        if self.invalid_reward >= worst_honest:
            raise ValueError(
                f"RewardConfig.invalid_reward {self.invalid_reward} must be below the worst "
                f"honest failure ({worst_honest}): malformed runs must score strictly lower"
            )


@dataclass(frozen=True)
class RewardInputs:
    status: str  # the agent run's status (agent_server/agent/exceptions.RunStatus) or "crashed"
    outcomes: Mapping[str, str]  # node id -> outcome, after the tests were restored
    fail_to_pass: Sequence[str]
    pass_to_pass: Sequence[str]
    diff: str  # the graded diff (test edits undone)
    completion_tokens: int
    tool_calls: int
    format_errors: int = 0
    tests_timed_out: bool = False


def concave(excess: float, coef: float, scale: float) -> float:
    """coef * sqrt(excess / scale): steep for the first extra tokens, flatter after."""
    return coef * math.sqrt(max(0.0, excess) / scale)


def _share(outcomes: Mapping[str, str], tests: Sequence[str]) -> float:
    if not tests:
        return 1.0
    return sum(outcomes.get(t) == "passed" for t in tests) / len(tests)


def reward_terms(inputs: RewardInputs, config: RewardConfig | None = None) -> dict[str, Any]:
    """Every term of the reward (JSON-able) and the total under "reward"."""
    cfg = config or RewardConfig()
    f2p = _share(inputs.outcomes, inputs.fail_to_pass)
    p2p = _share(inputs.outcomes, inputs.pass_to_pass)
    solved = f2p == 1.0 and p2p == 1.0 and not inputs.tests_timed_out
    empty = not inputs.diff.strip()
    if empty:
        outcome = 0.0
    elif cfg.partial_credit:
        outcome = 0.0 if inputs.tests_timed_out else f2p * p2p
    else:
        outcome = float(solved)
    token_penalty = concave(inputs.completion_tokens - cfg.free_tokens, cfg.token_coef,
                            cfg.token_scale)  # fmt: skip
    tool_penalty = concave(inputs.tool_calls - cfg.free_tool_calls, cfg.tool_coef, cfg.tool_scale)
    effort = min(cfg.max_penalty, token_penalty + tool_penalty)
    format_penalty = min(cfg.max_format_penalty, cfg.format_coef * inputs.format_errors)
    invalid = inputs.status in INVALID_STATUSES
    if cfg.outcome_only:
        reward = outcome
    else:
        reward = cfg.invalid_reward if invalid else outcome - effort - format_penalty
    return {
        "reward": round(reward, 6),
        "outcome": outcome,
        "solved": solved and not empty,
        "fail_to_pass": round(f2p, 6),
        "pass_to_pass": round(p2p, 6),
        "empty_diff": empty,
        "tests_timed_out": inputs.tests_timed_out,
        "completion_tokens": inputs.completion_tokens,
        "tool_calls": inputs.tool_calls,
        "token_penalty": round(token_penalty, 6),
        "tool_penalty": round(tool_penalty, 6),
        "effort_penalty": round(effort, 6),
        "format_errors": inputs.format_errors,
        "format_penalty": round(format_penalty, 6),
        "invalid": invalid,
        "truncated": inputs.status in LIMIT_STATUSES | INFRA_STATUSES,
        "infra_failure": inputs.status in INFRA_STATUSES,
        "partial_credit": cfg.partial_credit,
        "outcome_only": cfg.outcome_only,
    }
