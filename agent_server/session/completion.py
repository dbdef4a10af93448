"""Inline completion: one model call on the fill-in-the-middle prompt, stored, then returned.

    made = await complete_inline(backend, store, InlineRequest(path, language, prefix, suffix,
                                                               max_tokens), temperature=0.2)

The prompt is cut to fit the context window (prompts.fit_prompt, the code nearest the
cursor kept); the completion is stored as a `suggestions` row (kind "completion", token ids,
logprobs, adapter, prompt, latency) BEFORE it is returned, and a cancel during that write
does not leave half a record. Backend failures raise `ModelError` (`BackendUnavailable`
when the model is down); each transport words them for its person. Nothing to run;
tests/session/test_completion.py and the API and LSP tests cover it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

from agent_server.models.base import ModelBackend, Sampling
from agent_server.session.prompts import fit_prompt
from agent_server.session.store import Store


@dataclass(frozen=True)
class InlineRequest:
    path: str  # workspace-relative, for the prompt
    language: str
    prefix: str  # text before the cursor
    suffix: str
    max_tokens: int
    session_id: str | None = None  # the chat session it belongs to, if any


@dataclass(frozen=True)
class InlineSuggestion:
    suggestion_id: str  # stored before this object exists
    text: str
    adapter: str | None


async def complete_inline(
    backend: ModelBackend, store: Store, request: InlineRequest, *, temperature: float
) -> InlineSuggestion:
    r = request
    prompt = fit_prompt(backend, r.path, r.language, r.prefix, r.suffix, r.max_tokens)
    sampling = Sampling(max_tokens=r.max_tokens, temperature=temperature)
    started = time.monotonic()
    completion = await backend.complete(prompt, sampling=sampling)
    suggestion_id = str(uuid.uuid4())
    # Stored before anyone sees it; a cancel here must not leave half a record.
    await asyncio.shield(
        store.record_suggestion(
            suggestion_id=suggestion_id, kind="completion", completion=completion,
            prompt=prompt, proposed=completion.text, session_id=r.session_id,
            file_path=r.path, sampling=sampling, latency_s=time.monotonic() - started,
        )
    )  # fmt: skip
    return InlineSuggestion(suggestion_id, completion.text, completion.adapter)
