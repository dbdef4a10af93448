"""The agent's edit tool takes the workspace's one edit path: `plan_edit` (with the
workspace's EditConfig), then the proposal, the review, and one `write_file`.

The workspace is a ClientWorkspace whose "editor" answers from a LocalWorkspace, so every
request the tool makes is logged, in both modes (autonomous, interactive).

Run: .venv/bin/python -m pytest tests/agent/test_edits_tool.py -q
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_server.agent.actions import Action
from agent_server.agent.client_workspace import (
    ClientWorkspace,
    ClientWorkspaceConfig,
    answer_request,
)
from agent_server.agent.edits import EditConfig, SearchReplace
from agent_server.agent.events import EditDecision, EditProposal, InMemorySink
from agent_server.agent.exceptions import ToolFailure
from agent_server.agent.tools import ModelCall, Toolbox, ToolConfig
from agent_server.agent.workspace import LocalWorkspace
from agent_server.models.base import Completion, Sampling, Usage

TEXT = "".join(f"line {i}\n" for i in range(1, 11)) + "\n\ndef f():\n    return 1\n"
CALL = ModelCall(Completion("{}", [1], [-0.1], "stop", Usage(1, 1), "m", None, [7]), [], Sampling())


class Editor:
    """The editor end: answers from a LocalWorkspace and logs the methods asked."""

    def __init__(self, root: Path) -> None:
        self.local, self.calls = LocalWorkspace(root), []

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(method)
        return await answer_request(self.local, method, params)


class Reviewer:
    def __init__(self, decision: EditDecision) -> None:
        self.decision, self.seen = decision, []

    async def review_edit(self, proposal: EditProposal) -> EditDecision:
        self.seen.append(proposal)
        return self.decision

    async def approve_command(self, command: str) -> bool:
        return False


@pytest.fixture
def editor(tmp_path: Path) -> Editor:
    (tmp_path / "a.py").write_text(TEXT)
    return Editor(tmp_path)


def toolbox(editor: Editor, reviewer: Reviewer | None = None, edits: EditConfig | None = None):
    ws = ClientWorkspace(editor.send, ClientWorkspaceConfig(edits=edits or EditConfig()))
    mode = "interactive" if reviewer else "autonomous"
    sink = InMemorySink()

    async def emit(kind: str, **data: Any) -> None:
        sink.log.append(("event", kind))

    return Toolbox(ws, ToolConfig(mode=mode), reviewer, sink, emit), sink


def edit(search: str, replace: str, path: str = "a.py") -> Action:
    return Action("edit", {"path": path, "search": search, "replace": replace})


async def test_autonomous_edit_plans_then_writes_once(editor: Editor, tmp_path: Path) -> None:
    plan = await editor.local.plan_edit("a.py", [SearchReplace("    return 1\n", "    return 2\n")])
    assert (tmp_path / "a.py").read_text() == TEXT  # a plan writes nothing
    tools, sink = toolbox(editor)
    result = await tools.execute(edit("    return 1\n", "    return 2\n"), CALL, 1)
    assert (tmp_path / "a.py").read_text() == plan.new_text == TEXT.replace("return 1", "return 2")
    assert editor.calls == ["read_file", "write_file"]
    assert result.files == {"a.py": plan.new_text}
    [(completion, proposal)] = sink.suggestions
    assert completion is CALL.completion
    assert (proposal.before, proposal.after, proposal.diff) == (
        plan.old_text, plan.new_text, plan.diff,
    )  # fmt: skip


async def test_the_workspace_edit_config_reaches_the_model(editor: Editor) -> None:
    # The hint shows at most hint_max_lines lines of the closest region.
    bad = edit("line 1\nline 2\nline 3\nline 4\nline 55\n", "x\n")
    tools, _ = toolbox(editor)
    with pytest.raises(ToolFailure, match="edit_failed") as wide:
        await tools.execute(bad, CALL, 1)
    assert "line 4\n" in str(wide.value)
    tools, sink = toolbox(editor, edits=EditConfig(hint_max_lines=2))
    with pytest.raises(ToolFailure, match="Did you mean lines 1-2") as narrow:
        await tools.execute(bad, CALL, 1)
    assert "line 2\n" in str(narrow.value) and "line 3\n" not in str(narrow.value)
    assert editor.calls.count("write_file") == 0 and sink.suggestions == []


async def test_interactive_review_decides_what_is_written(editor: Editor, tmp_path: Path):
    reject = Reviewer(EditDecision.reject("no"))
    tools, sink = toolbox(editor, reject)
    result = await tools.execute(edit("line 1\n", "line one\n"), CALL, 1)
    assert "no" in result.text and (tmp_path / "a.py").read_text() == TEXT
    assert editor.calls == ["read_file"] and len(sink.suggestions) == 1
    assert sink.log[0] == ("suggestion", reject.seen[0].id)  # recorded before the review
    editor.calls.clear()
    both = "line 1\nline 2\n" + "".join(f"line {i}\n" for i in range(3, 11)) + "\n\ndef f():\n"
    new = both.replace("line 1\n", "line one\n").replace("def f():", "def g():")
    partial = Reviewer(EditDecision.partial([1]))
    tools, _ = toolbox(editor, partial)
    await tools.execute(edit(both, new), CALL, 2)
    assert len(partial.seen[0].hunks) == 2
    assert (tmp_path / "a.py").read_text() == TEXT.replace("def f():", "def g():")
    assert editor.calls == ["read_file", "write_file"]


async def test_create_and_exact_placement_through_the_tool(editor: Editor, tmp_path: Path):
    tools, _ = toolbox(editor)
    await tools.execute(edit("", "X = 1\n", path="new/b.py"), CALL, 1)
    assert (tmp_path / "new" / "b.py").read_text() == "X = 1\n"
    with pytest.raises(ToolFailure, match="file_not_found.*To create it"):
        await tools.execute(edit("x", "y", path="missing.py"), CALL, 2)
    # A spurious blank line above SEARCH only: the two real blank lines above f stay.
    await tools.execute(edit("\n\n\ndef f():\n", "\n\ndef f(x):\n"), CALL, 3)
    assert (tmp_path / "a.py").read_text() == TEXT.replace("def f():", "def f(x):")
    with pytest.raises(ToolFailure, match="unchanged"):
        await tools.execute(edit("def f(x):\n", "def f(x):\n"), CALL, 4)
