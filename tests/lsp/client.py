"""A pytest-lsp client that plays a real editor against the real server process over stdio.

    async with lsp_session(["python", "-m", "lsp"], env, root) as (client, editor):
        editor.open("a.py", "x = 1\\n")
        result = await client.text_document_inline_completion_async(...)

`TestEditor` keeps the client's copy of each document: it sends didOpen/didChange like an
editor and applies `workspace/applyEdit` requests (and resolved code actions) to its text,
then tells the server with didChange, as Neovim or VS Code would. `refuse_edits` makes it
answer applied=false (the editor failed); `after_apply[uri]` runs right after the answer
to that document's applyEdit went out (the person acting on an edit as soon as it lands).
It advertises what those editors do: documentChanges with file creation, code action
resolve for `edit`, work-done progress, inline completion and showMessageRequest.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp.text import apply_text_edits

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
SCRIPTED = "tests.lsp.scripted_backend:build"
READ_ONLY = "the document is read-only"  # why TestEditor refuses an edit (refuse_edits)


def server_env(home: Path, database_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPRENTICE_")}
    env |= {"APPRENTICE_HOME": str(home), "APPRENTICE_DATABASE_URL": database_url}
    env |= {"PYTHONPATH": str(REPO), "OMP_WAIT_POLICY": "PASSIVE"}
    return env | extra


def capabilities() -> types.ClientCapabilities:
    return types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(
            apply_edit=True,
            workspace_edit=types.WorkspaceEditClientCapabilities(
                document_changes=True,
                resource_operations=[types.ResourceOperationKind.Create],
            ),
            execute_command=types.ExecuteCommandClientCapabilities(),
        ),
        text_document=types.TextDocumentClientCapabilities(
            code_action=types.CodeActionClientCapabilities(
                data_support=True,
                resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"]),
            ),
            inline_completion=types.InlineCompletionClientCapabilities(),
        ),
        window=types.WindowClientCapabilities(
            work_done_progress=True,
            show_message=types.ShowMessageRequestClientCapabilities(),
        ),
    )


@dataclass
class TestEditor:
    client: LanguageClient
    root: Path
    texts: dict[str, str] = field(default_factory=dict)  # uri -> text
    versions: dict[str, int] = field(default_factory=dict)
    applied: list[types.ApplyWorkspaceEditParams] = field(default_factory=list)
    refuse_edits: bool = False
    after_apply: dict[str, Callable[[], None]] = field(default_factory=dict)
    initialized: types.InitializeResult | None = None

    def uri(self, path: str) -> str:
        uri = from_fs_path(str(self.root / path))
        assert uri is not None
        return uri

    def open(self, path: str, text: str, language: str = "python") -> str:
        uri = self.uri(path)
        self.texts[uri], self.versions[uri] = text, 1
        item = types.TextDocumentItem(uri, language, 1, text)
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(item))
        return uri

    def set_text(self, uri: str, text: str) -> None:
        self.texts[uri] = text
        self.versions[uri] += 1
        doc = types.VersionedTextDocumentIdentifier(self.versions[uri], uri)
        change = types.TextDocumentContentChangeWholeDocument(text)
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(doc, [change]))

    def apply(self, edit: types.WorkspaceEdit) -> None:
        """Apply a WorkspaceEdit as an editor does (version-checked) and send didChange."""
        for change in edit.document_changes or []:
            if isinstance(change, types.CreateFile):
                self.texts.setdefault(change.uri, "")
                self.versions.setdefault(change.uri, 0)
                continue
            assert isinstance(change, types.TextDocumentEdit)
            uri = change.text_document.uri
            version = change.text_document.version
            if version is not None and uri in self.versions:
                assert version == self.versions[uri], (version, self.versions[uri])
            new = apply_text_edits(self.texts.get(uri, ""), list(change.edits))  # type: ignore[arg-type]
            if uri in self.versions and self.versions[uri] > 0:
                self.set_text(uri, new)
            else:
                self.texts[uri], self.versions[uri] = new, 0  # not open: a buffer only
        for uri, edits in (edit.changes or {}).items():
            self.set_text(uri, apply_text_edits(self.texts.get(uri, ""), list(edits)))

    def close(self, path: str) -> None:
        uri = self.uri(path)
        ident = types.TextDocumentIdentifier(uri)
        self.client.text_document_did_close(types.DidCloseTextDocumentParams(ident))


@contextlib.asynccontextmanager
async def lsp_session(
    command: list[str], env: dict[str, str], root: Path, init_options: Any = None
) -> AsyncIterator[tuple[LanguageClient, TestEditor]]:
    config = ClientServerConfig(server_command=command, server_env=env)
    client: LanguageClient = await config.start()  # type: ignore[assignment]
    editor = TestEditor(client, root)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        editor.applied.append(params)
        if editor.refuse_edits:
            return types.ApplyWorkspaceEditResult(False, failure_reason=READ_ONLY)
        editor.apply(params.edit)
        for change in params.edit.document_changes or []:
            then = editor.after_apply.pop(getattr(change, "text_document", change).uri, None)
            if then is not None:  # call_soon: after this handler's answer is sent
                asyncio.get_running_loop().call_soon(then)
        return types.ApplyWorkspaceEditResult(True)

    try:
        editor.initialized = await asyncio.wait_for(
            client.initialize_session(
                types.InitializeParams(
                    capabilities=capabilities(),
                    root_uri=from_fs_path(str(root)),
                    workspace_folders=[types.WorkspaceFolder(from_fs_path(str(root)), "root")],
                    client_info=types.ClientInfo("apprentice-tests"),
                    initialization_options=init_options,
                )
            ),
            timeout=120,
        )
        yield client, editor
    finally:
        await stop(client)


async def stop(client: LanguageClient) -> None:
    """shutdown + exit; kill the process if it does not go in time (never leave it behind)."""
    try:
        await asyncio.wait_for(client.shutdown_session(), timeout=30)
        await asyncio.wait_for(client.stop(), timeout=10)
    except (TimeoutError, Exception):
        server = client._server  # type: ignore[attr-defined]
        if server is not None and server.returncode is None:
            server.kill()
            await server.wait()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.stop(), timeout=5)


async def raw_request(client: LanguageClient, method: str, params: Any) -> Any:
    """Send a request exactly as given (no client-side typing); the answer or its error."""
    from concurrent.futures import Future

    proto = client.protocol
    msg_id = f"raw-{uuid.uuid4().hex}"
    future: Future[Any] = Future()
    proto._request_futures[msg_id] = future  # the client's response handler resolves it
    proto._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return await asyncio.wrap_future(future)


def progress_kinds(client: LanguageClient) -> list[str]:
    """Every $/progress value kind received, in order, over all tokens."""
    kinds: list[str] = []
    for reports in client.progress_reports.values():
        for report in reports:
            kinds.append(getattr(report, "kind", type(report).__name__))
    return kinds


def unstructured(value: Any) -> Any:
    from lsprotocol.converters import get_converter

    return get_converter().unstructure(value)
