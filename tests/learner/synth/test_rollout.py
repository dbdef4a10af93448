"""Rollouts of the product's agent on a task (learner/synth/rollout.py), driven by the
ScriptedModel: the reference fix earns 1, nothing earns 0, malformed actions score below
both, editing a test gains nothing; every call (summaries included) is stored once, in
rollout_calls (no suggestions row), with its ids, logprobs and whether the action schema
constrained it, and read back in order; a hung command, a hung test and a runaway model are
stopped and recorded.

Run: .venv/bin/python -m pytest tests/learner/synth/test_rollout.py -q
"""

from __future__ import annotations

import json
import sys

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from agent_server.agent.config import AgentConfig
from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.summarizer import SummarizerConfig
from feedback.db import transaction
from feedback.models import SessionEvent, Suggestion, TaskRollout
from feedback.queries import get_rollout
from learner.synth.records import TaskRecord
from learner.synth.rollout import RolloutConfig, run_rollout
from learner.synth.sandbox import SandboxConfig
from learner.trajectories import Rollout, load_rollouts

TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n" \
       "def test_zero():\n    assert add(0, 0) == 0\n"  # fmt: skip
FILES = {"calc.py": "def add(a, b):\n    return a - b\n", "tests/test_calc.py": TEST}
TASK = TaskRecord(
    instance_id="calc__revert-0000000-0", repo="calc", base_commit="0" * 40,
    patch="--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n"
    "+    return a + b\n", test_patch="", FAIL_TO_PASS=["tests/test_calc.py::test_add"],
    PASS_TO_PASS=["tests/test_calc.py::test_zero"],
    problem_statement="tests/test_calc.py::test_add fails: add(2, 3) returns -1, not 5.",
    problem_statement_vague="adding numbers gives the wrong answer", kind="revert",
    difficulty="easy", test_command=["python", "-m", "pytest"],
    test_files={"tests/test_calc.py": TEST},
)  # fmt: skip
SANDBOX = SandboxConfig(python=sys.executable, test_timeout_s=30)
CONFIG = RolloutConfig(step_limit=8, wall_s=60, max_tokens=256, sandbox=SANDBOX)


def act(tool: str, **args: str) -> str:
    return json.dumps({"thought": "next", "tool": tool, "args": args})


FIX = act("edit", path="calc.py", search="return a - b", replace="return a + b")
FINISH = act("finish", message="done")


async def rollout(outputs: list, config: RolloutConfig = CONFIG, **kw: object):  # type: ignore[no-untyped-def]
    model = ScriptedModel(outputs, context_window=kw.pop("window", 8192))  # type: ignore[arg-type]
    return await run_rollout(TASK, model, files=FILES, config=config, **kw)  # type: ignore[arg-type]


async def test_reference_fix_earns_one_nothing_zero_malformed_below_both() -> None:
    fixed = await rollout([act("run_command", command="python -m pytest -q"), FIX, FINISH])
    assert (fixed.status, fixed.reward, fixed.terms["solved"]) == ("finished", 1.0, True)
    assert "+    return a + b" in fixed.diff and not fixed.truncated
    assert fixed.steps == 3 and fixed.tokens > 0 and fixed.summaries == 0
    idle = await rollout([FINISH])
    assert (idle.reward, idle.terms["empty_diff"], idle.terms["solved"]) == (0.0, True, False)
    broken = await rollout(["this is not an action", "{", '{"tool": "fly"}', FIX, FINISH])
    assert broken.status == "too_many_errors" and broken.terms["invalid"]
    assert broken.reward < idle.reward < fixed.reward
    assert broken.terms["format_errors"] == 3


async def test_editing_a_test_gains_nothing() -> None:
    cheat = act("edit", path="tests/test_calc.py", search="assert add(2, 3) == 5",
                replace="assert True")  # fmt: skip
    result = await rollout([cheat, FINISH])
    assert result.status == "finished" and result.reward == 0.0
    assert result.terms["reverted_test_paths"] == ["tests/test_calc.py"]
    assert result.outcomes["tests/test_calc.py::test_add"] == "failed"


