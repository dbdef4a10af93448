"""The `ModelBackend` seam: the only interface through which Apprentice talks to a model.

Implementations: `openai_http.OpenAIBackend` (vLLM or any OpenAI-compatible server) and
`embedded.EmbeddedBackend` (transformers + peft in-process on the CPU). Both return the
sampled tokens' ids and behaviour logprobs with every completion: the learner's off-policy
correction needs them, so they are not optional.

Every completion also names the exact prompt token ids the backend fed the model
(`prompt_token_ids`), streamed or not: the learner trains on those ids as they are and never
renders a chat again. Backends that load LoRA adapters at runtime are also `AdapterHost`s.

`complete_text` continues plain text (no chat template): inline completions use it, in the
model's fill-in-the-middle format when `infill()` names one (fim.py).

Messages are OpenAI-style chat dicts: {"role": "system"|"user"|"assistant"|"tool",
"content": str, ...}.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from agent_server.models.fim import Infill

Message = dict[str, Any]


@dataclass(frozen=True)
class Sampling:
    """How to sample one completion."""

    max_tokens: int = 256
    temperature: float = 0.7
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()  # more tokens that end it (a fill-in-the-middle pad)

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the model wrote it


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Completion:
    """One sampled completion, with what the learner needs to learn from it."""

    text: str
    token_ids: list[int]
    logprobs: list[float]  # behaviour logprob of each sampled token, same length as token_ids
    finish_reason: str  # "stop" | "length" | "tool_calls" | "cancelled"
    usage: Usage
    model: str  # the base model's name
    adapter: str | None  # the LoRA adapter that served it (e.g. "policy-v3"); None = base model
    # The ids the backend fed the model (chat template applied). Both backends always set
    # them; None only from a server that does not report them (not vLLM).
    prompt_token_ids: list[int] | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass(frozen=True)
class Chunk:
    """A piece of a streamed completion. The last chunk carries finish_reason and usage,
    and the prompt's token ids (one chunk of a stream carries them: both backends put them
    on the last one)."""

    text: str
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str | None = None
    usage: Usage | None = None
    adapter: str | None = None
    prompt_token_ids: list[int] | None = None


class ModelError(Exception):
    """Base of every error a backend raises; `code` is stable for clients."""

    code = "model_error"


class BackendUnavailable(ModelError):
    """The model server cannot be reached (after retries), or timed out."""

    code = "model_unavailable"


class AdapterNotFound(ModelError):
    """The requested LoRA adapter is not loaded on the backend."""

    code = "adapter_not_found"


class ContextWindowExceeded(ModelError):
    """The prompt alone fills the model's context window; summarize or drop messages."""

    code = "context_window_exceeded"


@runtime_checkable
class ModelBackend(Protocol):
    """What the agent loop, the language server and the learner need from a model."""

    @property
    def model_name(self) -> str: ...

    @property
    def context_window(self) -> int:
        """Maximum tokens of prompt plus completion."""
        ...

    @property
    def adapter(self) -> str | None:
        """The adapter used when a call names none (set by the deployments table)."""
        ...

    def use_adapter(self, name: str | None) -> None:
        """Serve `name` (already loaded) by default from now on; None = the base model."""
        ...

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        schema: dict[str, Any] | None = None,
        sampling: Sampling = Sampling(),
        adapter: str | None = None,
    ) -> Completion:
        """One completion. `schema` constrains the text to JSON matching it, where supported."""
        ...

    def stream(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        sampling: Sampling = Sampling(),
        adapter: str | None = None,
    ) -> AsyncIterator[Chunk]:
        """The same completion as a stream of chunks; concatenated, equal to `complete`."""
        ...

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Prompt tokens of `messages` with the model's own tokenizer and chat template."""
        ...

    async def complete_text(
        self, prompt: str, *, sampling: Sampling = Sampling(), adapter: str | None = None
    ) -> Completion:
        """A plain-text continuation of `prompt`: no chat template (vLLM's /v1/completions).
        What inline completions use; ids, logprobs and prompt ids as `complete` reports them."""
        ...

    def count_text_tokens(self, text: str) -> int:
        """Prompt tokens of `text` as `complete_text` feeds it."""
        ...

    def infill(self) -> Infill | None:
        """The model's fill-in-the-middle format (fim.py), None when it has none."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class AdapterHost(Protocol):
    """A backend that loads LoRA adapters at runtime: what the deployments follower, the
    learner's deployers and the admin rollback call (OpenAIBackend, EmbeddedBackend)."""

    async def load_adapter(self, name: str, path: str | Path) -> None:
        """Load the peft adapter folder `path` under `name`; then serve it by that name.
        Loading the same name from the same folder again is a no-op."""
        ...

    async def unload_adapter(self, name: str) -> None:
        """Unload `name` (AdapterNotFound when not loaded); if it was the default, the base
        model becomes the default."""
        ...

    async def adapter_names(self) -> list[str]:
        """The names of the adapters loaded now, sorted."""
        ...


class AdapterBackend(ModelBackend, AdapterHost, Protocol):
    """A model backend that is also an adapter host (both real backends are). Check with
    isinstance(backend, AdapterHost): ModelBackend's properties may do I/O."""


async def collect_stream(
    chunks: AsyncIterator[Chunk],
    model: str,
    on_text: Callable[[str], Awaitable[None]] | None = None,
) -> Completion:
    """The `Completion` a stream adds up to, calling `on_text` with each piece of text.

    Its `prompt_token_ids` are those the stream reported (whichever chunk carried them).
    """
    text, ids, logprobs = [], [], []
    finish, usage, adapter = "stop", None, None
    prompt_ids: list[int] | None = None
    async for chunk in chunks:
        if chunk.text and on_text is not None:
            await on_text(chunk.text)
        text.append(chunk.text)
        ids += chunk.token_ids
        logprobs += chunk.logprobs
        finish, usage = chunk.finish_reason or finish, chunk.usage or usage
        adapter = chunk.adapter or adapter
        if chunk.prompt_token_ids is not None:
            prompt_ids = list(chunk.prompt_token_ids)
    usage = usage or Usage(len(prompt_ids or []), len(ids))
    return Completion(
        "".join(text), ids, logprobs, finish, usage, model, adapter, prompt_token_ids=prompt_ids
    )
