"""The agent loop with a scripted model on a real LocalWorkspace (real files, real commands).

Covers: finishing, step and time limits, format-error reflection and its cap, tool errors as
observations, cancellation (Agent.cancel and task.cancel), interactive accept / reject /
partial accept, command approval, suggestion recorded before review, autonomous mode,
native tool calls, streaming, backend errors.
Run: .venv/bin/python -m pytest tests/agent/test_loop.py -q
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_server.agent.actions import action_schema, parse_action
from agent_server.agent.events import EditDecision, EditProposal, InMemorySink
from agent_server.agent.exceptions import FormatError
from agent_server.agent.loop import Agent, AgentConfig
from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.tools import CommandDecision
from agent_server.agent.workspace import LocalWorkspace
from agent_server.models.base import Completion, Sampling, ToolCall, Usage
from agent_server.models.embedded import EmbeddedBackend
from agent_server.models.embedded_config import EmbeddedConfig


def act(tool: str, thought: str = "", plan: str | None = None, **args: str) -> str:
    action: dict[str, Any] = {"thought": thought, "tool": tool, "args": args}
    if plan is not None:
        action["plan"] = plan
    return json.dumps(action)


FINISH = act("finish", message="done")


class Person:
    """A scripted reviewer that logs into the sink's log, so ordering can be asserted."""

    def __init__(self, sink: InMemorySink, edits=(), commands=(), wait: bool = False) -> None:
        self.sink, self.edits, self.commands, self.wait = sink, list(edits), list(commands), wait
        self.proposals: list[EditProposal] = []
        self.asked: list[str] = []

    async def review_edit(self, proposal: EditProposal) -> EditDecision:
        self.sink.log.append(("review", proposal.id))
        self.proposals.append(proposal)
        if self.wait:
            await asyncio.Event().wait()  # a person who never answers
        return self.edits.pop(0)

    async def approve_command(self, command: str) -> bool | CommandDecision:
        self.asked.append(command)
        return self.commands.pop(0)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "a.py").write_text("def f():\n    return 1\n")
    lines = [f"line {i}\n" for i in range(1, 31)]
    (tmp_path / "long.txt").write_text("".join(lines))
    return tmp_path


def agent(model: ScriptedModel, root: Path, **kw: Any) -> tuple[Agent, InMemorySink]:
    sink = InMemorySink()
    reviewer = kw.pop("reviewer", None)
    if callable(reviewer):
        reviewer = reviewer(sink)
    cfg = AgentConfig(**{"mode": "autonomous", **kw})
    return Agent(model, LocalWorkspace(root), cfg, sink=sink, reviewer=reviewer), sink


def last_user(model: ScriptedModel, call: int) -> str:
    return model.calls[call].messages[-1]["content"]


async def test_finish_ends_the_run_and_emits_the_trajectory(root: Path) -> None:
    model = ScriptedModel([act("read_file", "look", plan="1. read 2. finish", path="a.py"), FINISH])
    a, sink = agent(model, root)
    result = await a.run("Read a.py")
    assert (result.status, result.message, result.steps, result.model_calls) == (
        "finished", "done", 2, 2,
    )  # fmt: skip
    kinds = [e.kind for e in sink.events]
    assert kinds == [
        "run_started", "assistant", "tool_call", "observation", "assistant", "tool_call",
        "run_finished",
    ]  # fmt: skip
    assert [e.seq for e in sink.events] == list(range(1, len(kinds) + 1))
    obs = sink.of_kind("observation")[0].data
    assert "return 1" in obs["message"]["content"] and "def f()" in obs["files"]["a.py"]
    assert "return 1" in last_user(model, 1)  # the file text reached the model
    assert a.view.plan == "1. read 2. finish"
    assert model.calls[0].messages[1]["content"] == "Read a.py"
    c = sink.of_kind("assistant")[0].data["completion"]
    assert len(c["token_ids"]) == len(c["logprobs"]) > 0
    assert result.usage.completion_tokens == sum(
        len(e.data["completion"]["token_ids"]) for e in sink.of_kind("assistant")
    )
    assert model.calls[0].schema == action_schema()  # structured_actions defaults on


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


async def test_format_errors_are_reflected_to_the_model(root: Path) -> None:
    model = ScriptedModel(["not json", '{"tool": "delete_all", "args": {}}', FINISH])
    a, sink = agent(model, root)
    result = await a.run("t")
    assert result.status == "finished"
    assert "not valid JSON" in last_user(model, 1)
    assert "Unknown tool 'delete_all'" in last_user(model, 2)
    assert len(sink.of_kind("format_error")) == 2
    assert all(e.data["error"] for e in sink.of_kind("observation"))


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


async def test_tool_errors_are_observations_and_count(root: Path) -> None:
    model = ScriptedModel(
        [
            act("read_file", path="missing.py"),
            act("read_file", path="../outside.txt"),
            act("edit", path="a.py", search="return 2", replace="return 3"),
            FINISH,
        ]
    )
    a, sink = agent(model, root, max_format_errors=3)
    result = await a.run("t")
    assert "file_not_found" in last_user(model, 1)
    assert "path_outside_workspace" in last_user(model, 2)
    assert result.status == "too_many_errors" and len(model.calls) == 3
    assert (root / "a.py").read_text() == "def f():\n    return 1\n"  # the failed edit
    errors = [e.data["error"] for e in sink.of_kind("observation")]
    assert errors == [True, True, True]


