"""What ends or bends an agent run: step and time limits, the format-error cap, cancelling
(Agent.cancel, task.cancel, while the person decides, before the run starts), command
timeouts and output caps, backend errors, a crashing reviewer, config validation.
Run: .venv/bin/python -m pytest tests/agent/test_loop_limits.py -q
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from agent_server.agent.config import AgentConfig
from agent_server.agent.events import EditDecision, EditProposal
from agent_server.agent.loop import Agent
from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.workspace import LocalWorkspace
from agent_server.models.base import Sampling
from tests.agent.loop_kit import FINISH, Person, act, agent, last_user


async def test_step_limit(root: Path) -> None:
    model = ScriptedModel([act("list_dir", path=".")] * 10)
    a, sink = agent(model, root, step_limit=3)
    result = await a.run("loop forever")
    assert (result.status, result.steps, len(model.calls)) == ("step_limit", 3, 3)
    assert sink.events[-1].data["status"] == "step_limit"


async def test_time_limit(root: Path) -> None:
    # 0.1 s per call: the call in flight at 0.25 s is stopped, not waited for; had it been
    # waited for, the script would have reached `finish`.
    model = ScriptedModel([act("list_dir", path=".")] * 2 + [FINISH], delay_s=0.1)
    a, _ = agent(model, root, time_limit_s=0.25)
    t0 = time.monotonic()
    result = await a.run("slow")
    assert result.status == "time_limit" and "0.25" in result.message
    assert 1 <= result.steps <= 3 and time.monotonic() - t0 < 5


async def test_format_error_cap_counts_errors_in_a_row(root: Path) -> None:
    ok = act("list_dir", path=".")
    model = ScriptedModel(["bad", "bad", ok, "bad", "bad", FINISH])
    a, _ = agent(model, root, max_format_errors=3)
    assert (await a.run("t")).status == "finished"  # a good step resets the count

    model = ScriptedModel(["bad", "{", '{"tool": "edit", "args": {"path": "a.py"}}', FINISH])
    a, _ = agent(model, root, max_format_errors=3)
    result = await a.run("t")
    assert (result.status, len(model.calls)) == ("too_many_errors", 3)
    assert "search" in result.message  # the last error is in the reason


async def test_cancel_stops_generation_promptly(root: Path) -> None:
    model = ScriptedModel([FINISH], delay_s=30)
    a, sink = agent(model, root)
    task = asyncio.create_task(a.run("t"))
    await asyncio.sleep(0.1)
    t0 = time.monotonic()
    a.cancel()
    result = await asyncio.wait_for(task, 2)
    assert result.status == "cancelled" and time.monotonic() - t0 < 5
    assert sink.events[-1].kind == "run_finished" and sink.events[-1].data["status"] == "cancelled"


async def test_cancelling_the_task_records_cancelled(root: Path) -> None:
    model = ScriptedModel([FINISH], delay_s=30)
    a, sink = agent(model, root)
    task = asyncio.create_task(a.run("t"))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 2)
    assert sink.events[-1].data["status"] == "cancelled"


async def test_cancel_while_waiting_for_the_person(root: Path) -> None:
    model = ScriptedModel([act("edit", path="a.py", search="return 1", replace="return 2")])
    a, sink = agent(model, root, mode="interactive", reviewer=lambda s: Person(s, wait=True))
    task = asyncio.create_task(a.run("t"))
    while not sink.of_kind("edit_proposed"):
        await asyncio.sleep(0.01)
    a.cancel()
    assert (await asyncio.wait_for(task, 2)).status == "cancelled"
    assert (root / "a.py").read_text() == "def f():\n    return 1\n"


async def test_command_timeout_and_output_cap(root: Path) -> None:
    model = ScriptedModel(
        [
            act("run_command", command="sleep 60"),
            act("run_command", command="python3 -c \"print('y' * 5000)\""),
            FINISH,
        ]
    )
    a, _ = agent(model, root, command_timeout_s=0.5, max_output_chars=500)
    t0 = time.monotonic()
    await a.run("t")
    assert time.monotonic() - t0 < 20  # killed at 0.5 s, not after 60 s (slack: a busy CI)
    assert "timed out" in last_user(model, 1)
    assert len(last_user(model, 2)) < 700 and "characters cut" in last_user(model, 2)


async def test_backend_errors_end_the_run_with_a_code(root: Path) -> None:
    a, sink = agent(ScriptedModel([]), root)
    result = await a.run("t")
    assert result.status == "model_error" and result.message.startswith("script_exhausted")


def test_config_is_validated(root: Path) -> None:
    with pytest.raises(ValueError, match="step_limit"):
        AgentConfig(step_limit=0)
    with pytest.raises(ValueError, match="mode"):
        AgentConfig(mode="yolo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reviewer"):
        Agent(ScriptedModel([]), LocalWorkspace(root), AgentConfig(mode="interactive"))
    with pytest.raises(ValueError, match="max_tokens"):
        cfg = AgentConfig(mode="autonomous", sampling=Sampling(max_tokens=1000))
        Agent(ScriptedModel([], context_window=2000), LocalWorkspace(root), cfg)
    with pytest.raises(ValueError, match="command_timeout_s"):
        AgentConfig(command_timeout_s=0)


async def test_cancel_before_the_run_starts_still_stops_it(root: Path) -> None:
    model = ScriptedModel([FINISH], delay_s=30)
    a, _ = agent(model, root)
    a.cancel()  # e.g. the person pressed stop while the task was being scheduled
    result = await asyncio.wait_for(a.run("t"), 2)
    assert result.status == "cancelled" and model.calls == []
    model.delay_s = 0  # the cancel is spent: the next run of the session goes ahead
    assert (await a.run("again")).status == "finished"


async def test_a_crashing_reviewer_ends_the_run_with_status_error(root: Path) -> None:
    class Broken:
        async def review_edit(self, proposal: EditProposal) -> EditDecision:
            raise RuntimeError("socket closed")

        async def approve_command(self, command: str) -> bool:
            return True

    model = ScriptedModel([act("edit", path="a.py", search="return 1", replace="return 2")])
    a, sink = agent(model, root, mode="interactive", reviewer=Broken())
    with pytest.raises(RuntimeError, match="socket closed"):
        await a.run("t")
    assert sink.events[-1].data["status"] == "error"
    assert (root / "a.py").read_text() == "def f():\n    return 1\n"
