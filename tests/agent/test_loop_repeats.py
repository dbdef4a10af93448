"""The loop's help for small models, driven by the ScriptedModel: a repeated failed or
declined action is not run again (the model is told; it counts as an error), small files the
task names are shown with it, an applied edit shows the file, few-shot example turns.

Run: .venv/bin/python -m pytest tests/agent/test_loop_repeats.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

from agent_server.agent import prompts
from agent_server.agent.events import InMemorySink
from agent_server.agent.loop import Agent
from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.task_files import paths_in
from agent_server.agent.tools import CommandDecision
from tests.agent.loop_kit import FINISH, Person, act, agent, last_user

BAD_EDIT = act("edit", path="a.py", search="return 2", replace="return 3")


async def test_a_repeated_failed_edit_is_not_run_and_the_model_is_told(root: Path) -> None:
    model = ScriptedModel([BAD_EDIT, BAD_EDIT, act("list_dir", path="."), FINISH])
    a, sink = agent(model, root, max_format_errors=3)
    result = await a.run("t")
    assert result.status == "finished"
    assert "edit failed" in last_user(model, 1)
    repeated = last_user(model, 2)
    assert "You repeated an action that already failed" in repeated and "edit" in repeated
    assert [e.data["error"] for e in sink.of_kind("observation")] == [True, True, False]


async def test_a_model_that_keeps_repeating_stops_with_a_clear_message(root: Path) -> None:
    model = ScriptedModel([BAD_EDIT] * 5)
    a, _ = agent(model, root, max_format_errors=3, step_limit=10)
    result = await a.run("t")
    assert (result.status, len(model.calls)) == ("too_many_errors", 3)
    assert "You repeated an action" in result.message  # the last error names the repeat


async def test_a_declined_command_is_not_asked_again(root: Path) -> None:
    sed = act("run_command", command="sed -i s/1/2/ a.py")
    model = ScriptedModel([sed, sed, FINISH])
    person: list[Person] = []

    def reviewer(sink: InMemorySink) -> Person:
        person.append(Person(sink, [], [CommandDecision(False, "no sed")]))
        return person[0]

    a, sink = agent(model, root, mode="interactive", reviewer=reviewer)
    result = await a.run("t")
    assert result.status == "finished"
    assert person[0].asked == ["sed -i s/1/2/ a.py"]  # asked once, not twice
    assert "already failed or was declined" in last_user(model, 2)
    assert "no sed" in last_user(model, 2)  # the refusal is quoted back
    assert len(sink.of_kind("command_approval")) == 1


async def test_a_change_makes_a_failed_action_worth_trying_again(root: Path) -> None:
    fix = act("edit", path="a.py", search="return 1", replace="return 2")
    model = ScriptedModel([BAD_EDIT, fix, BAD_EDIT, FINISH])
    a, _ = agent(model, root)
    assert (await a.run("t")).status == "finished"
    assert "applied" in last_user(model, 2)  # after the fix, the same edit ran and applied
    assert (root / "a.py").read_text() == "def f():\n    return 3\n"


async def test_the_same_read_only_action_twice_in_a_row_is_not_run(root: Path) -> None:
    ls = act("list_dir", path=".")
    model = ScriptedModel([ls, ls, FINISH])
    a, _ = agent(model, root)
    await a.run("t")
    assert "a.py" in last_user(model, 1)
    assert "You just did exactly this" in last_user(model, 2)


async def test_a_small_file_the_task_names_is_shown_and_not_read_again(root: Path) -> None:
    read = act("read_file", path="a.py")
    edit = act("edit", path="a.py", search="return 1", replace="return 2")
    model = ScriptedModel([read, edit, read, FINISH])
    a, sink = agent(model, root)
    await a.run("Fix a.py: f should return 2 (see also long.txt, missing.py).")
    task = model.calls[0].messages[-1]["content"]
    assert "The file a.py:\n```\ndef f():\n    return 1\n```" in task
    assert "The file long.txt:" in task and "missing.py:" not in task
    assert "You already have the text of a.py" in last_user(model, 1)
    applied = last_user(model, 2)  # an applied edit shows the small file as it is now
    assert "applied" in applied and "```\ndef f():\n    return 2\n```" in applied
    assert "return 2" in last_user(model, 3)  # after a change, reading is allowed again
    assert sink.of_kind("run_started")[0].data["shown"].startswith("\n\nThe file a.py:")


async def test_files_over_the_budget_are_not_shown(root: Path) -> None:
    model = ScriptedModel([FINISH])
    a, _ = agent(model, root, show_file_chars=30)  # a.py fits (22 chars), long.txt does not
    await a.run("Look at long.txt and a.py")
    task = model.calls[0].messages[-1]["content"]
    assert "The file a.py:" in task and "long.txt:" not in task
    model = ScriptedModel([FINISH])
    a, _ = agent(model, root, show_file_chars=0)
    await a.run("Look at a.py")
    assert model.calls[0].messages[-1]["content"] == "Look at a.py"


def test_paths_in_a_task() -> None:
    task = "Fix `src/app.py` and calc.py: e.g. add(1, 2) should be 3; see ./docs/x.md."
    # "e.g" looks like a path too: a word that is no file of the workspace is skipped later
    assert paths_in(task) == ["src/app.py", "calc.py", "e.g", "docs/x.md"]


async def test_few_shot_turns_come_before_the_task_with_json_actions_only(root: Path) -> None:
    model = ScriptedModel([FINISH])
    a, _ = agent(model, root)
    await a.run("t")
    messages = model.calls[0].messages
    examples = prompts.few_shot()
    assert messages[1 : 1 + len(examples)] == examples and messages[-1]["content"] == "t"
    for m in examples[1::2]:  # each example answer is a valid, compact edit action
        action = json.loads(m["content"])
        assert action["tool"] == "edit" and ", " not in m["content"].split('"args"')[0]
    model = ScriptedModel([FINISH])
    a, _ = agent(model, root, few_shot=False)
    await a.run("t")
    assert [m["role"] for m in model.calls[0].messages] == ["system", "user"]


async def test_resume_keeps_the_shown_files_and_the_examples(root: Path) -> None:
    model = ScriptedModel([act("list_dir", path="."), FINISH])
    a, sink = agent(model, root)
    await a.run("Fix a.py")
    first = model.calls[0].messages
    events = [e for e in sink.events if e.kind != "run_finished"][:-2]  # stop after step 1
    model2 = ScriptedModel([FINISH])
    a2 = Agent(model2, a.tools.ws, a.config, sink=InMemorySink())
    await a2.resume(events)
    assert model2.calls[0].messages[: len(first)] == first