async def test_failed_edit_shows_did_you_mean_and_changes_nothing(root: Path) -> None:
    model = ScriptedModel(
        [act("edit", path="a.py", search="def f():\n    return 2\n", replace="x"), FINISH]
    )
    a, sink = agent(model, root)
    await a.run("t")
    assert "Did you mean" in last_user(model, 1) and "return 1" in last_user(model, 1)
    assert (root / "a.py").read_text() == "def f():\n    return 1\n"
    assert sink.suggestions == []  # no proposal was made from a failed edit


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


async def test_interactive_accept_records_the_suggestion_before_review(root: Path) -> None:
    edit = act("edit", "bump", path="a.py", search="return 1", replace="return 2")
    model = ScriptedModel([edit, FINISH])
    a, sink = agent(
        model, root, mode="interactive", reviewer=lambda s: Person(s, [EditDecision.accept()])
    )
    result = await a.run("t")
    assert result.status == "finished"
    assert (root / "a.py").read_text() == "def f():\n    return 2\n"
    [(completion, proposal)] = sink.suggestions
    assert completion.text == edit  # the completion that produced the proposal
    assert proposal.before != proposal.after and "+    return 2" in proposal.diff
    assert proposal.thought == "bump" and len(proposal.hunks) == 1
    order = [entry for entry in sink.log if entry[0] != "event" or "edit" in entry[1]]
    assert order == [
        ("suggestion", proposal.id),
        ("event", "edit_proposed"),
        ("review", proposal.id),
        ("event", "edit_decision"),
    ]
    decision = sink.of_kind("edit_decision")[0].data
    assert decision["proposal_id"] == proposal.id and decision["decision"]["verdict"] == "accepted"
    assert "applied" in last_user(model, 1)


async def test_interactive_reject_sends_the_reason_to_the_model(root: Path) -> None:
    model = ScriptedModel([act("edit", path="a.py", search="return 1", replace="return 2"), FINISH])
    reject = EditDecision.reject("use a constant instead")
    a, sink = agent(model, root, mode="interactive", reviewer=lambda s: Person(s, [reject]))
    await a.run("t")
    assert "use a constant instead" in last_user(model, 1)
    assert (root / "a.py").read_text() == "def f():\n    return 1\n"
    assert len(sink.suggestions) == 1  # a rejected proposal is still a recorded suggestion


async def test_interactive_partial_accept_applies_only_chosen_hunks(root: Path) -> None:
    blocks = (
        "<<<<<<< SEARCH\nline 2\n=======\nLINE TWO\n>>>>>>> REPLACE\n"
        "<<<<<<< SEARCH\nline 28\n=======\nLINE TWENTY-EIGHT\n>>>>>>> REPLACE\n"
    )
    model = ScriptedModel([act("edit", path="long.txt", blocks=blocks), FINISH])
    person = lambda s: Person(s, [EditDecision.partial([1])])  # noqa: E731
    a, sink = agent(model, root, mode="interactive", reviewer=person)
    await a.run("t")
    text = (root / "long.txt").read_text()
    assert "LINE TWENTY-EIGHT" in text and "LINE TWO" not in text and "line 2\n" in text
    assert len(sink.suggestions[0][1].hunks) == 2
    assert "hunks [1] of 2" in last_user(model, 1)


async def test_commands_need_approval_in_interactive_mode(root: Path) -> None:
    touch = act("run_command", command="touch made.txt && echo made")
    model = ScriptedModel([touch, touch, FINISH])
    decisions = [CommandDecision(False, "not now"), True]
    a, sink = agent(model, root, mode="interactive", reviewer=lambda s: Person(s, [], decisions))
    await a.run("t")
    assert "declined" in last_user(model, 1) and "not now" in last_user(model, 1)
    assert "exit code: 0" in last_user(model, 2) and "made" in last_user(model, 2)
    assert (root / "made.txt").exists()
    approvals = [e.data["approved"] for e in sink.of_kind("command_approval")]
    assert approvals == [False, True]


async def test_autonomous_mode_edits_and_runs_directly(root: Path) -> None:
    model = ScriptedModel(
        [
            act("edit", path="new/b.py", search="", replace="X = 1\n"),
            act("run_command", command="python3 -c 'import sys; print(sys.argv)' && exit 3"),
            act("search", query="X = 1"),
            FINISH,
        ]
    )
    a, sink = agent(model, root)  # no reviewer at all
    assert (await a.run("t")).status == "finished"
    assert (root / "new/b.py").read_text() == "X = 1\n"
    assert "exit code: 3" in last_user(model, 2)
    assert "new/b.py:1: X = 1" in last_user(model, 3)
    verdicts = [e.data["decision"]["verdict"] for e in sink.of_kind("edit_decision")]
    assert verdicts == ["accepted"] and len(sink.suggestions) == 1


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


