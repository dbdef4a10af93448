"""Fill-in-the-middle formats: which special tokens a code model reads a hole with.

    infill = detect_infill(token_id)   # token_id(text) -> its id when it is one token, else None
    prompt = infill.render(prefix, suffix) if infill else prefix

A model trained for fill-in-the-middle reads `<prefix token>PREFIX<suffix token>SUFFIX<middle
token>` and writes the middle, then a stop token. Which tokens depends on the family; a
tokenizer holding all three of a family's tokens (each one token) is taken to speak that
format. Models without one (SmolLM2, the dev model) get plain prefix completion. `stop` lists
the family's tokens that may end a middle besides the eos token (resolved to ids, so they
stop generation even though special tokens never appear in decoded text). Both backends
detect with their own tokenizer (embedded.py; openai_http.py with a local tokenizer or the
server's /tokenize). Tested in tests/models/test_fim.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Infill:
    """A model's fill-in-the-middle format, with the ids of the tokens that end a middle."""

    family: str
    prefix: str
    suffix: str
    middle: str
    stop_token_ids: tuple[int, ...] = ()

    def render(self, prefix: str, suffix: str) -> str:
        """The prompt text (prefix-suffix-middle order) whose continuation is the middle."""
        return f"{self.prefix}{prefix}{self.suffix}{suffix}{self.middle}"


# (family, prefix, suffix, middle, tokens that end a middle). First full match wins.
FORMATS: tuple[tuple[str, str, str, str, tuple[str, ...]], ...] = (
    # Qwen2.5-Coder, CodeGemma
    ("qwen", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
     ("<|fim_pad|>", "<|file_sep|>", "<|endoftext|>", "<|file_separator|>", "<|fim_prefix|>")),
    # StarCoder, StarCoder2, SantaCoder
    ("starcoder", "<fim_prefix>", "<fim_suffix>", "<fim_middle>",
     ("<fim_pad>", "<file_sep>", "<|endoftext|>", "<fim_prefix>")),
    # DeepSeek-Coder: begin PREFIX hole SUFFIX end
    ("deepseek", "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>", ("<｜end▁of▁sentence｜>",)),
)  # fmt: skip


def detect_infill(token_id: Callable[[str], int | None]) -> Infill | None:
    """The first format whose three tokens are each one token of this tokenizer, or None."""
    for family, prefix, suffix, middle, stops in FORMATS:
        if all(token_id(t) is not None for t in (prefix, suffix, middle)):
            ids = tuple(i for i in (token_id(t) for t in stops) if i is not None)
            return Infill(family, prefix, suffix, middle, ids)
    return None


def vocab_lookup(vocab: dict[str, int]) -> Callable[[str], int | None]:
    """`token_id` over a tokenizer's vocabulary (`tokenizer.get_vocab()`)."""
    return vocab.get
