"""`apprentice tasks eval`'s engine (learner/synth/solve_rates.py): rollouts run concurrently up
to a bound, each with its wall budget; a runaway model and a broken task are recorded, not
fatal; the JSON has solve rates overall, per tier and per kind, and the means.

Run: .venv/bin/python -m pytest tests/learner/synth/test_solve_rates.py -q
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time

import pytest

from agent_server.agent.scripted import ScriptedModel
from learner.config import GateConfig
from learner.gate import task_decision
from learner.synth.records import TaskRecord
from learner.synth.rollout import RolloutConfig
from learner.synth.sandbox import SandboxConfig
from learner.synth.solve_rates import evaluate_tasks

TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
FILES = {"calc.py": "def add(a, b):\n    return a - b\n", "tests/test_calc.py": TEST}
EASY = TaskRecord(
    instance_id="calc__revert-0000000-0", repo="calc", base_commit="0" * 40, patch="",
    test_patch="", FAIL_TO_PASS=["tests/test_calc.py::test_add"], PASS_TO_PASS=[],
    problem_statement="add(2, 3) returns -1", problem_statement_vague="adding is broken",
    kind="revert", difficulty="easy", test_command=["python", "-m", "pytest"],
    test_files={"tests/test_calc.py": TEST},
)  # fmt: skip
HARD = dataclasses.replace(EASY, instance_id="calc__mutate-0000000-1", kind="mutate",
                           difficulty="hard", bug_patch="diff")  # fmt: skip
CONFIG = RolloutConfig(step_limit=5, wall_s=30, max_tokens=256,
                       sandbox=SandboxConfig(python=sys.executable, test_timeout_s=30))  # fmt: skip


def act(tool: str, **args: str) -> str:
    return json.dumps({"thought": "next", "tool": tool, "args": args})


FIX = act("edit", path="calc.py", search="return a - b", replace="return a + b")
FINISH = act("finish", message="done")


async def test_summary_per_tier_and_kind_with_bounded_concurrency() -> None:
    running = peak = 0

    def begin(messages: list) -> str:  # the first call of a rollout
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        return act("run_command", command="sleep 1")

    def end(messages: list) -> str:  # its last call
        nonlocal running
        running -= 1
        return FINISH

    def factory(task: TaskRecord, sample: int) -> ScriptedModel:
        # The easy task is solved on sample 0 only; the hard one never.
        solve = [FIX] if task is EASY and sample == 0 else []
        return ScriptedModel([begin, *solve, end])

    lines: list[str] = []
    start = time.monotonic()
    report = await evaluate_tasks([EASY, HARD], factory, files_for=lambda t: FILES, samples=2,
                                  concurrency=2, config=CONFIG, progress=lines.append)  # fmt: skip
    assert time.monotonic() - start < 120
    assert report["rollouts"] == 4 and report["tasks"] == 2 and report["samples"] == 2
    assert report["solved"] == 1 and report["solve_rate"] == 0.25
    assert report["per_tier"]["easy"]["solve_rate"] == 0.5
    assert report["per_tier"]["hard"]["solve_rate"] == 0.0
    assert set(report["per_kind"]) == {"revert", "mutate"}
    assert report["mean_steps"] > 0 and report["mean_tokens"] > 0 and report["mean_wall_s"] > 0
    assert report["statuses"] == {"finished": 4} and len(lines) == 4
    assert peak == 2 and json.loads(json.dumps(report)) == report
    assert {r["instance_id"] for r in report["results"]} == {EASY.instance_id, HARD.instance_id}


async def test_runaway_model_and_broken_task_are_recorded_not_fatal() -> None:
    def factory(task: TaskRecord, sample: int) -> ScriptedModel:
        return ScriptedModel([FIX, FINISH], delay_s=60 if task is HARD else 0.0)

    def files_for(task: TaskRecord) -> dict[str, str]:
        return FILES

    config = dataclasses.replace(CONFIG, wall_s=2)
    broken = dataclasses.replace(EASY, instance_id="calc__revert-0000000-9")
    files = {EASY.instance_id: FILES, HARD.instance_id: FILES, broken.instance_id: {"../x": ""}}
    report = await asyncio.wait_for(
        evaluate_tasks([EASY, HARD, broken], factory, files_for=lambda t: files[t.instance_id],
                       concurrency=3, config=config),
        timeout=90,
    )  # fmt: skip
    by_id = {r["instance_id"]: r for r in report["results"]}
    assert by_id[EASY.instance_id]["solved"]
    assert (
        by_id[HARD.instance_id]["status"] == "time_limit" and by_id[HARD.instance_id]["truncated"]
    )
    assert by_id[broken.instance_id]["status"] == "crashed"
    assert "not a relative path" in by_id[broken.instance_id]["message"]
    assert report["truncated"] == 2 and report["solve_rate"] == pytest.approx(1 / 3, abs=1e-3)


async def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="samples"):
        await evaluate_tasks([EASY], ScriptedModel([]), files_for=lambda t: FILES, samples=0)
    with pytest.raises(ValueError, match="empty"):
        await evaluate_tasks([], ScriptedModel([]), files_for=lambda t: FILES)
    with pytest.raises(ValueError, match="repo"):
        await evaluate_tasks([EASY], ScriptedModel([]))


async def test_the_gate_decides_on_per_task_solve_rates() -> None:
    """Both adapters roll out the same held-out task four times; the candidate fixes it once,
    the serving adapter three times. Over tasks, the gate's paired test (learner/gate.py)
    refuses a candidate that is worse on them, defers on too few tasks, and deploys one that
    is better on every task."""

    async def solved(fixes: int) -> list[int]:
        def model(task: TaskRecord, sample: int) -> ScriptedModel:
            return ScriptedModel([FIX, FINISH] if sample < fixes else [FINISH])

        report = await evaluate_tasks([EASY], model, files_for=lambda t: FILES, samples=4,
                                      concurrency=2, config=CONFIG)  # fmt: skip
        return [report["solved"], report["rollouts"]]

    candidate, serving = await solved(1), await solved(3)
    assert (candidate, serving) == ([1, 4], [3, 4])
    ids = [f"t{i}" for i in range(5)]
    worse = task_decision({i: candidate for i in ids}, {i: serving for i in ids}, GateConfig(),
                          finite=True)  # fmt: skip
    assert worse.verdict == "refuse" and "not better on 5 held-out tasks" in worse.reasons[0]
    assert worse.evidence["effect"] == -0.5
    better = task_decision({i: serving for i in ids}, {i: candidate for i in ids}, GateConfig(),
                           finite=True)  # fmt: skip
    assert better.verdict == "deploy" and better.evidence["p_value"] < 0.1
    few = task_decision({"t0": serving}, {"t0": candidate}, GateConfig(min_tasks=4), finite=True)
    assert few.verdict == "defer" and "1 held-out tasks; needs at least 4" in few.reasons[0]
    assert few.evidence["needed"] == 3
    # A serving rate pooled over more runs counts by its rate; a task one side never ran on
    # is left out.
    pooled = task_decision({i: [3, 4] for i in ids}, {i: [3, 8] for i in ids} | {"t9": [1, 1]},
                           GateConfig(), finite=True)  # fmt: skip
    assert pooled.verdict == "deploy" and pooled.evidence["items"] == {"tasks": 5}
    broken = task_decision({i: serving for i in ids}, {i: candidate for i in ids}, GateConfig(),
                           finite=False)  # fmt: skip
    assert broken.verdict == "refuse" and "not finite" in broken.reasons[0]
