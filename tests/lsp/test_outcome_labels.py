"""Labels that mean what they say: follow-ups and chat-edit decisions, read back from PG.

A real agent server (uvicorn, PostgreSQL, the scripted model) runs in this process; the
real language server (`python -m lsp --server ws://...`) is a subprocess; a pytest-lsp client
plays the editor. The client asks for a 0.4 s settle time (initializationOptions), so each
follow-up is awaited by polling the database. Suggestions not taken are followed up with
`written`: what the person wrote at their place instead. The in-process mode (SQLite and
PostgreSQL): a resolved code action's accept is followed up the same way, rejections with
`written` too, and a bad settle option is logged to the editor without stopping the server.
Run: .venv/bin/python -m pytest tests/lsp/test_outcome_labels.py -q
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lsprotocol import types
from sqlalchemy import select

from feedback.db import make_engine, make_sessionmaker
from feedback.models import Outcome
from ground.settings import Settings
from tests.api.server import TOKEN, RunningServer, start_server
from tests.lsp.client import PYTHON, READ_ONLY, lsp_session, server_env
from tests.lsp.scripted_backend import action, model
from tests.lsp.test_server import BUGGY, FIX, FIXED, SERVER, env_for, inline_params, run_command

SETTLE = {"outcomeSettleSeconds": 0.4}
STUB = "def add(a, b):\n    return \n"  # the cursor at the end of line 1: character 11
DONE = "def add(a, b):\n    return a + b\n"  # ...once the completion "a + b" is taken
Row = tuple[str, str | None, str | None]  # (kind, reason, final_text)


def edit(path: str) -> str:
    return action("edit", path=path, search="return a - b", replace="return a + b")


def rows(url: str) -> dict[str, list[Row]]:
    """suggestion id -> its outcomes (kind, reason, final_text), in stored order."""
    engine = make_engine(url)
    try:
        with make_sessionmaker(engine)() as db:
            found: dict[str, list[Row]] = {}
            for o in db.scalars(select(Outcome).order_by(Outcome.id)):
                found.setdefault(o.suggestion_id, []).append((o.kind, o.reason, o.final_text))
            return found
    finally:
        engine.dispose()


async def settled(url: str, counts: dict[str, int], timeout: float = 20) -> dict[str, list[Row]]:
    """The rows once each suggestion has `counts[id]` outcomes (its follow-up stored)."""
    deadline = time.monotonic() + timeout
    while True:
        found = await asyncio.to_thread(rows, url)
        if all(len(found.get(sid, [])) >= n for sid, n in counts.items()):
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"no follow-up within {timeout}s: {found}")
        await asyncio.sleep(0.1)


def start_agent_server(tmp_path: Path, url: str, **script: object) -> RunningServer:
    settings = Settings(home=tmp_path / "server-home", database_url=url, token=TOKEN)
    return start_server(settings, backend=model(script))


@pytest.fixture
def remote(tmp_path: Path, pg_head_url: str) -> Iterator[tuple[list[str], dict[str, str]]]:
    """How to start the language server in front of a running agent server (PostgreSQL)."""
    agent = [edit("kept.py"), edit("undone.py"), edit("changed.py"), edit("rejected.py"),
             action("finish", message="Fixed four."), edit("refused.py")]  # fmt: skip
    server = start_agent_server(tmp_path, pg_head_url, completion="a + b", agent=agent)
    # The language server's own database is never used in remote mode: point it nowhere.
    env = server_env(tmp_path / "lsp-home", "sqlite:////nonexistent/never.db",
                     APPRENTICE_TOKEN=TOKEN)  # fmt: skip
    yield [PYTHON, "-m", "lsp", "--server", server.ws_url], env
    server.stop()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.mark.postgres
async def test_accepted_completions_are_followed_up(remote, root: Path, pg_head_url: str):
    command, env = remote
    # What the person does right after taking the completion (the editor inserted it and
    # ran the item's command): nothing, undo, change the completion, type elsewhere.
    then = {
        "kept.py": None,
        "undone.py": STUB,
        "changed.py": DONE.replace("a + b", "a * b"),
        "typed.py": "# adds\n" + DONE + "\nprint(add(1, 2))\n",
    }
    ids: dict[str, str] = {}
    async with lsp_session(command, env, root, init_options=SETTLE) as (client, editor):
        for name, after in then.items():
            (root / name).write_text(STUB)
            uri = editor.open(name, STUB)
            got = await client.text_document_inline_completion_async(inline_params(uri, 1, 11))
            assert got is not None and [i.insert_text for i in got.items] == ["a + b"]
            command_ = got.items[0].command
            assert command_ is not None
            editor.set_text(uri, DONE)
            assert await run_command(client, command_.command, *command_.arguments) == {
                "recorded": ["accepted"]}  # fmt: skip
            if after is not None:
                editor.set_text(uri, after)
            ids[name] = command_.arguments[0]["suggestionId"]
        stored = await settled(pg_head_url, {sid: 3 for sid in ids.values()})
    taken = [("shown", None, None), ("accepted", None, None)]
    assert stored[ids["kept.py"]] == [*taken, ("persisted", None, None)]
    assert stored[ids["undone.py"]] == [*taken, ("reverted", None, None)]
    # final_text: what the completion's span holds now, not the whole file
    assert stored[ids["changed.py"]] == [*taken, ("edited_after_accept", None, "a * b")]
    # Typing elsewhere in the file leaves the completion as it was taken.
    assert stored[ids["typed.py"]] == [*taken, ("persisted", None, None)]


@pytest.mark.postgres
async def test_chat_edits_are_decided_and_followed_up(remote, root: Path, pg_head_url: str):
    command, env = remote
    names = ["kept.py", "undone.py", "changed.py", "rejected.py", "refused.py"]
    async with lsp_session(command, env, root, init_options=SETTLE) as (client, editor):
        uris = {}
        for name in names:
            (root / name).write_text(BUGGY)
            uris[name] = editor.open(name, BUGGY)
        # As each edit lands the person undoes one and edits another (before it settles).
        editor.after_apply[uris["undone.py"]] = lambda: editor.set_text(uris["undone.py"], BUGGY)
        edited = FIXED + "# checked\n"
        editor.after_apply[uris["changed.py"]] = lambda: editor.set_text(uris["changed.py"],
                                                                          edited)  # fmt: skip
        first = await run_command(client, "apprentice.chat", "fix add everywhere")
        assert first["status"] == "finished" and len(first["applied"]) == 4
        kept, undone, changed, rejected = first["applied"]
        # The person looks at the last edit and rejects it, already applied.
        await run_command(client, "apprentice.reject", {"suggestionId": rejected,
                                                        "reason": "not this file"})  # fmt: skip
        editor.refuse_edits = True  # the editor cannot apply the next one
        second = await run_command(client, "apprentice.chat", "and refused.py")
        assert second["applied"] == [] and len(second["rejected"]) == 1
        assert editor.texts[uris["refused.py"]] == BUGGY
        stored = await settled(pg_head_url, {kept: 2, undone: 2, changed: 2})
        await asyncio.sleep(1.0)  # past another settle time: nothing more may come
        stored = await asyncio.to_thread(rows, pg_head_url)
    accepted = ("accepted", None, FIXED)
    assert stored[kept] == [accepted, ("persisted", None, None)]
    assert stored[undone] == [accepted, ("reverted", None, None)]
    assert stored[changed] == [accepted, ("edited_after_accept", None, edited)]
    # The person's rejection is the last word: its follow-up was cancelled.
    assert stored[rejected][0] == accepted
    assert stored[rejected][-1] == ("rejected", "not this file", None)
    # The editor's failure is marked as such (no label for the learner); nothing follows it.
    assert stored[second["rejected"][0]] == [("rejected", f"[editor] {READ_ONLY}", None)]


async def test_resolved_code_action_is_followed_up(tmp_path: Path, root: Path, db_url: str):
    (root / "calc.py").write_text(BUGGY)
    env = env_for(tmp_path, db_url, agent=[FIX])
    async with lsp_session(SERVER, env, root, init_options=SETTLE) as (client, editor):
        uri = editor.open("calc.py", BUGGY)
        params = types.CodeActionParams(
            types.TextDocumentIdentifier(uri),
            types.Range(types.Position(1, 0), types.Position(1, 16)),
            types.CodeActionContext(diagnostics=[]),
        )
        offered = await client.text_document_code_action_async(params)
        assert offered is not None and isinstance(offered[0], types.CodeAction)
        resolved = await client.code_action_resolve_async(offered[0])
        assert resolved.edit is not None and resolved.command is not None
        editor.apply(resolved.edit)  # the didChange accepts it, and so does the command:
        await run_command(client, resolved.command.command, *resolved.command.arguments)
        (sid,) = resolved.command.arguments[0]["suggestionIds"]
        stored = await settled(db_url, {sid: 3})
        await asyncio.sleep(0.8)  # accepted twice, followed up once
        stored = await asyncio.to_thread(rows, db_url)
    assert [kind for kind, _, _ in stored[sid]] == ["shown", "accepted", "persisted"]


async def test_a_bad_settle_option_is_logged_not_fatal(tmp_path: Path, root: Path, sqlite_head_url):
    env = env_for(tmp_path, sqlite_head_url)
    options = {"outcomeSettleSeconds": "soon"}
    async with lsp_session(SERVER, env, root, init_options=options) as (client, editor):
        assert editor.initialized is not None  # the server started all the same...
        warnings = [m.message for m in client.log_messages
                    if m.type == types.MessageType.Warning]  # fmt: skip
        status = await run_command(client, "apprentice.status")
    assert any("outcomeSettleSeconds" in w and "'soon'" in w for w in warnings), warnings
    assert status["mode"] == "local"  # ...and serves


@pytest.mark.postgres
async def test_completions_not_taken_are_followed_by_what_was_written(
    remote, root: Path, pg_head_url: str
):
    """Rejected, superseded or partially accepted: `written`, the settle time later, with
    what the person wrote at the completion's place (read back from PostgreSQL)."""
    command, env = remote
    line = "max(a, b)"  # the person's own line, at the place "a + b" was offered
    names = ["rejected.py", "quiet.py", "superseded.py", "partial.py"]
    async with lsp_session(command, env, root, init_options=SETTLE) as (client, editor):
        uris = {}
        for name in names:
            (root / name).write_text(STUB)
            uris[name] = editor.open(name, STUB)

        async def offer(name: str, character: int = 11) -> str:
            params = inline_params(uris[name], 1, character)
            got = await client.text_document_inline_completion_async(params)
            assert got is not None and [i.insert_text for i in got.items] == ["a + b"]
            assert got.items[0].command is not None
            return got.items[0].command.arguments[0]["suggestionId"]

        async def reject(sid: str) -> None:
            assert await run_command(client, "apprentice.reject", {"suggestionId": sid}) == {
                "recorded": ["rejected"]}  # fmt: skip

        def write(name: str, text: str) -> None:  # what the person typed at the place
            editor.set_text(uris[name], STUB.replace("return ", f"return {text}"))

        ids = {"rejected": await offer("rejected.py")}  # dismissed, then a line typed there
        await reject(ids["rejected"])
        write("rejected.py", line[:4])
        write("rejected.py", line)
        ids["quiet"] = await offer("quiet.py")  # dismissed; the person writes elsewhere only
        await reject(ids["quiet"])
        editor.set_text(uris["quiet.py"], "# adds\n" + STUB)
        # The person types on; the newer completion supersedes the first (and is dismissed):
        # it does not cancel the first one's follow-up.
        ids["superseded"] = await offer("superseded.py")
        write("superseded.py", line[:1])
        ids["newer"] = await offer("superseded.py", 12)
        await reject(ids["newer"])
        write("superseded.py", line)
        ids["partial"] = await offer("partial.py")  # "a " of "a + b" taken, then "* b" typed
        write("partial.py", "a ")
        assert await run_command(client, "apprentice.accept", {
            "suggestionId": ids["partial"], "acceptedLength": 2}) == {
            "recorded": ["partially_accepted"]}  # fmt: skip
        write("partial.py", "a * b")
        counts = {sid: 3 for sid in ids.values()} | {ids["partial"]: 4}
        await settled(pg_head_url, counts)
        await asyncio.sleep(1.0)  # past another settle time: at most one `written` each
        stored = await asyncio.to_thread(rows, pg_head_url)
    shown, dismissed = ("shown", None, None), ("rejected", "dismissed", None)
    assert stored[ids["rejected"]] == [shown, dismissed, ("written", None, line)]
    assert stored[ids["quiet"]] == [shown, dismissed, ("written", None, "")]
    assert stored[ids["superseded"]] == [shown, ("rejected", "superseded", None),
                                         ("written", None, line)]  # fmt: skip
    assert stored[ids["newer"]] == [shown, dismissed, ("written", None, line[1:])]
    first, *follow_ups = stored[ids["partial"]]
    assert [first, follow_ups[0]] == [shown, ("partially_accepted", None, None)]
    # The taken prefix is still there (persisted); what stands at the place is "a * b".
    assert sorted(follow_ups[1:]) == [("persisted", None, None), ("written", None, "a * b")]


