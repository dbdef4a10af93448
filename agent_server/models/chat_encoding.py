"""Prompt encoding: messages (or plain text) -> the prompt text and token ids a model is fed.

    tokenizer = load_tokenizer(model_dir)
    ids = encode_chat(tokenizer, messages, tools=tools)      # what the model reads
    n = count_tokens(tokenizer, messages)
    ids = encode_text(tokenizer, "def f(x):\n")             # a plain-text prompt
    infill = infill_of(tokenizer)                            # fill-in-the-middle format or None

The one place that renders a chat with a tokenizer's own chat template, the way vLLM's chat
endpoint does it: the template rendered to text with the generation prompt, then encoded
without adding special tokens (the template already holds them). The embedded backend feeds
the model these ids, `OpenAIBackend.count_tokens` counts with them when it has a local
tokenizer, and the dev-model builder renders its chat corpus with `render_chat`. The learner
never calls this: it trains on the ids each suggestion row stored (learner/data.py).
Tested in tests/modelbuild/dev/test_devmodel.py and tests/models/test_backend_contract.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer, PreTrainedTokenizerBase

from agent_server.models.fim import Infill, detect_infill
from agent_server.models.hermes import tools_in_system


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
    """The prompt text the model sees for `messages`; `tools` go into the system message
    when the chat template ignores them (hermes.tools_in_system)."""
    messages, tools = with_tools(tokenizer, messages, tools)
    return tokenizer.apply_chat_template(
        list(messages),
        tools=list(tools) if tools else None,
        tokenize=False,
        add_generation_prompt=add_generation_prompt,
    )


def reads_tools(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Whether the chat template shows the model the `tools` it is given (asked once)."""
    known = getattr(tokenizer, "_apprentice_reads_tools", None)
    if known is None:
        probe = {
            "type": "function",
            "function": {
                "name": "apprentice_probe_tool",
                "description": "probe",
                "parameters": {"type": "object", "properties": {}},
            },
        }
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}], tools=[probe], tokenize=False,
            add_generation_prompt=True,
        )  # fmt: skip
        known = "apprentice_probe_tool" in text
        tokenizer._apprentice_reads_tools = known
    return bool(known)


def with_tools(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]] | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """(messages, tools) as the template should get them: unchanged when it reads `tools`,
    else the tools written into the system message (and no `tools` argument)."""
    if not tools or reads_tools(tokenizer):
        return list(messages), list(tools) if tools else None
    return tools_in_system(list(messages), list(tools)), None


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


def encode_text(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    """Prompt token ids of a plain-text prompt, as vLLM's /v1/completions encodes it."""
    return list(tokenizer.encode(text, add_special_tokens=True))


def infill_of(tokenizer: PreTrainedTokenizerBase) -> Infill | None:
    """The tokenizer's fill-in-the-middle format (fim.py), None when it has none."""
    vocab = tokenizer.get_vocab()
    special = set(tokenizer.all_special_tokens) | {
        t.content for t in tokenizer.added_tokens_decoder.values()
    }
    # Only a token the tokenizer treats as one piece counts: an added or special token.
    return detect_infill(lambda t: vocab.get(t) if t in special else None)


# End-of-turn markers of common chat templates; whichever exist in the vocabulary stop a reply.
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")


def stop_token_ids(tokenizer: PreTrainedTokenizerBase, generation_config: Any) -> frozenset[int]:
    """The ids that end a reply: the model's eos tokens and its end-of-turn markers."""
    ids: set[int] = set()
    eos = getattr(generation_config, "eos_token_id", None)
    for source in (eos, tokenizer.eos_token_id):
        if isinstance(source, int):
            ids.add(source)
        elif isinstance(source, list):
            ids.update(int(i) for i in source)
    vocab = tokenizer.get_vocab()
    ids.update(vocab[marker] for marker in END_OF_TURN if marker in vocab)
    if not ids:
        raise ValueError("the model names no eos token")
    return frozenset(ids)
