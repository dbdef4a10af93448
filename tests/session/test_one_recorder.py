"""One recorder for every transport: the same scripted run through the WebSocket API (a
real server, the editor played by ProtocolClient) and through the language server's local
mode (LocalHost, the editor's workspace overlay) stores the same trajectory and the same
suggestion row: the prompt, its token ids, the completion's ids and logprobs, the sampling.
Run: .venv/bin/python -m pytest tests/session/test_one_recorder.py -q
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from agent_server.agent.events import EditDecision, EditProposal
from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.tools import CommandDecision
from agent_server.agent.workspace import LocalWorkspace
from agent_server.protocol.client import ProtocolClient
from feedback.db import make_engine, make_sessionmaker
from feedback.models import SessionEvent, Suggestion
from lsp.config import LspConfig
from lsp.local import LocalHost
from lsp.overlay import EditorWorkspace
from tests.api.server import TOKEN

pytestmark = pytest.mark.postgres
TASK = "set x to 2"


def script() -> list[str]:
    def act(tool: str, **args: str) -> str:
        return json.dumps({"thought": f"use {tool}", "tool": tool, "args": args})

    return [act("read_file", path="a.py"), act("edit", path="a.py", search="x = 1",
            replace="x = 2"), act("finish", message="x is 2 now")]  # fmt: skip


def project(root: Path) -> Path:
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    return root


class Editor:
    """The LSP side's Editor seam, accepting every edit."""

    def __init__(self, root: Path) -> None:
        self.workspace = EditorWorkspace(LocalWorkspace(root), open_text=lambda path: None)
        self.steps: list[str] = []

    async def review_edit(self, proposal: EditProposal) -> EditDecision:
        return EditDecision.accept()

    async def approve_command(self, command: str) -> CommandDecision:
        return CommandDecision(False)

    async def on_step(self, text: str) -> None:
        self.steps.append(text)


def stored(url: str, session_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The session's trajectory (kind, step, data; not times) and its suggestion row."""
    engine = make_engine(url)
    try:
        with make_sessionmaker(engine)() as s:
            rows = s.scalars(select(SessionEvent).where(SessionEvent.session_id == session_id)
                             .order_by(SessionEvent.seq)).all()  # fmt: skip
            events = [{k: r.payload[k] for k in ("kind", "step", "seq", "data")} for r in rows]
            [row] = s.scalars(select(Suggestion).where(Suggestion.session_id == session_id))
            fields = ("kind", "model", "prompt_messages", "prompt_token_ids", "completion_text",
                      "completion_token_ids", "completion_logprobs", "finish_reason",
                      "sampling", "proposed", "file_path")  # fmt: skip
            suggestion = {f: getattr(row, f) for f in fields} | {"id": row.id}
    finally:
        engine.dispose()
    return events, suggestion


def without_ids(events: list[dict[str, Any]], suggestion_id: str) -> str:
    """The trajectory as text with the proposal's random id taken out."""
    return json.dumps(events, sort_keys=True).replace(suggestion_id, "<id>")


async def test_the_api_and_the_lsp_record_the_same_run_alike(
    api_settings, serve, tmp_path: Path
) -> None:
    server = serve(api_settings, backend=ScriptedModel(script()))
    client = await ProtocolClient.connect(server.ws_url, TOKEN)
    try:
        info = await client.create_session(title="ws")
        log = await client.run_turn(info.session_id, TASK,
                                    workspace=LocalWorkspace(project(tmp_path / "ws")))  # fmt: skip
    finally:
        await client.close()
    assert log.done.status == "finished"

    config = LspConfig(database_url=api_settings.database_url, migrate=False)
    host = LocalHost(config, str(tmp_path), backend_factory=lambda: ScriptedModel(script()))
    editor = Editor(project(tmp_path / "lsp"))
    try:
        turn = await host.run_turn(TASK, editor, session_id=None, title="lsp")
    finally:
        await host.aclose()
    assert turn.status == "finished" and editor.steps == ["read_file a.py", "edit a.py",
                                                          "finish"]  # fmt: skip
    assert editor.workspace.changes == {"a.py": ("x = 1\n", "x = 2\n")}

    ws_events, ws_row = stored(api_settings.database_url, info.session_id)
    lsp_events, lsp_row = stored(api_settings.database_url, turn.session_id or "")
    assert ws_row.pop("id") != lsp_row.pop("id")
    assert ws_row == lsp_row  # the same prompt, ids, logprobs and sampling, streamed or not
    assert ws_row["prompt_token_ids"] and ws_row["completion_token_ids"]
    assert [e["kind"] for e in ws_events] == [e["kind"] for e in lsp_events]
    assert len(ws_events) == 12  # started, 2 steps with an observation, a proposal, its
    # decision, then finish (no observation) and run_finished

    ws_id = next(e["data"]["proposal"]["id"] for e in ws_events if e["kind"] == "edit_proposed")
    lsp_id = next(e["data"]["proposal"]["id"] for e in lsp_events if e["kind"] == "edit_proposed")
    assert without_ids(ws_events, ws_id) == without_ids(lsp_events, lsp_id)
