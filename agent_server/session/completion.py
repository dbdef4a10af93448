"""Inline completion: one plain-text model call at the cursor, stored, then returned.

    made = await complete_inline(backend, store, InlineRequest(path, language, prefix, suffix,
                                                               max_tokens), temperature=0.2)

The prompt is plain text, never a chat: the model's fill-in-the-middle format when it has
one, else plain prefix completion (prompts.fit_inline_prompt, cut to fit the context window,
the code nearest the cursor kept), continued by `backend.complete_text` with stop strings
that end a line or a block. What the person sees is `InlinePrompt.shown`: code to insert at
the cursor, never wrapped in a markdown fence ("" when the model wrote nothing else). The
completion is stored as a `suggestions` row (kind "completion", the prompt as one plain-text
entry, its token ids as fed, the completion's ids and logprobs as sampled, `proposed` = the
text shown, adapter, latency) BEFORE it is returned, and a cancel during that write does
not leave half a record. Backend failures raise `ModelError` (`BackendUnavailable`
when the model is down); each transport words them for its person.

`call_inline(backend, request, temperature=...)` is the same prompt, sampling and model call
with nothing stored (an `InlineCall`: prompt, sampling, completion, `shown`): what
`complete_inline` stores, and what the completion benchmark (learner/synth/completion_eval.py,
`apprentice eval completions`) scores, so both measure the one serving path. Nothing to run;
tests/session/test_completion.py and the API and LSP tests cover it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

from agent_server.models.base import Completion, ModelBackend, Sampling
from agent_server.session.prompts import InlinePrompt, fit_inline_prompt
from agent_server.session.store import Store


@dataclass(frozen=True)
class InlineRequest:
    path: str  # workspace-relative, for the prompt
    language: str
    prefix: str  # text before the cursor
    suffix: str
    max_tokens: int
    session_id: str | None = None  # the chat session it belongs to, if any
    user_id: int | None = None  # who asked; None: the shared token


@dataclass(frozen=True)
class InlineSuggestion:
    suggestion_id: str  # stored before this object exists
    text: str
    adapter: str | None


@dataclass(frozen=True)
class InlineCall:
    """One inline completion's prompt, sampling and model call, before anything is stored."""

    prompt: InlinePrompt
    sampling: Sampling
    completion: Completion

    @property
    def shown(self) -> str:
        """What the person sees: the completion as code to insert at the cursor."""
        return self.prompt.shown(self.completion.text)


async def call_inline(
    backend: ModelBackend,
    request: InlineRequest,
    *,
    temperature: float,
    seed: int | None = None,
    adapter: str | None = None,
) -> InlineCall:
    """The product's inline prompt and decoding at `request`'s cursor, nothing stored.
    `adapter` None: the backend's serving default (a benchmark names the one it compares)."""
    r = request
    prompt = fit_inline_prompt(backend, r.path, r.language, r.prefix, r.suffix, r.max_tokens)
    infill = backend.infill() if prompt.infill else None
    sampling = Sampling(
        max_tokens=r.max_tokens, temperature=temperature, seed=seed, stop=prompt.stop,
        stop_token_ids=infill.stop_token_ids if infill else (),
    )  # fmt: skip
    named = {"adapter": adapter} if adapter is not None else {}
    completion = await backend.complete_text(prompt.text, sampling=sampling, **named)
    return InlineCall(prompt, sampling, completion)


async def complete_inline(
    backend: ModelBackend, store: Store, request: InlineRequest, *, temperature: float
) -> InlineSuggestion:
    r = request
    started = time.monotonic()
    call = await call_inline(backend, request, temperature=temperature)
    shown, completion = call.shown, call.completion
    suggestion_id = str(uuid.uuid4())
    # Stored before anyone sees it; a cancel here must not leave half a record.
    await asyncio.shield(
        store.record_suggestion(
            suggestion_id=suggestion_id, kind="completion", completion=completion,
            prompt=call.prompt.messages(), proposed=shown, session_id=r.session_id,
            file_path=r.path, sampling=call.sampling, latency_s=time.monotonic() - started,
            user_id=r.user_id,
        )
    )  # fmt: skip
    return InlineSuggestion(suggestion_id, shown, completion.adapter)
