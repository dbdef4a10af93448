"""Self-summarization: a long scripted session stays inside the token budget, keeps the task
and plan verbatim, emits summary events, and resumes from its stored events.

Run: .venv/bin/python -m pytest tests/agent/test_summarizer.py -q
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_server.agent import prompts
from agent_server.agent.events import Event, InMemorySink
from agent_server.agent.loop import Agent, AgentConfig
from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.summarizer import (
    ModelSummarizer,
    Step,
    SummarizerConfig,
    View,
    outline,
    rebuild_view,
)
from agent_server.agent.workspace import LocalWorkspace
from agent_server.models.base import Sampling

WINDOW = 3000  # tokens; ScriptedModel counts 4 characters a token
BUDGET = int(0.8 * WINDOW)
TASK = (
    "Refactor the parser in big.py.\n  Keep `parse()` stable -- don't break the API!\n"
    "Literal braces {like_this} and %s must survive."
)
PLAN = "1. read big.py\n2. run the checks\n3. finish"


def act(tool: str, **args: str) -> str:
    return json.dumps({"thought": "next", "tool": tool, "args": args})


def script(steps: int) -> list[Any]:
    """A session of `steps` model steps: reads, commands, listings, appends, then finish."""
    start = {"thought": "start", "plan": PLAN, "tool": "list_dir", "args": {"path": "."}}
    out: list[Any] = [json.dumps(start)]
    for i in range(1, steps - 1):
        out.append(
            [
                act("read_file", path="big.py"),
                act("run_command", command=f"echo step {i} && ls"),
                act("edit", path="notes.txt", search="", replace=f"note {i}\n"),
                act("read_file", path="huge.txt"),
                act("search", query="def f"),
            ][i % 5]
        )
    out.append(act("finish", message="all done"))
    return out


def summary(messages: list[dict[str, Any]]) -> str:
    n = messages[-1]["content"].count("[step ")
    return f"Summary covering {n} turn lines. " + "Facts: parse() kept; checks pass. " * 20


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "big.py").write_text(
        "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(60))
    )
    (tmp_path / "huge.txt").write_text("h" * 30_000)  # over the output cap: clipped
    return tmp_path


def make_agent(root: Path, model: ScriptedModel, **kw: Any) -> tuple[Agent, InMemorySink]:
    sink = InMemorySink()
    kw = {"few_shot": False, **kw}  # the task is messages[1] (the few-shot turns: elsewhere)
    cfg = AgentConfig(mode="autonomous", sampling=Sampling(max_tokens=300), **kw)
    return Agent(model, LocalWorkspace(root), cfg, sink=sink), sink


async def test_300_steps_stay_inside_the_budget(root: Path) -> None:
    model = ScriptedModel(script(300), summary=summary, context_window=WINDOW, chars_per_token=4)
    agent, sink = make_agent(root, model, step_limit=300, max_output_chars=12_000)
    result = await agent.run(TASK)
    assert (result.status, result.steps) == ("finished", 300)

    agent_calls = [c for c in model.calls if c.kind == "agent"]
    summary_calls = [c for c in model.calls if c.kind == "summary"]
    assert len(agent_calls) == 300 and len(summary_calls) >= 10
    for call in model.calls:  # every model call, summaries included
        assert model.count_tokens(call.messages) == call.prompt_tokens <= BUDGET
        assert call.prompt_tokens + call.sampling.max_tokens <= WINDOW
    for call in agent_calls:  # the task verbatim, in every context
        assert call.messages[0]["content"] == agent_calls[0].messages[0]["content"]
        assert call.messages[1]["content"].startswith(TASK)
    for call in summary_calls:
        assert TASK in call.messages[1]["content"]

    events = sink.of_kind("summary")
    assert len(events) == len(summary_calls) == result.model_calls - 300
    for e in events:
        c = e.data["completion"]
        assert c["text"].startswith("Summary covering")
        assert len(c["token_ids"]) == len(c["logprobs"]) > 0
        assert e.data["tokens_after"] < e.data["tokens_before"]
        assert e.data["plan"] == PLAN
    # After the last summary, the model saw it, the plan verbatim and the file outlines.
    last = events[-1]
    after = next(c for c in agent_calls if c.messages[1]["content"].count(last.data["summary"]))
    first_user = after.messages[1]["content"]
    assert PLAN in first_user and "def f0()" in first_user and "notes.txt" in first_user


async def test_resume_continues_from_the_last_summary(root: Path) -> None:
    model = ScriptedModel(script(300), summary=summary, context_window=WINDOW, chars_per_token=4)
    agent, sink = make_agent(root, model, step_limit=37)
    assert (await agent.run(TASK)).status == "step_limit"
    assert len(sink.of_kind("summary")) >= 2

    stored = [Event.from_dict(json.loads(json.dumps(e.to_dict()))) for e in sink.events]
    view = rebuild_view(stored)
    assert view.messages() == agent.view.messages()  # exactly the context the loop had
    last_summary = sink.of_kind("summary")[-1].data["summary"]
    assert view.summary == last_summary and view.task == TASK and view.plan == PLAN
    cut = sink.of_kind("summary")[-1].seq
    steps_after = {e.step for e in stored if e.kind == "observation" and e.seq > cut}
    assert steps_after <= {t.step for t in view.turns}

    more = [act("list_dir", path="."), act("finish", message="resumed")]
    model2 = ScriptedModel(more, summary=summary, context_window=WINDOW, chars_per_token=4)
    agent2, sink2 = make_agent(root, model2)
    result = await agent2.resume(stored)
    assert (result.status, result.message, result.steps) == ("finished", "resumed", 2)
    first = model2.calls[0]
    if first.kind == "agent":
        assert first.messages == view.messages()
    else:  # it was over budget: the new summary starts from the stored one
        assert last_summary in first.messages[1]["content"]
    assert sink2.events[0].kind == "run_started" and sink2.events[0].data["resumed"] is True
    assert sink2.events[0].seq == stored[-1].seq + 1


async def test_a_task_too_big_for_the_window_is_a_typed_end(root: Path) -> None:
    model = ScriptedModel([act("finish", message="x")], context_window=WINDOW, chars_per_token=4)
    agent, _ = make_agent(root, model)
    result = await agent.run("x" * 4 * WINDOW)
    assert result.status == "context_overflow" and "shorten the task" in result.message


async def test_summarize_fits_big_last_turns_and_clips_observations() -> None:
    model = ScriptedModel([], summary="S", context_window=WINDOW, chars_per_token=4)
    summarizer = ModelSummarizer(model, SummarizerConfig(keep_last_turns=3))

    def turn(i: int, n: int) -> Step:
        said = {"role": "assistant", "content": f"a{i}"}
        return Step(i, said, {"role": "user", "content": "o" * n})

    view = View(system="sys", task=TASK, plan=PLAN, turns=[turn(i, 400) for i in range(8)])
    view.turns.append(turn(8, 40_000))  # one enormous observation
    assert summarizer.should_summarize(view)
    new = await summarizer.summarize(view)
    assert summarizer.tokens(new) <= summarizer.target
    assert [t.step for t in new.turns] == [8]  # older kept turns dropped to fit
    assert "characters cut" in new.turns[0].observation["content"]
    assert new.task == TASK and new.plan == PLAN and new.summary == "S" and new.summaries == 1
    assert view.turns[-1].observation["content"] == "o" * 40_000  # the old view is untouched
    [request] = [c.messages for c in model.calls]
    assert prompts.is_summary_request(request) and model.count_tokens(request) <= summarizer.budget


def test_summarizer_config_is_validated() -> None:
    with pytest.raises(ValueError, match="target_ratio"):
        SummarizerConfig(budget_ratio=0.5, target_ratio=0.6)
    with pytest.raises(ValueError, match="keep_last_turns"):
        SummarizerConfig(keep_last_turns=-1)
    with pytest.raises(ValueError, match="max_summary_tokens"):
        ModelSummarizer(ScriptedModel([], context_window=1000), SummarizerConfig())


def test_outlines() -> None:
    py = "import os\n\nclass A:\n    def m(self): ...\n    async def n(self): ...\n\ndef g(): ...\n"
    assert outline("x.py", py) == "  class A: m, n  # line 3\n  def g()  # line 7"
    assert outline("x.md", "# Title\nbody\n") == "  # Title\n  body"
    assert outline("broken.py", "def (:\n") == "  def (:"


def test_rebuild_drops_a_turn_cut_off_mid_step() -> None:
    events = [
        Event("run_started", 0, {"system": "s", "task": "t", "mode": "autonomous"}, 1),
        Event("assistant", 1, {"message": {"role": "assistant", "content": "a"}}, 2),
        Event("observation", 1, {"message": {"role": "user", "content": "o"}, "files": {}}, 3),
        Event("assistant", 2, {"message": {"role": "assistant", "content": "b"}}, 4),
    ]
    view = rebuild_view(events)
    assert [t.step for t in view.turns] == [1]
    with pytest.raises(ValueError, match="run_started"):
        rebuild_view(events[1:])
