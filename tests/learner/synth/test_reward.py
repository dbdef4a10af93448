"""The reward terms of a rollout (learner/synth/reward.py): pass/fail, partial credit, the
concave effort penalty, malformed runs below honest failures, empty diffs, truncation.

Run: .venv/bin/python -m pytest tests/learner/synth/test_reward.py -q
"""

from __future__ import annotations

import pytest

from learner.synth.reward import RewardConfig, RewardInputs, concave, reward_terms

F2P, P2P = ["t.py::test_a", "t.py::test_b"], ["t.py::test_c"]
ALL_PASS = {t: "passed" for t in F2P + P2P}
DIFF = "diff --git a/a.py b/a.py\n-x\n+y\n"


def inputs(**changes: object) -> RewardInputs:
    base: dict[str, object] = dict(
        status="finished", outcomes=ALL_PASS, fail_to_pass=F2P, pass_to_pass=P2P, diff=DIFF,
        completion_tokens=100, tool_calls=2,
    )  # fmt: skip
    return RewardInputs(**(base | changes))  # type: ignore[arg-type]


def test_solved_is_one_and_any_failure_zero() -> None:
    assert reward_terms(inputs())["reward"] == 1.0
    failed = ALL_PASS | {"t.py::test_c": "failed"}
    terms = reward_terms(inputs(outcomes=failed))
    assert terms["reward"] == 0.0 and not terms["solved"] and terms["pass_to_pass"] == 0.0
    missing = {"t.py::test_a": "passed"}  # a test with no outcome did not pass
    assert reward_terms(inputs(outcomes=missing))["reward"] == 0.0


def test_partial_credit_is_configurable() -> None:
    half = ALL_PASS | {"t.py::test_b": "failed"}
    assert reward_terms(inputs(outcomes=half))["reward"] == 0.0
    terms = reward_terms(inputs(outcomes=half), RewardConfig(partial_credit=True))
    assert terms["reward"] == 0.5 and terms["partial_credit"]


def test_empty_diff_earns_nothing_even_when_tests_pass() -> None:
    terms = reward_terms(inputs(diff=""))
    assert terms["reward"] == 0.0 and terms["empty_diff"] and not terms["solved"]


def test_effort_penalty_is_concave_bounded_and_free_below_the_allowance() -> None:
    cfg = RewardConfig()
    small = reward_terms(inputs(completion_tokens=cfg.free_tokens), cfg)
    assert small["effort_penalty"] == 0.0
    steps = [reward_terms(inputs(completion_tokens=cfg.free_tokens + n), cfg) for n in
             (10_000, 20_000, 30_000)]  # fmt: skip
    p = [t["token_penalty"] for t in steps]
    assert 0 < p[0] < p[1] < p[2] and p[1] - p[0] > p[2] - p[1]  # concave
    huge = reward_terms(inputs(completion_tokens=10**9, tool_calls=10**6), cfg)
    assert huge["effort_penalty"] == cfg.max_penalty and huge["reward"] == 1 - cfg.max_penalty
    assert concave(-5, 1.0, 1.0) == 0.0


def test_malformed_runs_score_below_every_honest_failure() -> None:
    worst_honest = reward_terms(
        inputs(outcomes={}, completion_tokens=10**9, tool_calls=10**6, format_errors=99)
    )
    invalid = reward_terms(inputs(status="too_many_errors", outcomes={}, format_errors=3))
    assert invalid["invalid"] and invalid["reward"] < worst_honest["reward"] <= 0.0
    with pytest.raises(ValueError, match="strictly lower"):
        RewardConfig(invalid_reward=-0.1)


def test_outcome_only_pays_solving_and_nothing_else() -> None:
    cfg = RewardConfig(outcome_only=True)
    costly = reward_terms(inputs(completion_tokens=10**9, tool_calls=10**6, format_errors=9), cfg)
    assert costly["reward"] == 1.0 and costly["effort_penalty"] > 0 and costly["outcome_only"]
    gave_up = reward_terms(inputs(diff="", status="finished"), cfg)
    failed = reward_terms(inputs(outcomes={}, status="too_many_errors", format_errors=3), cfg)
    assert gave_up["reward"] == failed["reward"] == 0.0 and failed["invalid"]
    shaped = reward_terms(inputs(outcomes={}, status="too_many_errors", format_errors=3))
    assert shaped["reward"] < gave_up["reward"]  # the shaped reward pays for giving up
    RewardConfig(outcome_only=True, invalid_reward=-0.1)  # no ordering to keep: accepted


def test_truncation_and_hung_tests_are_marked() -> None:
    for status in ("step_limit", "time_limit", "context_overflow", "model_error", "crashed"):
        assert reward_terms(inputs(status=status))["truncated"], status
    assert not reward_terms(inputs())["truncated"]
    hung = reward_terms(inputs(tests_timed_out=True))
    assert hung["tests_timed_out"] and hung["reward"] == 0.0


def test_bad_config_is_refused() -> None:
    with pytest.raises(ValueError, match="max_penalty"):
        RewardConfig(max_penalty=1.0)
    with pytest.raises(ValueError, match="token_coef"):
        RewardConfig(token_coef=-1)
