"""Bad input gets JSON-RPC errors and the server keeps serving (real server process, stdio).

Unknown documents, positions out of range, malformed params (which pygls alone would log
and leave unanswered), bad command arguments, unknown suggestion ids, foreign files; then a
seeded fuzz of random params over every method the server has. After each batch a normal
request must still work, and every request must have been answered.
Run: .venv/bin/python -m pytest tests/lsp/test_bad_input.py -q
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.lsp.client import PYTHON, SCRIPTED, lsp_session, raw_request, server_env
from tests.lsp.scripted_backend import write_script
from tests.lsp.test_server import BUGGY, inline_params

INVALID_PARAMS, METHOD_NOT_FOUND = -32602, -32601
METHODS = [
    "textDocument/inlineCompletion",
    "textDocument/codeAction",
    "codeAction/resolve",
    "workspace/executeCommand",
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "calc.py").write_text(BUGGY)
    return folder


@pytest.fixture
def env(tmp_path: Path, sqlite_head_url: str) -> dict[str, str]:
    script = write_script(tmp_path / "script.json", completion="ok")
    return server_env(tmp_path / "home", sqlite_head_url, APPRENTICE_LSP_TEST_BACKEND=SCRIPTED,
                      APPRENTICE_LSP_TEST_SCRIPT=str(script))  # fmt: skip


async def error_of(request: Any) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as caught:
        await asyncio.wait_for(request, timeout=30)
    return caught.value


async def still_serving(client: Any, uri: str) -> None:
    got = await asyncio.wait_for(
        client.text_document_inline_completion_async(inline_params(uri, 0, 0)), timeout=30
    )
    assert got is not None and [i.insert_text for i in got.items] == ["ok"]


def command(name: str, *args: Any) -> types.ExecuteCommandParams:
    return types.ExecuteCommandParams(name, list(args))


async def test_typed_errors_for_bad_requests(root: Path, env: dict[str, str], tmp_path: Path):
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x = 1\n")
    async with lsp_session([PYTHON, "-m", "lsp"], env, root) as (client, editor):
        uri = editor.open("calc.py", BUGGY)
        foreign = editor.uri("../elsewhere.py")
        editor.open("../elsewhere.py", "x = 1\n")
        cases = {
            "unknown document": client.text_document_inline_completion_async(
                inline_params(editor.uri("nope.py"), 0, 0)),
            "line out of range": client.text_document_inline_completion_async(
                inline_params(uri, 99, 0)),
            "character out of range": client.text_document_inline_completion_async(
                inline_params(uri, 0, 200)),
            "reversed range": client.text_document_code_action_async(types.CodeActionParams(
                types.TextDocumentIdentifier(uri),
                types.Range(types.Position(2, 0), types.Position(0, 0)),
                types.CodeActionContext(diagnostics=[]))),
            "outside the root": client.workspace_execute_command_async(
                command("apprentice.chat", {"message": "hi", "uri": foreign})),
            "foreign resolve data": client.code_action_resolve_async(
                types.CodeAction("Fix with Apprentice", data={"evil": True})),
            "no resolve data": client.code_action_resolve_async(types.CodeAction("x")),
            "unknown command": client.workspace_execute_command_async(command("rm.rf")),
            "accept without id": client.workspace_execute_command_async(
                command("apprentice.accept", {"acceptedLength": 3})),
            "accept unknown id": client.workspace_execute_command_async(
                command("apprentice.accept", {"suggestionId": "not-a-suggestion"})),
            "negative length": client.workspace_execute_command_async(
                command("apprentice.accept", {"suggestionId": "x", "acceptedLength": -1})),
            "empty chat": client.workspace_execute_command_async(
                command("apprentice.chat", {"message": "  "})),
            "chat on unknown doc": client.workspace_execute_command_async(
                command("apprentice.chat", {"message": "hi", "uri": "file:///nope.py"})),
            "malformed params": raw_request(client,
                "textDocument/inlineCompletion", {"textDocument": 5, "position": "here"}),
            "params of the wrong shape": raw_request(client, "textDocument/codeAction", [1, 2]),
        }  # fmt: skip
        errors = {name: await error_of(request) for name, request in cases.items()}
        unknown = await error_of(raw_request(client, "apprentice/nonsense", {}))
        # Editors ask about every open file: outside the root there is simply nothing.
        quiet = await client.text_document_inline_completion_async(inline_params(foreign, 0, 0))
        assert quiet is not None and list(quiet.items) == []
        await still_serving(client, uri)
    assert {name: e.code for name, e in errors.items()} == dict.fromkeys(cases, INVALID_PARAMS)
    assert unknown.code == METHOD_NOT_FOUND
    assert "didOpen" in errors["unknown document"].message
    assert "outside" in errors["line out of range"].message
    assert "line 0 has 14 characters" in errors["character out of range"].message
    assert "workspace root" in errors["outside the root"].message
    assert "textDocument/inlineCompletion" in errors["malformed params"].message


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["int", "str", "none", "bool", "float"] + (["list", "dict"] if depth < 3 else [])
    kind = rng.choice(kinds)
    if kind == "int":
        return rng.choice([0, -1, 1, 2**31, -(2**40), rng.randint(-5, 500)])
    if kind == "str":
        return rng.choice(["", "file:///x.py", "\x00", "é" * 3, "apprentice.accept", "a" * 300])
    if kind == "none":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "float":
        return rng.choice([0.5, -1e308, float("1e10")])
    if kind == "list":
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = ["textDocument", "position", "range", "context", "uri", "line", "character"]
    keys += ["data", "command", "arguments", "title", "start", "end", "diagnostics", "triggerKind"]
    return {rng.choice(keys): _random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def _mutated(rng: random.Random, uri: str) -> tuple[str, Any]:
    """A request that is nearly valid: a real shape with one value replaced at random."""
    method = rng.choice(METHODS)
    valid: dict[str, Any] = {
        "textDocument/inlineCompletion": {
            "textDocument": {"uri": uri}, "position": {"line": 0, "character": 0},
            "context": {"triggerKind": 1}},
        "textDocument/codeAction": {
            "textDocument": {"uri": uri},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}},
            "context": {"diagnostics": []}},
        "codeAction/resolve": {"title": "Edit with Apprentice", "data": {
            "kind": "edit", "uri": uri, "version": 1, "range": [0, 0, 1, 0]}},
        "workspace/executeCommand": {"command": "apprentice.accept",
                                     "arguments": [{"suggestionId": "x"}]},
    }[method]  # fmt: skip
    if rng.random() < 0.3:
        return method, _random_value(rng)
    params = valid
    node: Any = params
    while isinstance(node, dict) and node and rng.random() < 0.7:
        key = rng.choice(list(node))
        if not isinstance(node[key], dict) or rng.random() < 0.4:
            node[key] = _random_value(rng)
            break
        node = node[key]
    return method, params


async def test_fuzzed_params_are_all_answered(root: Path, env: dict[str, str]):
    rng = random.Random(6)
    async with lsp_session([PYTHON, "-m", "lsp"], env, root) as (client, editor):
        uri = editor.open("calc.py", BUGGY)
        answered = errors = 0
        codes: dict[int, int] = {}
        for batch in range(6):
            requests = [raw_request(client, *_mutated(rng, uri)) for _ in range(50)]
            results = await asyncio.wait_for(
                asyncio.gather(*requests, return_exceptions=True), timeout=120
            )
            for r in results:
                assert not isinstance(r, (TimeoutError, asyncio.CancelledError)), (batch, r)
                answered += 1
                errors += isinstance(r, JsonRpcException)
                if isinstance(r, JsonRpcException):
                    codes[r.code] = codes.get(r.code, 0) + 1
            await still_serving(client, uri)
    assert answered == 300 and errors > 150  # most are rejected, none is left hanging
    # Typed answers only: InvalidParams, RequestFailed, cancelled/modified; no crash (-32603).
    assert set(codes) <= {INVALID_PARAMS, -32803, -32800, -32801}, codes
    assert codes[INVALID_PARAMS] > 100


async def test_a_missing_model_is_a_typed_error(root: Path, tmp_path: Path, sqlite_head_url):
    # The real backend factory (no test hook) on a model folder that does not exist.
    env = server_env(tmp_path / "home", sqlite_head_url,
                     APPRENTICE_MODEL_NAME=str(tmp_path / "no-model"))  # fmt: skip
    async with lsp_session([PYTHON, "-m", "lsp"], env, root) as (client, editor):
        uri = editor.open("calc.py", BUGGY)
        failed = await error_of(
            client.text_document_inline_completion_async(inline_params(uri, 1, 4))
        )
        status = await error_of(
            client.workspace_execute_command_async(command("apprentice.status"))
        )
    assert failed.code == status.code == -32803  # RequestFailed, with the reason
    assert "config.json" in failed.message and "build-dev" in failed.message
