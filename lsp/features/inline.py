"""textDocument/inlineCompletion (LSP 3.18): the model's continuation at the cursor.

Debounced and superseded per document: a request waits `debounce_ms`; a newer request for
the same document cancels it (answered RequestCancelled, -32800), also while the model is
generating, and the suggestion it had shown is rejected as superseded. The suggestion row
is stored before the item is returned; returning it records `shown`. The item's command
(`apprentice.accept`) reports acceptance; clients that accept part of it send
`apprentice.accept` with a smaller `acceptedLength` (partially_accepted). Either is followed
up after the settle time (lsp/followups.py: what became of the inserted text). One not taken
(rejected, superseded, or only partially accepted) is followed up with `written`: what the
person wrote at its position since, "" when nothing. An empty answer (the model wrote
nothing, or only blanks or a fence) shows nothing: no item, no `shown`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lsprotocol import types

from lsp.features.errors import request_errors
from lsp.host import InlineRequest
from lsp.text import offset_at, open_document

if TYPE_CHECKING:
    from lsp.server import ApprenticeServer


def register(server: ApprenticeServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: ApprenticeServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        uri = params.text_document.uri
        doc = open_document(ls, uri)
        offset = offset_at(doc, params.position)
        if not ls.in_root(uri):  # editors ask everywhere; the agent only works in its root
            return types.InlineCompletionList(items=[])
        path = ls.path_of(uri)
        text = doc.source  # the snapshot the position refers to
        this = asyncio.current_task()
        previous = ls.inline_tasks.get(uri)
        if previous is not None and previous is not this:
            previous.cancel()  # superseded: no answer from the model is wanted any more
        if this is not None:
            ls.inline_tasks[uri] = this
        ls.outcomes.superseded(uri, "inline")
        try:
            await asyncio.sleep(ls.config.debounce_ms / 1000)
            chars = ls.config.completion_context_chars
            request = InlineRequest(
                path=path,
                language=doc.language_id or "",
                prefix=text[max(0, offset - chars) : offset],
                suffix=text[offset : offset + chars // 2],
                max_tokens=ls.config.completion_max_tokens,
            )
            async with request_errors("inline completion"):
                suggestion = await ls.host.complete_inline(request)
            if not suggestion.text.strip():
                return types.InlineCompletionList(items=[])
            ls.outcomes.offered(uri, "inline", [suggestion.suggestion_id],
                                text=suggestion.text, offset=offset, doc=text)  # fmt: skip
            async with request_errors("recording the shown outcome"):
                await asyncio.shield(ls.outcomes.write(suggestion.suggestion_id, "shown"))
        finally:
            if ls.inline_tasks.get(uri) is this:
                del ls.inline_tasks[uri]
        accept = types.Command(
            "Apprentice: accepted",
            "apprentice.accept",
            arguments=[
                {"suggestionId": suggestion.suggestion_id, "acceptedLength": len(suggestion.text)}
            ],
        )
        here = types.Range(params.position, params.position)
        item = types.InlineCompletionItem(suggestion.text, range=here, command=accept)
        return types.InlineCompletionList(items=[item])
