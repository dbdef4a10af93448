"""Chat prompt encoding: messages -> the prompt text and token ids a model is fed.

    tokenizer = load_tokenizer(model_dir)
    ids = encode_chat(tokenizer, messages, tools=tools)      # what the model reads
    n = count_tokens(tokenizer, messages)

The one place that renders a chat with a tokenizer's own chat template, the way vLLM's chat
endpoint does it: the template rendered to text with the generation prompt, then encoded
without adding special tokens (the template already holds them). The embedded backend feeds
the model these ids, `OpenAIBackend.count_tokens` counts with them when it has a local
tokenizer, and the dev-model builder renders its chat corpus with `render_chat`. The learner
never calls this: it trains on the ids each suggestion row stored (learner/data.py).
Tested in tests/models/test_devmodel.py and tests/models/test_backend_contract.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer, PreTrainedTokenizerBase


def load_tokenizer(model_dir: str | Path) -> PreTrainedTokenizerBase:
    """The tokenizer saved with a model (ours or any Hugging Face-format model folder)."""
    return AutoTokenizer.from_pretrained(str(model_dir))


def render_chat(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[dict[str, Any]],
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
) -> str:
    """The prompt text the model sees for `messages`."""
    return tokenizer.apply_chat_template(
        list(messages),
        tools=list(tools) if tools else None,
        tokenize=False,
        add_generation_prompt=add_generation_prompt,
    )


def encode_chat(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[dict[str, Any]],
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
) -> list[int]:
    """Prompt token ids of `messages` (template rendered, then encoded without extra specials)."""
    text = render_chat(
        tokenizer, messages, tools=tools, add_generation_prompt=add_generation_prompt
    )
    # The template already holds every special token; adding more would double-count.
    return list(tokenizer.encode(text, add_special_tokens=False))


def count_tokens(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[dict[str, Any]],
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
) -> int:
    """Prompt tokens of `messages` as the model will see them."""
    return len(
        encode_chat(tokenizer, messages, tools=tools, add_generation_prompt=add_generation_prompt)
    )
