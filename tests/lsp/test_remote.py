"""Remote mode: `python -m lsp --server ws://.../v1/ws` in front of a real agent server.

The agent server (uvicorn, real WebSocket, PostgreSQL) runs in this process on the scripted
model; the language server is a subprocess speaking its protocol as the editor would. The
suggestions and outcomes land in the agent server's database.
Run: .venv/bin/python -m pytest tests/lsp/test_remote.py -q
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from lsprotocol import types

from ground.settings import Settings
from tests.api.server import TOKEN, RunningServer, start_server
from tests.lsp.client import PYTHON, lsp_session, raw_request, server_env, unstructured
from tests.lsp.scripted_backend import model
from tests.lsp.test_server import BUGGY, FIX, FIXED, inline_params, outcomes, run_command


@pytest.fixture
def agent_server(tmp_path: Path, pg_head_url: str) -> Iterator[RunningServer]:
    settings = Settings(home=tmp_path / "server-home", database_url=pg_head_url, token=TOKEN)
    server = start_server(settings, backend=model({"completion": "a + b", "agent": [FIX]}))
    yield server
    server.stop()


@pytest.mark.postgres
async def test_remote_mode_end_to_end(tmp_path: Path, agent_server: RunningServer, pg_head_url):
    root = tmp_path / "project"
    root.mkdir()
    (root / "calc.py").write_text(BUGGY)
    # The language server's own database is never used in remote mode: point it nowhere.
    env = server_env(tmp_path / "lsp-home", "sqlite:////nonexistent/never.db",
                     APPRENTICE_TOKEN=TOKEN)  # fmt: skip
    command = [PYTHON, "-m", "lsp", "--server", agent_server.ws_url]
    async with lsp_session(command, env, root) as (client, editor):
        assert editor.initialized is not None
        actions = editor.initialized.capabilities.code_action_provider
        assert isinstance(actions, types.CodeActionOptions) and actions.resolve_provider is False
        status = await run_command(client, "apprentice.status")
        assert status["mode"] == "remote" and status["server"] == agent_server.ws_url
        assert status["model"] == "scripted-test-model"

        uri = editor.open("calc.py", BUGGY)
        got = await client.text_document_inline_completion_async(inline_params(uri, 1, 11))
        assert got is not None and [i.insert_text for i in got.items] == ["a + b"]
        item = got.items[0]
        assert item.command is not None
        await run_command(client, "apprentice.accept", *item.command.arguments)
        completion_id = item.command.arguments[0]["suggestionId"]

        params = types.CodeActionParams(
            types.TextDocumentIdentifier(uri),
            types.Range(types.Position(1, 0), types.Position(1, 16)),
            types.CodeActionContext(diagnostics=[]),
        )
        # Read raw: lsprotocol's client-side union structures a CodeAction that carries a
        # command (and no edit) as a Command; editors look at the JSON, and so does this.
        offered = await raw_request(client, "textDocument/codeAction", unstructured(params))
        assert [a["title"] for a in offered] == ["Edit with Apprentice"]
        action = offered[0]
        assert "data" not in action and action["command"]["command"] == "apprentice.chat"
        result = await run_command(client, "apprentice.chat", *action["command"]["arguments"])
        assert result["status"] == "finished" and len(result["applied"]) == 1
        assert editor.texts[uri] == FIXED
    stored = outcomes(pg_head_url)
    assert stored[completion_id] == [("shown", None, None), ("accepted", None, 5)]
    # An applied chat edit is accepted, once (its follow-up comes after the 30 s default).
    assert [kind for kind, _, _ in stored[result["applied"][0]]] == ["accepted"]
    assert (root / "calc.py").read_text() == BUGGY
