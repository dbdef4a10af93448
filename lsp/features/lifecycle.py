"""initialize / initialized / shutdown, and the document notifications outcomes watch.

The host (where the agent runs) is made at `initialize`, on the folder the client opened,
and starts loading the model and the database at `initialized`, so the first completion
does not pay for it. `initializationOptions.outcomeSettleSeconds` sets the settle time of
follow-ups (lsp/followups.py); a bad value is logged to the editor and the default kept.
pygls keeps the open documents (didOpen/didChange/didClose); these handlers only tell the
outcome tracker (a closed document rejects what it still offered; a change that lands a
code action's edit accepts it).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from lsp.config import settle_option
from lsp.server import client_root

if TYPE_CHECKING:
    from lsp.server import ApprenticeServer

log = logging.getLogger(__name__)


def register(server: ApprenticeServer) -> None:
    @server.feature(types.INITIALIZE)
    def initialize(ls: ApprenticeServer, params: types.InitializeParams) -> None:
        ls.open_host(client_root(params))
        settle_s, problem = settle_option(params.initialization_options,
                                          ls.config.outcome_settle_s)  # fmt: skip
        ls.outcomes.follow.settle_s = settle_s
        if problem is not None:  # a bad option is the editor's to fix, not a failed start
            log.warning("%s", problem)
            ls.window_log_message(types.LogMessageParams(types.MessageType.Warning, problem))
        if params.client_info is not None:
            log.info("client %s %s", params.client_info.name, params.client_info.version or "")

    @server.feature(types.INITIALIZED)
    def initialized(ls: ApprenticeServer, params: types.InitializedParams) -> None:
        async def warm_up() -> None:
            try:
                await ls.host.start()
            except Exception:  # requests retry start() and report the error to the client
                log.exception("the agent host failed to start")

        ls.warm_up = asyncio.ensure_future(warm_up())

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: ApprenticeServer, params: None) -> None:
        await ls.close()

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: ApprenticeServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri in ls.workspace.text_documents:
            ls.outcomes.changed(uri, ls.workspace.get_text_document(uri).source)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: ApprenticeServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        task = ls.inline_tasks.pop(uri, None)
        if task is not None:
            task.cancel()
        ls.outcomes.closed(uri)