async def test_in_process_rejections_are_followed_by_what_was_written(
    tmp_path: Path, root: Path, db_url: str
):
    """The in-process mode stores `written` too: a rejected code action (the person's own
    fix: the file's text) and a rejected completion (what was typed at its place)."""
    (root / "calc.py").write_text(BUGGY)
    (root / "stub.py").write_text(STUB)
    mine = BUGGY.replace("return a - b", "return sum((a, b))")
    env = env_for(tmp_path, db_url, completion="a + b", agent=[FIX])
    async with lsp_session(SERVER, env, root, init_options=SETTLE) as (client, editor):
        uri = editor.open("calc.py", BUGGY)
        params = types.CodeActionParams(
            types.TextDocumentIdentifier(uri),
            types.Range(types.Position(1, 0), types.Position(1, 16)),
            types.CodeActionContext(diagnostics=[]),
        )
        offered = await client.text_document_code_action_async(params)
        assert offered is not None and isinstance(offered[0], types.CodeAction)
        resolved = await client.code_action_resolve_async(offered[0])
        assert resolved.command is not None
        (action,) = resolved.command.arguments[0]["suggestionIds"]
        await run_command(client, "apprentice.reject", {"suggestionId": action,
                                                        "reason": "not like that"})  # fmt: skip
        editor.set_text(uri, mine)
        stub = editor.open("stub.py", STUB)
        got = await client.text_document_inline_completion_async(inline_params(stub, 1, 11))
        assert got is not None and got.items[0].command is not None
        completion = got.items[0].command.arguments[0]["suggestionId"]
        await run_command(client, "apprentice.reject", {"suggestionId": completion})
        editor.set_text(stub, STUB.replace("return ", "return b + a"))
        stored = await settled(db_url, {action: 3, completion: 3})
    shown = ("shown", None, None)
    assert stored[action] == [shown, ("rejected", "not like that", None), ("written", None, mine)]
    assert stored[completion] == [shown, ("rejected", "dismissed", None),
                                  ("written", None, "b + a")]  # fmt: skip
