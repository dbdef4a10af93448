"""The agent loop with a scripted model on a real LocalWorkspace (real files, real commands).

Covers: finishing, format-error reflection, tool errors as observations, interactive accept /
reject / partial accept, command approval, the suggestion recorded before review with its
exact prompt and sampling, autonomous mode, native tool calls, streaming, the real dev model.
Limits, cancellation and errors that end a run: test_loop_limits.py; the action parser:
test_actions.py.
Run: .venv/bin/python -m pytest tests/agent/test_loop.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_server.agent.actions import action_schema
from agent_server.agent.config import AgentConfig
from agent_server.agent.events import EditDecision, InMemorySink
from agent_server.agent.loop import Agent
from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.tools import CommandDecision
from agent_server.agent.workspace import LocalWorkspace
from agent_server.models.base import Completion, Sampling, ToolCall, Usage
from agent_server.models.embedded import EmbeddedBackend
from agent_server.models.embedded_config import EmbeddedConfig
from tests.agent.loop_kit import FINISH, Person, act, agent, last_user


async def test_finish_ends_the_run_and_emits_the_trajectory(root: Path) -> None:
    model = ScriptedModel([act("read_file", "look", plan="1. read 2. finish", path="a.py"), FINISH])
    a, sink = agent(model, root, show_file_chars=0)  # a.py is not shown with the task
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
    assert model.calls[0].messages[-1]["content"] == "Read a.py"  # after the few-shot turns
    c = sink.of_kind("assistant")[0].data["completion"]
    assert len(c["token_ids"]) == len(c["logprobs"]) > 0
    assert result.usage.completion_tokens == sum(
        len(e.data["completion"]["token_ids"]) for e in sink.of_kind("assistant")
    )
    assert model.calls[0].schema == action_schema()  # structured_actions defaults on


async def test_format_errors_are_reflected_to_the_model(root: Path) -> None:
    model = ScriptedModel(["not json", '{"tool": "delete_all", "args": {}}', FINISH])
    a, sink = agent(model, root)
    result = await a.run("t")
    assert result.status == "finished"
    assert "not valid JSON" in last_user(model, 1)
    assert "Unknown tool 'delete_all'" in last_user(model, 2)
    assert len(sink.of_kind("format_error")) == 2
    assert all(e.data["error"] for e in sink.of_kind("observation"))


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
    other = act("run_command", command="touch made.txt && echo made it")  # a repeat is not asked
    model = ScriptedModel([touch, other, FINISH])
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


async def test_the_suggestion_records_the_exact_prompt_and_sampling(root: Path) -> None:
    # The plan the action brings changes the next prompt; the suggestion keeps the one the
    # model was given (asking the agent for its messages afterwards recorded the new plan).
    edit = act("edit", plan="1. bump f", path="a.py", search="return 1", replace="return 2")
    sampling = Sampling(max_tokens=300, temperature=0.7, seed=3)
    model = ScriptedModel([act("list_dir", path="."), edit, FINISH])
    a, sink = agent(model, root, sampling=sampling)
    assert (await a.run("t")).status == "finished"
    [(completion, _)] = sink.suggestions
    [(prompt, used)] = sink.prompts
    assert prompt == model.calls[1].messages and used == sampling == model.calls[1].sampling
    assert "1. bump f" not in json.dumps(prompt) and "1. bump f" in json.dumps(a.view.messages())
    ids = completion.prompt_token_ids
    assert ids is not None and len(ids) == model.calls[1].prompt_tokens


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