async def test_calls_summaries_included_are_stored_in_order(
    db: sessionmaker[Session],
) -> None:
    files = FILES | {f"data/f{i}.py": f'DATA_{i} = "{"x" * 300}"\n' for i in range(6)}
    reads = [act("read_file", path=f"data/f{i}.py") for i in range(6)]
    summarizer = SummarizerConfig(budget_ratio=0.8, target_ratio=0.5, max_summary_tokens=200,
                                  keep_last_turns=1)  # fmt: skip
    config = RolloutConfig(step_limit=12, wall_s=60, max_tokens=256, sandbox=SANDBOX,
                           summarizer=summarizer, agent=AgentConfig(few_shot=False))  # fmt: skip
    model = ScriptedModel([*reads, FIX, FINISH], context_window=4096)
    result = await run_rollout(TASK, model, files=files, config=config, db=db,
                               adapter="policy-v7")  # fmt: skip
    assert result.status == "finished" and result.reward == 1.0, result.message
    assert result.summaries >= 1 and result.rollout_id and result.session_id
    with transaction(db) as s:
        read = get_rollout(s, rollout_id=result.rollout_id)
    assert read is not None and read.session_id == result.session_id
    stored = read.calls
    assert [c.seq for c in stored] == list(range(1, len(result.calls) + 1))
    assert [c.kind for c in stored] == [c.kind for c in result.calls]
    assert [c.kind for c in stored] == [c.kind for c in model.calls]  # the model's order
    assert "summary" in [c.kind for c in stored]
    for row, call in zip(stored, result.calls, strict=True):
        c = call.completion
        assert row.prompt_token_ids == c.prompt_token_ids and row.prompt_token_ids
        assert row.completion_token_ids == c.token_ids and row.logprobs == c.logprobs
        assert row.adapter == "policy-v7" and row.finish_reason == "stop"
        # structured actions: every agent step was decoded under the schema, no summary was
        assert row.constrained == (row.kind == "agent") == call.constrained
    with transaction(db) as s:
        row = s.get(TaskRollout, result.rollout_id)
        assert row is not None and row.reward == 1.0 and row.summaries == result.summaries
        assert row.reward_terms["solved"] and row.adapter == "policy-v7" and not row.truncated
        kinds = s.scalars(select(SessionEvent.kind).where(
            SessionEvent.session_id == result.session_id)).all()  # fmt: skip
        assert "summary" in kinds  # the trajectory went through production's recorder
        assert "edit" in kinds  # an edit was proposed and applied (its events)...
        # ...and its call is recorded once, in rollout_calls: no suggestions row besides
        assert s.scalars(select(Suggestion.id).where(
            Suggestion.session_id == result.session_id)).all() == []  # fmt: skip
    # what the update reads back is what the agent did, call for call
    assert load_rollouts(db, ids=[result.rollout_id]) == [Rollout.of(result)]


async def test_unstructured_actions_store_no_constrained_call(
    db: sessionmaker[Session],
) -> None:
    agent = AgentConfig(structured_actions=False)
    config = RolloutConfig(step_limit=8, wall_s=60, max_tokens=256, sandbox=SANDBOX, agent=agent)
    result = await rollout([FIX, FINISH], config, db=db)
    assert result.status == "finished" and result.reward == 1.0, result.message
    assert [c.constrained for c in result.calls] == [False, False]
    with transaction(db) as s:
        read = get_rollout(s, rollout_id=result.rollout_id or "")
    assert read is not None and [(c.kind, c.constrained) for c in read.calls] == [
        ("agent", False), ("agent", False)]  # fmt: skip


async def test_hung_command_and_hung_test_are_stopped_and_recorded() -> None:
    agent = AgentConfig(command_timeout_s=1)
    sandbox = SandboxConfig(python=sys.executable, test_timeout_s=3)
    config = RolloutConfig(step_limit=6, wall_s=60, max_tokens=256, agent=agent, sandbox=sandbox)
    loop = act("edit", path="calc.py", search="return a - b", replace="while True:\n        pass")
    result = await rollout([act("run_command", command="sleep 30"), loop, FINISH], config)
    assert result.status == "finished" and result.wall_s < 30
    assert result.terms["tests_timed_out"] and result.reward == 0.0
    assert "killed" in result.message


async def test_a_runaway_model_is_stopped_by_the_wall_budget() -> None:
    config = RolloutConfig(step_limit=6, wall_s=1.5, max_tokens=256, sandbox=SANDBOX)
    model = ScriptedModel([FIX, FINISH], delay_s=30)
    result = await run_rollout(TASK, model, files=FILES, config=config)
    assert result.status == "time_limit" and result.truncated and result.terms["truncated"]
    assert result.wall_s < 20 and result.reward == 0.0
