"""The token-by-token sampling loop of the embedded backend. Blocking; runs in its worker thread.

`generate` feeds the prompt once, then one token at a time through a transformers KV cache,
and reports each sampled token as a `Chunk` through `emit`; the last chunk carries the finish
reason, the usage and the prompt's token ids. It stops at a stop token (eos / end of turn),
a stop string, the token budget, or when `cancelled` is set (checked between tokens).

Logprobs mean what vLLM's default `logprobs_mode="raw_logprobs"` means, so both backends
report the same quantity: log_softmax of the model's logits at temperature 1, before
temperature and top-p, but after the structured-output mask when a schema is given (vLLM
applies the grammar bitmask to the logits before its sampler computes logprobs). Greedy
(temperature 0) reports the same raw logprob.

Text follows vLLM too: special tokens are left out of the text (`skip_special_tokens`), a stop
string ends the text before it (its tokens stay in `token_ids`), and a stop token is counted
in `token_ids`/`logprobs` but adds no text. Streamed text holds back a tail that could still
become a stop string or is an incomplete UTF-8 character, so the concatenated chunks are
exactly the final text.

Run the tests: `.venv/bin/python -m pytest tests/models/test_embedded_backend.py -q`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel

from agent_server.models.base import Chunk, ModelError, Usage
from agent_server.models.constrained import GuidedRun

GREEDY_BELOW = 1e-5  # vLLM samples greedily below this temperature; so do we


@dataclass(frozen=True)
class GenerationPlan:
    """Everything the loop needs, resolved by the backend before the thread starts."""

    prompt_ids: list[int]
    max_new_tokens: int  # already clamped to the context window and the backend's cap
    temperature: float
    top_p: float
    seed: int
    stop: tuple[str, ...]
    stop_token_ids: frozenset[int]
    adapter: str | None


class TextTracker:
    """Incremental detokenization with stop strings and a safe-to-emit boundary."""

    def __init__(self, decode: Callable[[list[int]], str], stop: Sequence[str]) -> None:
        self._decode = decode
        self._stop = [s for s in stop if s]
        self._ids: list[int] = []
        self.text = ""
        self.sent = 0  # characters of `text` already emitted
        self.stopped = False

    def add(self, token_id: int) -> str:
        """Add a token; return the text that may be emitted now."""
        self._ids.append(token_id)
        previous = len(self.text)
        self.text = self._decode(self._ids)
        if self._stop:
            start = max(0, previous - max(len(s) for s in self._stop) + 1)
            hits = [i for i in (self.text.find(s, start) for s in self._stop) if i >= 0]
            if hits:
                self.text = self.text[: min(hits)]
                self.stopped = True
                return self.flush()
        return self._take(self._safe_end())

    def flush(self) -> str:
        return self._take(len(self.text))

    def _safe_end(self) -> int:
        end = len(self.text)
        while end > self.sent and self.text[end - 1] == "\ufffd":
            end -= 1  # an incomplete UTF-8 character: later tokens finish it
        hold = 0  # a tail that may yet grow into a stop string stays unsent
        for stop in self._stop:
            for k in range(min(len(stop) - 1, end - self.sent), 0, -1):
                if self.text[end - k : end] == stop[:k]:
                    hold = max(hold, k)
                    break
        return max(end - hold, self.sent)

    def _take(self, end: int) -> str:
        piece = self.text[self.sent : end]
        self.sent = max(self.sent, end)
        return piece


def _sample(
    logits: torch.Tensor, plan: GenerationPlan, generator: torch.Generator
) -> tuple[int, float]:
    """Pick a token from (already masked) float32 logits; return it with its raw logprob."""
    logprobs = torch.log_softmax(logits, dim=-1)
    if plan.temperature < GREEDY_BELOW:
        token = int(torch.argmax(logits))
    else:
        probs = torch.softmax(logits / plan.temperature, dim=-1)
        if plan.top_p < 1.0:
            sorted_probs, order = torch.sort(probs, descending=True)
            # Keep the smallest prefix whose mass reaches top_p (always at least one token).
            drop = torch.cumsum(sorted_probs, dim=-1) - sorted_probs >= plan.top_p
            sorted_probs[drop] = 0.0
            probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
        token = int(torch.multinomial(probs, 1, generator=generator))
    return token, float(logprobs[token])


def generate(
    model: PreTrainedModel,
    decode: Callable[[list[int]], str],
    plan: GenerationPlan,
    guide: GuidedRun | None,
    cancelled: threading.Event,
    emit: Callable[[Chunk], None],
) -> None:
    """Run one generation, emitting a Chunk per token and a final Chunk with finish_reason."""
    generator = torch.Generator().manual_seed(plan.seed)
    tracker = TextTracker(decode, plan.stop)
    cache = DynamicCache(config=model.config)
    next_input = torch.tensor([plan.prompt_ids], dtype=torch.long)
    forced: list[int] = []  # closing tokens being emitted to finish a JSON document in budget
    closing = guide.closing_tokens() if guide is not None else None
    if guide is not None and (closing is None or len(closing) > plan.max_new_tokens - 1):
        need = "an unbounded number of" if closing is None else f"{len(closing) + 1}"
        raise ModelError(
            f"max_tokens={plan.max_new_tokens} cannot hold the shortest reply matching the "
            f"schema ({need} tokens); raise max_tokens or bound the schema"
        )
    generated = 0
    finish = "length"
    while generated < plan.max_new_tokens:
        if cancelled.is_set():
            return
        with torch.no_grad():
            out = model(input_ids=next_input, cache=cache, use_cache=True, logits_to_keep=1)
        logits = out.logits[0, -1].to(torch.float32)
        if guide is not None:
            guide.mask_logits(logits)
        token, logprob = _sample(logits, plan, generator)
        if guide is not None and closing is not None:
            room = plan.max_new_tokens - generated - 2  # tokens left after this one, less stop
            if not forced and len(closing) > room:
                forced = list(closing)
            if not forced:
                after = guide.closing_tokens(after=token)
                if after is None or len(after) > room:
                    forced = list(closing)  # this token would leave no way to close in budget
                else:
                    closing = after
            if forced:
                token = forced.pop(0)
                logprob = float(torch.log_softmax(logits, dim=-1)[token])
                closing = list(forced)
            guide.accept(token)
        generated += 1
        is_stop_token = token in plan.stop_token_ids
        text = "" if is_stop_token else tracker.add(token)
        emit(Chunk(text=text, token_ids=[token], logprobs=[logprob], adapter=plan.adapter))
        if is_stop_token or tracker.stopped:
            finish = "stop"
            break
        next_input = torch.tensor([[token]], dtype=torch.long)
    emit(
        Chunk(
            text=tracker.flush(),
            token_ids=[],
            logprobs=[],
            finish_reason=finish,
            usage=Usage(prompt_tokens=len(plan.prompt_ids), completion_tokens=generated),
            adapter=plan.adapter,
            prompt_token_ids=list(plan.prompt_ids),  # what the learner trains on, as fed
        )
    )
