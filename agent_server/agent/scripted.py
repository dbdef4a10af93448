"""`ScriptedModel`: a `ModelBackend` that replays scripted replies (mini-swe-agent's
DeterministicModel). Drives the agent loop in tests and benches without a real model.

    model = ScriptedModel(['{"tool": ...}', lambda msgs: "...", completion], context_window=4000)

Each agent call takes the next output: a string, a ready `Completion` (e.g. with native
tool calls), or a callable of the messages returning either. Summary requests (recognized
by `prompts.is_summary_request`) are answered by `summary` instead and do not consume
outputs. Tokens are fake but consistent: one token per `chars_per_token` characters, ids
from the characters, logprobs from the position; `count_tokens` uses the same rule plus a
per-message overhead, and a scripted string's `prompt_token_ids` are those tokens. Like a
real server, a prompt plus max_tokens over `context_window` is a ContextWindowExceeded error.
Every call is recorded in `calls`. Run its tests:
    .venv/bin/python -m pytest tests/agent/test_scripted_model.py -q
"""

from __future__ import annotations

import asyncio
import copy
import math
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_server.agent.prompts import is_summary_request
from agent_server.models.base import (
    Chunk,
    Completion,
    ContextWindowExceeded,
    Message,
    ModelError,
    Sampling,
    Usage,
)
from agent_server.models.fim import Infill

Reply = str | Completion
Output = Reply | Callable[[list[Message]], Reply]
DEFAULT_SAMPLING = Sampling()
MESSAGE_OVERHEAD = 4  # tokens per message for role markers, like a chat template


class ScriptExhausted(ModelError):
    """More agent calls than scripted outputs."""

    code = "script_exhausted"


@dataclass(frozen=True)
class Call:
    kind: str  # "agent" | "summary"
    messages: list[Message]
    prompt_tokens: int
    sampling: Sampling
    schema: dict[str, Any] | None
    tools: list[dict[str, Any]] | None
    adapter: str | None


def _default_summary(messages: list[Message]) -> str:
    return f"Summary: the earlier turns were condensed ({len(str(messages[-1]['content']))} chars)."


class ScriptedModel:
    def __init__(
        self,
        outputs: Sequence[Output],
        *,
        summary: str | Callable[[list[Message]], str] = _default_summary,
        context_window: int = 8192,
        chars_per_token: int = 1,
        delay_s: float = 0.0,
        model_name: str = "scripted",
    ) -> None:
        if context_window < 64:
            raise ValueError(f"context_window must be >= 64 tokens, got {context_window}")
        if chars_per_token < 1:
            raise ValueError(f"chars_per_token must be >= 1, got {chars_per_token}")
        self.outputs = list(outputs)
        self.summary = summary
        self.chars_per_token = chars_per_token
        self.delay_s = delay_s  # awaited before each reply: lets tests cancel mid-generation
        self.calls: list[Call] = []
        self._window = context_window
        self._name = model_name
        self._adapter: str | None = None

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def context_window(self) -> int:
        return self._window

    @property
    def adapter(self) -> str | None:
        return self._adapter

    def use_adapter(self, name: str | None) -> None:
        self._adapter = name

    def _tokens(self, text: str) -> list[int]:
        n = self.chars_per_token
        return [sum(map(ord, text[i : i + n])) % 50_000 for i in range(0, len(text), n)]

    def count_tokens(self, messages: Sequence[Message]) -> int:
        total = 0
        for m in messages:
            text = str(m.get("content") or "") + str(m.get("tool_calls") or "")
            total += MESSAGE_OVERHEAD + math.ceil(len(text) / self.chars_per_token)
        return total

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """The prompt's fake token ids: `count_tokens(messages)` of them, role markers first."""
        ids: list[int] = []
        for m in messages:
            text = str(m.get("content") or "") + str(m.get("tool_calls") or "")
            ids += [50_000 + len(str(m.get("role")))] * MESSAGE_OVERHEAD + self._tokens(text)
        return ids

    def _reply(
        self,
        messages: Sequence[Message],
        tools: Sequence[dict[str, Any]] | None,
        schema: dict[str, Any] | None,
        sampling: Sampling,
        adapter: str | None,
    ) -> Completion:
        msgs = copy.deepcopy(list(messages))
        prompt_tokens = self.count_tokens(msgs)
        if prompt_tokens + sampling.max_tokens > self._window:
            raise ContextWindowExceeded(
                f"prompt of {prompt_tokens} tokens + max_tokens {sampling.max_tokens} exceeds "
                f"the context window of {self._window}"
            )
        kind = "summary" if is_summary_request(msgs) else "agent"
        tool_list = list(tools) if tools else None
        self.calls.append(Call(kind, msgs, prompt_tokens, sampling, schema, tool_list, adapter))
        if kind == "summary":
            out: Output = self.summary
        elif self.outputs:
            out = self.outputs.pop(0)
        else:
            raise ScriptExhausted(f"no scripted output left for agent call {len(self.calls)}")
        reply = out(msgs) if callable(out) else out
        if isinstance(reply, Completion):
            return reply
        ids = self._tokens(reply)
        finish = "stop"
        if len(ids) > sampling.max_tokens:  # like a real server: cut at max_tokens
            ids = ids[: sampling.max_tokens]
            reply = reply[: sampling.max_tokens * self.chars_per_token]
            finish = "length"
        return Completion(
            text=reply,
            token_ids=ids,
            logprobs=[-0.05 * (1 + i % 5) for i in range(len(ids))],
            finish_reason=finish,
            usage=Usage(prompt_tokens, len(ids)),
            model=self._name,
            adapter=adapter or self._adapter,
            prompt_token_ids=self.prompt_ids(msgs),
        )

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        schema: dict[str, Any] | None = None,
        sampling: Sampling = DEFAULT_SAMPLING,
        adapter: str | None = None,
    ) -> Completion:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return self._reply(messages, tools, schema, sampling, adapter)

    async def complete_text(
        self, prompt: str, *, sampling: Sampling = DEFAULT_SAMPLING, adapter: str | None = None
    ) -> Completion:
        """A plain-text completion (inline completions): the next output, like `complete`
        with the prompt as one {"role": "prompt"} message (what `calls` records)."""
        return await self.complete([{"role": "prompt", "content": prompt}], sampling=sampling,
                                   adapter=adapter)  # fmt: skip

    def count_text_tokens(self, text: str) -> int:
        return self.count_tokens([{"role": "prompt", "content": text}])

    def infill(self) -> Infill | None:
        return None  # plain prefix completion

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        sampling: Sampling = DEFAULT_SAMPLING,
        adapter: str | None = None,
    ) -> AsyncIterator[Chunk]:
        c = self._reply(messages, None, schema, sampling, adapter)
        n = self.chars_per_token
        for i, tid in enumerate(c.token_ids):
            if self.delay_s:
                await asyncio.sleep(self.delay_s / max(1, len(c.token_ids)))
            yield Chunk(c.text[i * n : (i + 1) * n], [tid], [c.logprobs[i]], adapter=c.adapter)
        yield Chunk("", [], [], finish_reason=c.finish_reason, usage=c.usage, adapter=c.adapter,
                    prompt_token_ids=c.prompt_token_ids)  # fmt: skip

    async def aclose(self) -> None:
        return None
