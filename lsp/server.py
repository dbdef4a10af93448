"""The Apprentice language server's state: a pygls `LanguageServer` subclass and its protocol.

    apprentice lsp                      # stdio (what editors start)
    apprentice lsp --tcp 127.0.0.1:8766 # one client over TCP
    apprentice lsp --server ws://127.0.0.1:8765/v1/ws   # a running agent server does the work

This module only holds the state; lsp/run.py builds the server (registers the features)
and runs it, so the features import this module without a cycle.

Features (small decorated handlers in lsp/features/): inline completion (LSP 3.18), code
actions with resolve, commands (apprentice.chat / accept / reject / status), workspace edits
and work-done progress. The agent runs behind the `AgentHost` seam (lsp/host.py): in this
process on the client's root folder (the default) or in a running agent server. Bad input
never stops the server: unknown documents and out-of-range positions are InvalidParams
errors, and params that do not match the LSP types (which pygls only logs, leaving the
request unanswered) get an InvalidParams answer here.
Tests: .venv/bin/python -m pytest tests/lsp -q
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import cattrs
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path

from ground import __version__
from lsp.config import LspConfig
from lsp.host import AgentHost, OutcomeRecord
from lsp.outcomes import OutcomeTracker

HostFactory = Callable[[str], AgentHost]  # client root folder -> host
_ANSWERED = object()  # a request that was already answered with an error


class ApprenticeProtocol(LanguageServerProtocol):
    """Answers requests whose params fail LSP validation instead of dropping them."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if not ("id" in data and "method" in data):
                raise  # a notification or a response: nobody waits for an answer
            cause = exc.__cause__
            detail = "; ".join(cattrs.transform_error(cause)) if isinstance(
                cause, cattrs.ClassValidationError) else str(cause or exc)  # fmt: skip
            error = JsonRpcInvalidParams(f"invalid params for {data['method']}: {detail}")
            self._send_response(data["id"], None, error.to_response_error())
            return _ANSWERED

    def handle_message(self, message: Any) -> None:
        if message is _ANSWERED:
            return
        super().handle_message(message)


class ApprenticeServer(LanguageServer):
    def __init__(self, config: LspConfig, host_factory: HostFactory) -> None:
        super().__init__("apprentice", __version__, protocol_cls=ApprenticeProtocol)
        self.config, self.host_factory = config, host_factory
        self._host: AgentHost | None = None
        self.root: str = os.getcwd()
        self.outcomes = OutcomeTracker(self._record, self.text_now, config.outcome_settle_s,
                                       read_open=self.open_text)  # fmt: skip
        self.inline_tasks: dict[str, asyncio.Task[Any]] = {}  # uri -> newest request
        self.chat_session: str | None = None  # the connection's current chat session
        self.chat_lock = asyncio.Lock()  # one chat turn at a time per connection
        self.warm_up: asyncio.Future[None] | None = None  # the host loading after initialized

    @property
    def host(self) -> AgentHost:
        if self._host is None:
            raise JsonRpcException("the server is not initialized yet", code=-32002)
        return self._host

    def open_host(self, root: str) -> None:
        self.root = root
        self._host = self.host_factory(root)

    async def _record(self, outcome: OutcomeRecord) -> None:
        await self.host.record_outcome(outcome)

    def open_text(self, uri: str) -> str | None:
        """A document's text in the editor's buffer; None when it is not open."""
        doc = self.workspace.text_documents.get(uri)
        return doc.source if doc is not None else None

    def text_now(self, uri: str) -> str | None:
        """A document's text as the editor has it: the open buffer, else the disk, else None."""
        docs = self.workspace.text_documents
        if uri in docs:
            return docs[uri].source
        path = to_fs_path(uri)
        if not path:
            return None
        real = os.path.realpath(path)
        for other, doc in list(docs.items()):  # the same file under another spelling
            fs = to_fs_path(other)
            if fs and os.path.realpath(fs) == real:
                return doc.source
        try:  # newline="": the file's own line ends, as a buffer would hold them
            with open(path, encoding="utf-8", errors="replace", newline="") as file:
                return file.read()
        except OSError:
            return None

    def in_root(self, uri: str) -> bool:
        from lsp.text import uri_path

        return uri_path(uri, self.root) not in (None, "", ".")

    def path_of(self, uri: str) -> str:
        """Workspace-relative path of a document; InvalidParams when outside the root."""
        from lsp.text import uri_path

        path = uri_path(uri, self.root)
        if path is None or path in ("", "."):
            raise JsonRpcInvalidParams(
                f"{uri} is not a file under the workspace root {self.root}; the agent only "
                "works inside the folder the editor opened"
            )
        return path

    async def close(self) -> None:
        if self.warm_up is not None:
            await asyncio.gather(self.warm_up, return_exceptions=True)
        await self.outcomes.close()
        if self._host is not None:
            await self._host.aclose()


def client_root(params: types.InitializeParams) -> str:
    """The folder the editor opened: first workspace folder, root URI, root path, or cwd."""
    uris = [f.uri for f in params.workspace_folders or []] + [params.root_uri or ""]
    for uri in uris:
        path = to_fs_path(uri) if uri else None
        if path and os.path.isdir(path):
            return os.path.realpath(path)
    if params.root_path and os.path.isdir(params.root_path):
        return os.path.realpath(params.root_path)
    return os.path.realpath(os.getcwd())