async def test_native_tool_calls(root: Path) -> None:
    def call(name: str, args: dict[str, str], cid: str) -> Completion:
        tc = [ToolCall(cid, name, json.dumps(args))]
        return Completion("", [7], [-0.1], "tool_calls", Usage(1, 1), "m", None, tool_calls=tc)

    model = ScriptedModel(
        [call("read_file", {"path": "a.py"}, "c1"), call("finish", {"message": "ok"}, "c2")]
    )
    a, _ = agent(model, root, native_tools=True)
    result = await a.run("t")
    assert result.status == "finished" and result.message == "ok"
    assert model.calls[0].tools and model.calls[0].schema is None
    answer = model.calls[1].messages[-1]
    assert answer["role"] == "tool" and answer["tool_call_id"] == "c1"
    assert model.calls[1].messages[-2]["tool_calls"][0]["id"] == "c1"


async def test_streamed_text_reaches_the_callback(root: Path) -> None:
    pieces: list[str] = []

    async def on_text(text: str) -> None:
        pieces.append(text)

    model = ScriptedModel([FINISH])
    cfg = AgentConfig(mode="autonomous")
    a = Agent(model, LocalWorkspace(root), cfg, on_text=on_text)
    assert (await a.run("t")).status == "finished"
    assert "".join(pieces) == FINISH and len(pieces) > 1


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


def reply(text: str, finish: str = "stop", calls: list[ToolCall] | None = None) -> Completion:
    return Completion(text, [1], [-0.1], finish, Usage(1, 1), "m", None, tool_calls=calls or [])


@settings(max_examples=200, deadline=None)
@given(thought=st.text(), path=st.text(), search=st.text(), replace=st.text())
def test_any_written_action_parses_back(thought: str, path: str, search: str, replace: str) -> None:
    args = {"path": path, "search": search, "replace": replace}
    text = json.dumps({"thought": thought, "tool": "edit", "args": args})
    action = parse_action(reply(text))
    assert (action.tool, action.args, action.thought) == ("edit", args, thought)


def test_parser_tolerates_what_small_models_write() -> None:
    assert parse_action(reply(FINISH, finish="length")).tool == "finish"  # closed just in time
    # Raw control characters inside strings (seen from vLLM's xgrammar): strict=False takes them.
    raw_newline = '{"thought": "a\nb", "tool": "finish", "args": {"message": "x\ny"}}'
    assert parse_action(reply(raw_newline)).args == {"message": "x\ny"}
    fenced = "```json\n" + FINISH + "\n```"
    assert parse_action(reply(fenced)).tool == "finish"
    prose = "Sure! " + FINISH + " Hope that helps."
    assert parse_action(reply(prose)).args == {"message": "done"}


@pytest.mark.parametrize(
    ("completion", "needle"),
    [
        (reply(FINISH[:30], finish="length"), "cut off"),
        (reply("[1, 2]"), "one JSON object"),
        (reply('{"args": {}}'), '"tool"'),
        (reply('{"tool": "read_file", "args": {"path": 3}}'), "must be a string"),
        (reply('{"tool": "read_file", "args": "a.py"}'), "JSON object"),
        (
            reply("", calls=[ToolCall("1", "list_dir", "{}"), ToolCall("2", "list_dir", "{}")]),
            "one",
        ),
    ],
)
def test_malformed_actions_say_what_to_fix(completion: Completion, needle: str) -> None:
    with pytest.raises(FormatError, match=needle):
        parse_action(completion)


@pytest.mark.slow
async def test_the_loop_drives_the_real_dev_model(dev_model_dir: Path, root: Path) -> None:
    """The parts fit: the real tokenizer, chat template and constrained decoding of the
    embedded backend behind the same loop (a tiny barely-trained model: its actions are
    noise, but every one must parse, be recorded with its tokens, and fit the budget)."""
    backend = EmbeddedBackend(EmbeddedConfig(model_dir=dev_model_dir, context_window=1024))
    sink = InMemorySink()
    person = Person(sink, [EditDecision.reject("no")] * 20, [False] * 20)  # nothing runs
    sampling = Sampling(max_tokens=96, temperature=1.0, seed=7)
    cfg = AgentConfig(step_limit=8, max_format_errors=8, sampling=sampling)
    try:
        a = Agent(backend, LocalWorkspace(root), cfg, sink=sink, reviewer=person)
        result = await a.run("Read a.py, then make f return 2.")
    finally:
        await backend.aclose()
    assert result.status in {"finished", "step_limit", "too_many_errors"}
    assert sink.of_kind("format_error") == []  # constrained decoding: always one valid action
    budget = int(cfg.context_budget_ratio * 1024)
    completions = [e.data["completion"] for e in sink.of_kind("assistant")]
    completions += [e.data["completion"] for e in sink.of_kind("summary")]
    assert len(completions) == result.model_calls >= 1
    for c in completions:
        assert len(c["token_ids"]) == len(c["logprobs"]) > 0
        assert all(lp <= 0 for lp in c["logprobs"])
        assert c["usage"]["prompt_tokens"] <= budget
    assert (root / "a.py").read_text() == "def f():\n    return 1\n"  # every edit rejected
