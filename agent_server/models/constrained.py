"""JSON-schema-constrained decoding for the embedded backend, on xgrammar.

xgrammar (the grammar engine vLLM uses) compiles a JSON schema against our tokenizer and, at
each step, gives the set of tokens that keep the text a valid prefix of a document matching
the schema. This module adds the three things a barely trained model needs on top of it:

- Compact JSON only (`any_whitespace=False`), else a weak model fills `max_tokens` with
  whitespace (seen with vLLM on these machines, see the field notes).
- A static ban on special/added tokens and on tokens holding control bytes: xgrammar treats an
  added token such as `<|im_start|>` as plain text and lets raw control characters into
  strings, which strict `json.loads` refuses. Stop tokens are allowed once the document is
  complete, and only then.
- Forced closure: `closing_tokens()` finds a short way to finish the document from the current
  state (property names and other forced text from xgrammar's jump-forward, then the cheapest
  of `}` `]` `"` `0` `t` ... at each open choice). The decoder keeps the invariant "what is
  left of the token budget can still close the document", so every reply parses and validates.

Try it: `.venv/bin/python -m pytest tests/models/test_embedded_backend.py -k schema -q`.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import torch
import xgrammar as xgr
from transformers import PreTrainedTokenizerBase

from agent_server.models.base import ModelError

# Characters tried, in order, when the grammar leaves a choice open while closing a document:
# close what is open first, then move on past a finished value (`,` beats another digit), then
# the shortest value of each JSON type. Inside a string `}` is just text: the quote comes first.
_CLOSERS = '}],"0t{[:'
_CLOSERS_IN_STRING = '"}],0t{[:'
_FALLBACK = "".join(chr(c) for c in range(0x20, 0x7F))
_MAX_CLOSING_CHARS = 2048


class SchemaUnsupported(ModelError):
    """The JSON schema cannot be compiled into a grammar (or is not a JSON schema at all)."""

    code = "schema_unsupported"


class JsonGuide:
    """Per-tokenizer state shared by all constrained requests: vocabulary facts and a compiler.

    Thread-safe for `start` (compiled grammars are cached by schema text).
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        vocab_size: int,
        stop_token_ids: list[int],
    ) -> None:
        self._tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.stop_token_ids = list(stop_token_ids)
        self._info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=self.stop_token_ids
        )
        # One compiler thread: the machine has two cores and the model wants them.
        self._compiler = xgr.GrammarCompiler(self._info, max_threads=1)
        self._lock = threading.Lock()
        self._cache: dict[str, xgr.CompiledGrammar] = {}
        banned = torch.zeros(vocab_size, dtype=torch.bool)
        special = set(tokenizer.all_special_ids) | set(tokenizer.added_tokens_decoder)
        special |= set(self._info.special_token_ids) | set(self.stop_token_ids)
        for token_id in special:
            if 0 <= token_id < vocab_size:
                banned[token_id] = True
        for token_id, raw in enumerate(self._info.decoded_vocab[:vocab_size]):
            if not raw or any(byte < 0x20 or byte == 0x7F for byte in raw):
                banned[token_id] = True
        if len(self._info.decoded_vocab) < vocab_size:  # lm_head padding: never real tokens
            banned[len(self._info.decoded_vocab) :] = True
        self._banned = banned
        self._stop_ids = torch.tensor(self.stop_token_ids, dtype=torch.long)

    def start(self, schema: dict[str, Any]) -> GuidedRun:
        """A fresh matcher for one request; raises SchemaUnsupported for a bad schema."""
        try:
            text = json.dumps(schema)  # key order matters: properties are emitted in it
        except (TypeError, ValueError) as exc:
            raise SchemaUnsupported(f"schema is not JSON-serialisable: {exc}") from exc
        with self._lock:
            compiled = self._cache.get(text)
            if compiled is None:
                try:
                    compiled = self._compiler.compile_json_schema(
                        text, any_whitespace=False, separators=(",", ":"), strict_mode=True
                    )
                except Exception as exc:  # xgrammar raises RuntimeError/ValueError variants
                    raise SchemaUnsupported(f"cannot compile the JSON schema: {exc}") from exc
                self._cache[text] = compiled
        return GuidedRun(self, xgr.GrammarMatcher(compiled))

    def encode_text(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False))


class GuidedRun:
    """The grammar state of one constrained generation."""

    def __init__(self, guide: JsonGuide, matcher: xgr.GrammarMatcher) -> None:
        self._guide = guide
        self._matcher = matcher
        self._bitmask = xgr.allocate_token_bitmask(1, guide.vocab_size)

    @property
    def completed(self) -> bool:
        """The text so far is a whole document; only a stop token may follow."""
        return self._matcher.is_completed()

    def mask_logits(self, logits: torch.Tensor) -> None:
        """Set to -inf (in place) the logits of every token that may not come next."""
        if self._matcher.is_completed():
            # After a complete document the grammar allows the stop tokens and nothing else;
            # they keep the model's own logits, so the reported logprob is renormalised over
            # them (as vLLM's masked sampler reports it), not a uniform guess.
            stop_logits = logits[self._guide._stop_ids].clone()
            logits.fill_(float("-inf"))
            logits[self._guide._stop_ids] = stop_logits
            return
        self._matcher.fill_next_token_bitmask(self._bitmask)
        xgr.apply_token_bitmask_inplace(logits.view(1, -1), self._bitmask)
        logits[self._guide._banned] = float("-inf")

    def accept(self, token_id: int) -> None:
        if token_id in self._guide.stop_token_ids and self._matcher.is_completed():
            return
        if not self._matcher.accept_token(token_id):
            raise ModelError(f"internal: constrained decoder rejected token {token_id}")

    def closing_tokens(self, after: int | None = None) -> list[int] | None:
        """Tokens that finish the document from here (after accepting `after`, if given).

        None when `after` is not acceptable or no closing was found within bounds.
        """
        probe = self._matcher.fork()
        if after is not None:
            if after in self._guide.stop_token_ids:
                return [] if probe.is_completed() else None
            if not probe.accept_token(after):
                return None
        text = _closing_text(probe.fork())
        if text is None:
            return None
        if not text:
            return []
        tokens = self._guide.encode_text(text)
        if _accepts_all(probe.fork(), tokens):
            return tokens
        # The tokenizer split the text in a way the grammar refuses (rare): one char at a time.
        tokens = [tid for ch in text for tid in self._guide.encode_text(ch)]
        return tokens if _accepts_all(probe.fork(), tokens) else None


def _accepts_all(matcher: xgr.GrammarMatcher, tokens: list[int]) -> bool:
    return all(matcher.accept_token(t) for t in tokens) and matcher.is_completed()


def _closing_text(matcher: xgr.GrammarMatcher) -> str | None:
    """Greedy search for a short string that completes the document. Mutates `matcher`."""
    out: list[str] = []
    length = 0
    while not matcher.is_completed():
        forced = matcher.find_jump_forward_string()
        if forced:
            if not matcher.accept_string(forced):
                return None
            out.append(forced)
            length += len(forced)
        else:
            # Compact JSON never allows `~` outside a string; inside one it is plain text.
            closers = _CLOSERS_IN_STRING if matcher.fork().accept_string("~") else _CLOSERS
            for ch in closers + _FALLBACK:
                if matcher.accept_string(ch):
                    out.append(ch)
                    length += 1
                    break
            else:
                return None
        if length > _MAX_CLOSING_CHARS:
            return None
    return "".join(out)
