"""Inline completion (`completion.request` -> `completion.suggestion`).

One model call on a fill-in-the-middle chat prompt (the code before and after the cursor),
stored as a `suggestions` row (kind "completion", token ids, logprobs, adapter) BEFORE the
suggestion is sent. Long prefixes/suffixes are cut to what fits the context window, keeping
the code nearest the cursor. Nothing to run; tests/api/test_ws_session.py covers it.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

from agent_server.models.base import BackendUnavailable, Message, ModelError, Sampling
from agent_server.protocol import messages as p
from agent_server.protocol.errors import ApiError, ErrorCode

if TYPE_CHECKING:
    from agent_server.api.services import Services

SYSTEM = (
    "You complete code at the cursor. Reply with only the code that belongs at <CURSOR>: "
    "no explanation, no code fences, nothing that is already before or after the cursor."
)
CURSOR = "<CURSOR>"


def completion_prompt(path: str, language: str, prefix: str, suffix: str) -> list[Message]:
    lang = f" ({language})" if language else ""
    user = f"File: {path}{lang}\n\n{prefix}{CURSOR}{suffix}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def fit_prompt(services: Services, msg: p.CompletionRequest) -> list[Message]:
    """The prompt with prefix/suffix cut (far ends first) until it fits beside max_tokens."""
    backend = services.backend
    budget = backend.context_window - msg.max_tokens
    prefix, suffix = msg.prefix, msg.suffix
    while True:
        prompt = completion_prompt(msg.path, msg.language, prefix, suffix)
        if backend.count_tokens(prompt) <= budget or (not prefix and not suffix):
            return prompt
        # Halve the longer side, keeping the text next to the cursor.
        if len(prefix) >= len(suffix):
            prefix = prefix[len(prefix) // 2 :] if len(prefix) > 1 else ""
        else:
            suffix = suffix[: len(suffix) // 2] if len(suffix) > 1 else ""


async def complete_inline(services: Services, msg: p.CompletionRequest) -> p.CompletionSuggestion:
    prompt = fit_prompt(services, msg)
    sampling = Sampling(
        max_tokens=msg.max_tokens, temperature=services.config.completion_temperature
    )
    started = time.monotonic()
    try:
        completion = await services.backend.complete(prompt, sampling=sampling)
    except BackendUnavailable as exc:
        raise ApiError(ErrorCode.MODEL_UNAVAILABLE, str(exc)) from None
    except ModelError as exc:
        raise ApiError(ErrorCode.MODEL_ERROR, f"{exc.code}: {exc}") from None
    suggestion_id = str(uuid.uuid4())
    await services.store.record_suggestion(
        suggestion_id=suggestion_id,
        kind="completion",
        completion=completion,
        prompt=prompt,
        proposed=completion.text,
        session_id=msg.session_id,
        file_path=msg.path,
        sampling=sampling,
        latency_s=time.monotonic() - started,
    )
    return p.CompletionSuggestion(
        id=msg.id, suggestion_id=suggestion_id, text=completion.text, adapter=completion.adapter
    )
