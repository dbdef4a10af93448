"""ClientWorkspace over an in-memory transport whose "editor" answers from a LocalWorkspace.

Requests and replies go through JSON (as they will over the WebSocket), so the wire format is
exercised too. Error replies must come back as the same WorkspaceError classes.

Run: .venv/bin/python -m pytest tests/agent/test_client_workspace.py -q
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent_server.agent.client_workspace import (
    ClientWorkspace,
    ClientWorkspaceConfig,
    answer_request,
)
from agent_server.agent.edits import EditError, SearchReplace
from agent_server.agent.workspace import LocalWorkspace, Workspace
from agent_server.agent.workspace_types import (
    FileNotFound,
    InvalidPattern,
    PathOutsideWorkspace,
    WorkspaceError,
    WorkspaceUnavailable,
)


class FakeEditor:
    """The editor end of the tool protocol, with a log of what it was asked."""

    def __init__(self, root: Path) -> None:
        self.local = LocalWorkspace(root)
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def send_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        wire = json.loads(json.dumps({"method": method, "params": params}))
        self.calls.append((wire["method"], wire["params"]))
        reply = await answer_request(self.local, wire["method"], wire["params"])
        return json.loads(json.dumps(reply))


@pytest.fixture
def editor(tmp_path: Path) -> FakeEditor:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("def main():\n    return 1\n")
    return FakeEditor(tmp_path)


@pytest.fixture
def ws(editor: FakeEditor) -> ClientWorkspace:
    return ClientWorkspace(editor.send_request)


async def test_every_method_round_trips(ws: ClientWorkspace, editor: FakeEditor, tmp_path: Path):
    assert isinstance(ws, Workspace)
    assert await ws.read_file("src/app.py") == "def main():\n    return 1\n"
    listing = await ws.list_dir(".", depth=2)
    assert [(e.path, e.kind) for e in listing.entries] == [("src", "dir"), ("src/app.py", "file")]
    found = await ws.search("return", path="src")
    assert [(m.path, m.line, m.text) for m in found.matches] == [("src/app.py", 2, "    return 1")]
    assert await ws.write_file("notes.txt", "hi\n") is True
    assert (tmp_path / "notes.txt").read_text() == "hi\n"
    ran = await ws.run_command(["cat", "notes.txt"], timeout_s=5)
    assert ran.exit_code == 0 and ran.output == "hi\n" and not ran.timed_out
    assert [m for m, _ in editor.calls] == [
        "read_file", "list_dir", "search", "write_file", "run_command",
    ]  # fmt: skip
    assert editor.calls[-1][1] == {
        "command": ["cat", "notes.txt"], "shell": False, "timeout_s": 5, "output_cap_bytes": 64000,
    }  # fmt: skip


async def test_apply_edit_reads_then_writes_once(ws: ClientWorkspace, editor: FakeEditor):
    result = await ws.apply_edit("src/app.py", [SearchReplace("return 1", "return 2")])
    assert "+    return 2" in result.diff
    assert await editor.local.read_file("src/app.py") == "def main():\n    return 2\n"
    assert [m for m, _ in editor.calls] == ["read_file", "write_file"]
    editor.calls.clear()
    with pytest.raises(EditError, match="Did you mean"):
        await ws.apply_edit("src/app.py", [SearchReplace("def mian():\n    return 2\n", "x")])
    assert [m for m, _ in editor.calls] == ["read_file"]  # nothing written on failure
    editor.calls.clear()
    plan = await ws.plan_edit("src/app.py", [SearchReplace("return 2", "return 3")])
    assert plan.new_text == "def main():\n    return 3\n"
    assert [m for m, _ in editor.calls] == ["read_file"]  # a plan writes nothing


async def test_error_replies_map_to_the_same_types(ws: ClientWorkspace) -> None:
    with pytest.raises(FileNotFound, match="does not exist"):
        await ws.read_file("nope.txt")
    with pytest.raises(PathOutsideWorkspace):
        await ws.read_file("../../etc/passwd")
    with pytest.raises(PathOutsideWorkspace):
        await ws.write_file("/tmp/evil", "x")
    with pytest.raises(InvalidPattern):
        await ws.search("(", regex=True)


async def test_transport_failures_are_workspace_unavailable() -> None:
    async def slow(method: str, params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(10)
        return {}

    async def broken(method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise ConnectionError("socket closed")

    async def weird(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "read_file":
            return {"result": {"text": 42}}
        return {"error": {"code": "brand_new_code", "message": "editor says no"}}

    fast = ClientWorkspaceConfig(timeout_s=0.2)
    with pytest.raises(WorkspaceUnavailable, match="did not answer read_file within 0.2 s"):
        await ClientWorkspace(slow, fast).read_file("a")
    with pytest.raises(WorkspaceUnavailable, match="socket closed"):
        await ClientWorkspace(broken).list_dir()
    with pytest.raises(WorkspaceUnavailable, match="malformed"):
        await ClientWorkspace(weird).read_file("a")
    with pytest.raises(WorkspaceError, match="editor says no") as info:
        await ClientWorkspace(weird).write_file("a", "b")
    assert type(info.value) is WorkspaceError


async def test_run_command_waits_for_the_command_timeout_plus_grace() -> None:
    seen: dict[str, Any] = {}

    async def editor(method: str, params: dict[str, Any]) -> dict[str, Any]:
        seen.update(params)
        await asyncio.sleep(0.3)  # longer than timeout_s, shorter than the command's budget
        return {"result": {"exit_code": 0, "output": "ok", "timed_out": False, "truncated": False}}

    ws = ClientWorkspace(editor, ClientWorkspaceConfig(timeout_s=0.1, command_grace_s=1.0))
    res = await ws.run_command("make test", timeout_s=0.5)
    assert res.output == "ok" and seen["timeout_s"] == 0.5 and seen["command"] == "make test"


async def test_answer_request_rejects_bad_requests(tmp_path: Path) -> None:
    local = LocalWorkspace(tmp_path)
    assert (await answer_request(local, "format_disk", {}))["error"]["code"] == "unknown_method"
    assert (await answer_request(local, "read_file", {}))["error"]["code"] == "invalid_request"
    reply = await answer_request(local, "read_file", {"path": "../x"})
    assert reply["error"]["code"] == "path_outside_workspace"


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        ClientWorkspaceConfig(timeout_s=0)
