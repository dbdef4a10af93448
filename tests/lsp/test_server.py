"""End to end over stdio: the real server process (`python -m lsp`), a pytest-lsp client.

The agent runs in the server process on a scripted model (tests/lsp/scripted_backend.py)
where a test needs a particular edit; everything else is real: the agent loop and tools,
the feedback database (SQLite and PostgreSQL), the LSP protocol. Afterwards the outcome
rows are read back from the database.
Run: .venv/bin/python -m pytest tests/lsp/test_server.py -q
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from sqlalchemy import select

from feedback.db import make_engine, make_sessionmaker
from feedback.models import Outcome, Suggestion
from tests.lsp.client import PYTHON, READ_ONLY, SCRIPTED, lsp_session, server_env
from tests.lsp.scripted_backend import action, write_script

SERVER = [PYTHON, "-m", "lsp"]
BUGGY = "def add(a, b):\n    return a - b\n\n\nprint(add(1, 2))\n"
FIXED = "def add(a, b):\n    return a + b\n\n\nprint(add(1, 2))\n"
FIX = action("edit", "subtract -> add", path="calc.py", search="return a - b",
             replace="return a + b")  # fmt: skip


def outcomes(url: str) -> dict[str, list[tuple[str, str | None, int | None]]]:
    """suggestion id -> [(outcome kind, reason, accepted_length)], in stored order."""
    engine = make_engine(url)
    try:
        with make_sessionmaker(engine)() as db:
            found: dict[str, list[tuple[str, str | None, int | None]]] = {
                s.id: [] for s in db.scalars(select(Suggestion))
            }
            for o in db.scalars(select(Outcome).order_by(Outcome.id)):
                found[o.suggestion_id].append((o.kind, o.reason, o.accepted_length))
            return found
    finally:
        engine.dispose()


def suggestion_kinds(url: str) -> dict[str, str]:
    engine = make_engine(url)
    try:
        with make_sessionmaker(engine)() as db:
            return {s.id: s.kind for s in db.scalars(select(Suggestion))}
    finally:
        engine.dispose()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "calc.py").write_text(BUGGY)
    return folder


def env_for(tmp_path: Path, url: str, **script: object) -> dict[str, str]:
    path = write_script(tmp_path / "script.json", **script)
    return server_env(tmp_path / "home", url, APPRENTICE_LSP_TEST_BACKEND=SCRIPTED,
                      APPRENTICE_LSP_TEST_SCRIPT=str(path))  # fmt: skip


def inline_params(uri: str, line: int, character: int) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Automatic),
        text_document=types.TextDocumentIdentifier(uri),
        position=types.Position(line, character),
    )


async def run_command(client, name: str, *args: object) -> object:
    params = types.ExecuteCommandParams(name, list(args))
    return await client.workspace_execute_command_async(params)


async def test_initialize_advertises_the_features(root: Path, tmp_path: Path, sqlite_url: str):
    # sqlite_url names a file that does not exist yet: the server migrates it on start.
    async with lsp_session(SERVER, env_for(tmp_path, sqlite_url), root) as (client, editor):
        assert editor.initialized is not None
        caps = editor.initialized.capabilities
        info = editor.initialized.server_info
        result = await run_command(client, "apprentice.status")
    assert info is not None and info.name == "apprentice"
    assert caps.inline_completion_provider is not None
    actions = caps.code_action_provider
    assert isinstance(actions, types.CodeActionOptions) and actions.resolve_provider is True
    assert set(actions.code_action_kinds or []) == {"quickfix", "refactor.rewrite"}
    assert caps.execute_command_provider is not None
    assert set(caps.execute_command_provider.commands) == {
        "apprentice.chat", "apprentice.accept", "apprentice.reject", "apprentice.status"
    }  # fmt: skip
    assert result["mode"] == "local" and result["server"] == "in-process"
    assert result["model"] == "scripted-test-model" and result["adapterVersion"] is None
    assert result["workspace"] == str(root.resolve())
    assert outcomes(sqlite_url) == {}  # the schema exists (migrated), nothing recorded yet


async def test_inline_completion_outcomes(root: Path, tmp_path: Path, db_url: str):
    env = env_for(tmp_path, db_url, completion="a + b")
    async with lsp_session(SERVER, env, root) as (client, editor):
        uri = editor.open("calc.py", BUGGY)
        ids = []
        for _ in range(4):
            got = await client.text_document_inline_completion_async(inline_params(uri, 1, 11))
            assert got is not None and len(got.items) == 1
            item = got.items[0]
            assert item.insert_text == "a + b"
            assert item.range == types.Range(types.Position(1, 11), types.Position(1, 11))
            assert item.command is not None and item.command.command == "apprentice.accept"
            ids.append(item.command.arguments[0]["suggestionId"])
            if len(ids) == 1:  # the item's own command: full acceptance
                done = await run_command(client, "apprentice.accept", *item.command.arguments)
                assert done == {"recorded": ["accepted"]}
                await run_command(client, "apprentice.accept", *item.command.arguments)  # twice
            elif len(ids) == 2:  # a client that took 2 of the 5 characters
                done = await run_command(client, "apprentice.accept",
                                         {"suggestionId": ids[1], "acceptedLength": 2})  # fmt: skip
                assert done == {"recorded": ["partially_accepted"]}
            # the 3rd is superseded by the 4th request; the 4th is dismissed:
        await run_command(client, "apprentice.reject", {"suggestionId": ids[3]})
        editor.close("calc.py")
    got_outcomes = outcomes(db_url)
    assert set(suggestion_kinds(db_url).values()) == {"completion"}
    assert got_outcomes[ids[0]] == [("shown", None, None), ("accepted", None, 5)]
    assert got_outcomes[ids[1]] == [("shown", None, None), ("partially_accepted", None, 2)]
    assert got_outcomes[ids[2]] == [("shown", None, None), ("rejected", "superseded", None)]
    assert got_outcomes[ids[3]] == [("shown", None, None), ("rejected", "dismissed", None)]


@pytest.mark.parametrize("answer", ["", "\n\n"], ids=["nothing", "blank-lines"])
async def test_an_empty_completion_shows_nothing(
    root: Path, tmp_path: Path, sqlite_head_url: str, answer: str
):
    env = env_for(tmp_path, sqlite_head_url, completion=answer)
    async with lsp_session(SERVER, env, root) as (client, editor):
        uri = editor.open("calc.py", BUGGY)
        first = await client.text_document_inline_completion_async(inline_params(uri, 1, 11))
        second = await client.text_document_inline_completion_async(inline_params(uri, 1, 11))
    assert first is not None and list(first.items) == []
    assert second is not None and list(second.items) == []
    # Nothing was shown, so nothing happened to it: no `shown`, and the second answer did
    # not supersede the first (no `rejected`).
    assert all(kinds == [] for kinds in outcomes(sqlite_head_url).values())


async def test_superseded_request_is_cancelled(root: Path, tmp_path: Path, sqlite_head_url: str):
    env = env_for(tmp_path, sqlite_head_url, completion="x", delay_s=1.0)
    async with lsp_session(SERVER, env, root) as (client, editor):
        uri = editor.open("calc.py", BUGGY)
        first = asyncio.ensure_future(
            client.text_document_inline_completion_async(inline_params(uri, 1, 4))
        )
        await asyncio.sleep(0.4)  # past the debounce: the first is waiting on the model
        second = await client.text_document_inline_completion_async(inline_params(uri, 1, 5))
        with pytest.raises(JsonRpcException) as cancelled:
            await first
        assert cancelled.value.code == -32800  # RequestCancelled
        assert second is not None and [i.insert_text for i in second.items] == ["x"]
    assert len(outcomes(sqlite_head_url)) == 1  # the superseded call stored nothing


async def test_code_action_resolved_and_applied(root: Path, tmp_path: Path, db_url: str):
    env = env_for(tmp_path, db_url, agent=[action("read_file", path="calc.py"), FIX])
    async with lsp_session(SERVER, env, root) as (client, editor):
        uri = editor.open("calc.py", BUGGY)
        bug = types.Diagnostic(
            types.Range(types.Position(1, 11), types.Position(1, 16)),
            "add() subtracts", severity=types.DiagnosticSeverity.Error, source="tests",
        )  # fmt: skip
        params = types.CodeActionParams(
            types.TextDocumentIdentifier(uri),
            types.Range(types.Position(1, 0), types.Position(1, 16)),
            types.CodeActionContext(diagnostics=[bug]),
        )
        offered = await client.text_document_code_action_async(params)
        assert offered is not None
        titles = {a.title: a for a in offered if isinstance(a, types.CodeAction)}
        assert set(titles) == {"Fix with Apprentice", "Edit with Apprentice"}
        fix = titles["Fix with Apprentice"]
        assert fix.kind == types.CodeActionKind.QuickFix and fix.edit is None
        resolved = await client.code_action_resolve_async(fix)
        assert resolved.edit is not None and resolved.command is not None
        editor.apply(resolved.edit)  # what the editor does with a resolved action...
        assert editor.texts[uri] == FIXED
        await run_command(client, resolved.command.command, *resolved.command.arguments)  # ...then
        assert (root / "calc.py").read_text() == BUGGY  # the editor owns the file: not saved
        progress = [type(v).__name__ for vs in client.progress_reports.values() for v in vs]
    ids = resolved.command.arguments[0]["suggestionIds"]
    assert len(ids) == 1
    assert suggestion_kinds(db_url) == {ids[0]: "edit"}
    # Accepted once, though both the didChange and the command said so (one event id).
    assert [kind for kind, _, _ in outcomes(db_url)[ids[0]]] == ["shown", "accepted"]
    assert progress[0] == "WorkDoneProgressBegin" and progress[-1] == "WorkDoneProgressEnd"


async def test_chat_applies_edits_with_progress(root: Path, tmp_path: Path, db_url: str):
    new_file = action("edit", "a test", path="test_calc.py", search="",
                      replace="from calc import add\n\nassert add(2, 2) == 4\n")  # fmt: skip
    revert = action("edit", path="calc.py", search="return a + b", replace="return a - b")
    script = [action("read_file", path="calc.py"), FIX, new_file,
              action("finish", message="Fixed add."), revert]  # fmt: skip
    env = env_for(tmp_path, db_url, agent=script)
    async with lsp_session(SERVER, env, root) as (client, editor):
        uri = editor.open("calc.py", BUGGY)
        result = await run_command(client, "apprentice.chat",
                                   {"message": "add() is wrong, fix it", "uri": uri})  # fmt: skip
        assert result["status"] == "finished" and result["message"] == "Fixed add."
        assert len(result["applied"]) == 2 and result["rejected"] == []
        assert editor.texts[uri] == FIXED
        assert editor.texts[editor.uri("test_calc.py")].startswith("from calc import add")
        assert len(editor.applied) == 2
        kinds = [type(v).__name__ for vs in client.progress_reports.values() for v in vs]
        assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
        assert "WorkDoneProgressReport" in kinds
        # A follow-up continues the session; this time the editor fails to apply the edit.
        editor.refuse_edits = True
        again = await run_command(client, "apprentice.chat", "and make it subtract again")
        assert again["sessionId"] == result["sessionId"]
        assert again["status"] == "finished"
    assert not (root / "test_calc.py").exists()  # applied to the editor's buffers only
    stored = outcomes(db_url)
    for sid in result["applied"]:
        assert stored[sid] == [("accepted", None, None)]  # the follow-up: after 30 s
    assert again["applied"] == [] and len(again["rejected"]) == 1
    # The editor's failure, not the person's verdict: no label for the learner.
    assert stored[again["rejected"][0]] == [("rejected", f"[editor] {READ_ONLY}", None)]


async def test_chat_refused_edit_reaches_the_agent(root: Path, tmp_path: Path, sqlite_head_url):
    env = env_for(tmp_path, sqlite_head_url, agent=[FIX])
    async with lsp_session(SERVER, env, root) as (client, editor):
        editor.refuse_edits = True
        uri = editor.open("calc.py", BUGGY)
        result = await run_command(client, "apprentice.chat", "fix add")
        assert result["applied"] == [] and len(result["rejected"]) == 1
        assert editor.texts[uri] == BUGGY
    stored = outcomes(sqlite_head_url)
    assert stored[result["rejected"][0]] == [("rejected", f"[editor] {READ_ONLY}", None)]
