"""The embedded model backend: transformers + peft in this process, on the CPU.

`EmbeddedBackend(EmbeddedConfig(model_dir=...))` loads a causal LM and its tokenizer from a
local Hugging Face folder (no hub), renders chat messages with the tokenizer's chat template
(`add_generation_prompt=True`, chat_encoding.py) and samples token by token itself
(`decoding.generate`), so it knows the exact prompt ids it fed (on every completion, and on
a stream's last chunk), the sampled token ids and the behaviour logprob of each (what they
mean: see decoding.py; the same as vLLM's default raw logprobs).

Concurrency: the model is not thread-safe, so all torch work (generation, adapter loading)
runs on one dedicated worker thread, one job at a time behind an asyncio.Lock; the event loop
only moves chunks from a queue. Cancelling the consumer (task cancel, `break`, `aclose`) sets
a flag the loop checks between tokens, and the lock is held until the thread has stopped.

LoRA adapters (peft format; the `AdapterHost` protocol of base.py) are loaded by name at
runtime (`load_adapter`), listed (`adapter_names`), served by name per request (`adapter=`)
or by default (`use_adapter`), and unloaded (`unload_adapter`); `None` means the base model
(peft's `disable_adapter`). JSON-schema-constrained output comes from `constrained.JsonGuide`
(xgrammar). `tools` go to the chat template; tool calls in the reply are read in the Hermes
format, as the vLLM server does (hermes.py). `complete_text` continues a plain-text prompt
(inline completions), encoded as vLLM's /v1/completions encodes it; `infill()` is the
tokenizer's fill-in-the-middle format (fim.py), if any.

Try it: `.venv/bin/python -m pytest tests/models/test_embedded_*.py -q`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import secrets
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

from agent_server.models.base import (
    AdapterNotFound,
    Chunk,
    Completion,
    ContextWindowExceeded,
    Message,
    ModelError,
    Sampling,
    collect_stream,
)
from agent_server.models.chat_encoding import encode_chat, encode_text, infill_of, stop_token_ids
from agent_server.models.constrained import JsonGuide
from agent_server.models.decoding import GenerationPlan, generate
from agent_server.models.embedded_config import DTYPES, EmbeddedConfig
from agent_server.models.fim import Infill
from agent_server.models.hermes import parse_tool_calls

T = TypeVar("T")
DEFAULT_SAMPLING = Sampling()  # frozen, so one shared default is safe


class EmbeddedBackend:
    """ModelBackend over a transformers model in this process (see the module docstring)."""

    def __init__(self, config: EmbeddedConfig) -> None:
        self.config = config
        if config.torch_threads is not None:
            torch.set_num_threads(config.torch_threads)
        self._tokenizer = AutoTokenizer.from_pretrained(config.model_dir)
        if not self._tokenizer.chat_template:
            raise ValueError(f"the tokenizer in {config.model_dir} has no chat template")
        model = AutoModelForCausalLM.from_pretrained(
            config.model_dir, dtype=DTYPES[config.dtype], device_map=None
        )
        self._model = model.to(config.device).eval()
        limit = int(getattr(model.config, "max_position_embeddings", 0) or 0)
        window = config.context_window or limit
        if window < 2 or (limit and window > limit):
            raise ValueError(
                f"context_window={config.context_window} must be between 2 and the model's "
                f"max_position_embeddings ({limit})"
            )
        self._context_window = window
        self._stop_token_ids = stop_token_ids(self._tokenizer, model.generation_config)
        self._infill = infill_of(self._tokenizer)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedded-model")
        self._lock = asyncio.Lock()
        self._tokenizer_lock = threading.Lock()  # the Rust tokenizer is not safe to share
        self._guide: JsonGuide | None = None
        self._peft: PeftModel | None = None
        self._adapters: dict[str, Path] = {}
        self._default_adapter: str | None = None
        self._closed = False

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> EmbeddedBackend:
        """The backend on `settings.model_name` (a model folder), adapters from the home."""
        return cls(EmbeddedConfig.from_settings(settings, **overrides))

    # --- what the protocol asks -------------------------------------------------------------

    @property
    def model_name(self) -> str:
        return self.config.name or str(self.config.model_dir)

    @property
    def context_window(self) -> int:
        return self._context_window

    @property
    def adapter(self) -> str | None:
        return self._default_adapter

    @property
    def loaded_adapters(self) -> dict[str, Path]:
        return dict(self._adapters)

    async def adapter_names(self) -> list[str]:
        return self._names()

    def use_adapter(self, name: str | None) -> None:
        if name is not None and name not in self._adapters:
            raise AdapterNotFound(f"adapter {name!r} is not loaded (loaded: {self._names()})")
        self._default_adapter = name

    def count_tokens(self, messages: Sequence[Message]) -> int:
        return len(self._prompt_ids(messages, None))

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        schema: dict[str, Any] | None = None,
        sampling: Sampling = DEFAULT_SAMPLING,
        adapter: str | None = None,
    ) -> Completion:
        prompt_ids = await self._in_thread(self._prompt_ids, messages, tools)
        made = await collect_stream(
            self._stream(prompt_ids, schema, sampling, adapter), self.model_name
        )
        if tools and schema is None:
            text, calls = parse_tool_calls(made.text)  # what vLLM's hermes parser does
            finish = "tool_calls" if calls else made.finish_reason
            made = dataclasses.replace(made, text=text, finish_reason=finish, tool_calls=calls)
        return made

    async def complete_text(
        self, prompt: str, *, sampling: Sampling = DEFAULT_SAMPLING, adapter: str | None = None
    ) -> Completion:
        prompt_ids = await self._in_thread(self._text_ids, prompt)
        chunks = self._stream(prompt_ids, None, sampling, adapter)
        return await collect_stream(chunks, self.model_name)

    def count_text_tokens(self, text: str) -> int:
        return len(self._text_ids(text))

    def infill(self) -> Infill | None:
        return self._infill

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        sampling: Sampling = DEFAULT_SAMPLING,
        adapter: str | None = None,
    ) -> AsyncIterator[Chunk]:
        prompt_ids = await self._in_thread(self._prompt_ids, messages, None)
        async for chunk in self._stream(prompt_ids, schema, sampling, adapter):
            yield chunk

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        async with self._lock:  # let a running generation finish its cleanup first
            await asyncio.to_thread(self._executor.shutdown, wait=True)

    # --- adapters (the Deployer calls these) ------------------------------------------------

    async def load_adapter(self, name: str, path: str | Path | None = None) -> None:
        """Load a peft adapter under `name` from `path` (default: adapters_dir / name)."""
        if path is None:
            if self.config.adapters_dir is None:
                raise AdapterNotFound(f"no path given for adapter {name!r} and no adapters_dir")
            path = self.config.adapters_dir / name
        folder = Path(path).expanduser().resolve()
        if not (folder / "adapter_config.json").is_file():
            raise AdapterNotFound(f"{folder} holds no adapter_config.json (not a peft adapter)")
        if name in self._adapters:
            if self._adapters[name] == folder:
                return  # already serving exactly this folder
            raise ModelError(
                f"adapter name {name!r} is already loaded from {self._adapters[name]}; "
                "load each version under a new name (policy-vN)"
            )
        async with self._lock:
            await self._in_thread(self._load_adapter_sync, name, folder)
        self._adapters[name] = folder

    async def unload_adapter(self, name: str) -> None:
        """Drop an adapter; if it was the default, the base model becomes the default."""
        if name not in self._adapters:
            raise AdapterNotFound(f"adapter {name!r} is not loaded (loaded: {self._names()})")
        async with self._lock:
            await self._in_thread(self._unload_adapter_sync, name)
        del self._adapters[name]
        if self._default_adapter == name:
            self._default_adapter = None  # as the HTTP backend does

    def _load_adapter_sync(self, name: str, folder: Path) -> None:
        if self._peft is None:
            # Wraps self._model in place: LoRA layers are injected into its modules.
            self._peft = PeftModel.from_pretrained(
                self._model, folder, adapter_name=name, is_trainable=False
            )
        else:
            self._peft.load_adapter(folder, adapter_name=name, is_trainable=False)
        self._peft.eval()

    def _unload_adapter_sync(self, name: str) -> None:
        assert self._peft is not None
        if len(self._adapters) == 1:
            # Last one: take the LoRA layers out entirely, back to the plain base model.
            self._model = self._peft.unload()
            self._peft = None
        else:
            self._peft.delete_adapter(name)

    @contextlib.contextmanager
    def _serving(self, adapter: str | None) -> Iterator[None]:
        if self._peft is None:
            yield
        elif adapter is None:
            with self._peft.disable_adapter():
                yield
        else:
            self._peft.set_adapter(adapter)
            yield

    # --- the generation machinery -----------------------------------------------------------

    async def _stream(
        self,
        prompt_ids: list[int],
        schema: dict[str, Any] | None,
        sampling: Sampling,
        adapter: str | None,
    ) -> AsyncIterator[Chunk]:
        plan = self._plan(prompt_ids, sampling, adapter)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Chunk | BaseException] = asyncio.Queue()
        cancelled = threading.Event()

        def emit(item: Chunk | BaseException) -> None:
            if cancelled.is_set():
                return
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the event loop is gone: nobody is listening
                cancelled.set()

        def work() -> None:
            try:
                guide = self._json_guide().start(schema) if schema is not None else None
                with self._serving(plan.adapter):
                    generate(self._model, self._decode, plan, guide, cancelled, emit)
            except BaseException as exc:  # handed to the consumer, raised there
                emit(exc)

        async with self._lock:
            if self._closed:
                raise ModelError("the embedded backend is closed")
            future = loop.run_in_executor(self._executor, work)
            try:
                while True:
                    item = await queue.get()
                    if isinstance(item, ModelError):
                        raise item
                    if isinstance(item, BaseException):
                        raise ModelError(f"generation failed: {item!r}") from item
                    yield item
                    if item.finish_reason is not None:
                        break
            finally:
                cancelled.set()  # the loop checks this between tokens
                await asyncio.shield(future)

    def _plan(
        self, prompt_ids: list[int], sampling: Sampling, adapter: str | None
    ) -> GenerationPlan:
        if self._closed:
            raise ModelError("the embedded backend is closed")
        name = adapter if adapter is not None else self._default_adapter
        if name is not None and name not in self._adapters:
            raise AdapterNotFound(f"adapter {name!r} is not loaded (loaded: {self._names()})")
        room = self._context_window - len(prompt_ids)
        if room < 1:
            raise ContextWindowExceeded(
                f"the prompt has {len(prompt_ids)} tokens; the context window is "
                f"{self._context_window}: summarize or drop messages"
            )
        return GenerationPlan(
            prompt_ids=prompt_ids,
            max_new_tokens=min(sampling.max_tokens, self.config.max_new_tokens, room),
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            seed=sampling.seed if sampling.seed is not None else secrets.randbits(63),
            stop=tuple(sampling.stop),
            stop_token_ids=self._stop_token_ids | set(sampling.stop_token_ids),
            adapter=name,
        )

    def _prompt_ids(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None
    ) -> list[int]:
        with self._tokenizer_lock:  # rendered and encoded as vLLM's chat endpoint does
            return encode_chat(self._tokenizer, messages, tools=tools)

    def _text_ids(self, text: str) -> list[int]:
        with self._tokenizer_lock:  # encoded as vLLM's /v1/completions does
            return encode_text(self._tokenizer, text)

    def _decode(self, ids: list[int]) -> str:
        with self._tokenizer_lock:
            return self._tokenizer.decode(ids, skip_special_tokens=True)

    def _json_guide(self) -> JsonGuide:
        if self._guide is None:
            vocab = int(self._model.get_output_embeddings().weight.shape[0])
            self._guide = JsonGuide(self._tokenizer, vocab, sorted(self._stop_token_ids))
        return self._guide

    def _names(self) -> list[str]:
        return sorted(self._adapters)

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise ModelError("the embedded backend is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
