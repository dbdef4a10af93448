"""The dev model's tokenizer: byte-level BPE trained here, with a ChatML-style chat template.

Building only: rendering and encoding chats with a built model's tokenizer (for any model,
not just this one) is agent_server/models/chat_encoding.py.

Turn format (what the template renders, and what the model was trained on):

    <|im_start|>system\nYou are ...<|im_end|>\n<|im_start|>user\n...<|im_end|>\n
    <|im_start|>assistant\n...<|im_end|>\n

`<|im_end|>` is the tokenizer's eos token, so generation stops at the end of a turn;
`<|eos|>` separates pretraining documents; `<|pad|>` pads batches.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    models,
    pre_tokenizers,
    processors,
    trainers,
)
from transformers import PreTrainedTokenizerFast

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [PAD, BOS, EOS, IM_START, IM_END]  # ids 0..4, in this order
# Ordinary (not special) added tokens: one id each for the tool-call markers, and still in
# the text after decoding with skip_special_tokens=True, which the backends' parsers need.
TOOL_CALL_END = "</tool_call>"
TOOL_CALL_TOKENS = ["<tool_call>", TOOL_CALL_END]

# ChatML with a tools block: one line per tool, `name(arg, ...): description` (a 5M model
# learns nothing from the full JSON specs but to repeat their braces). `content` may be a
# string or OpenAI-style parts (vLLM passes parts when it detects that the template iterates
# over them). Assistant `tool_calls` are rendered Hermes-style, the text that vLLM's
# `--tool-call-parser hermes` and the embedded backend (agent_server/models/hermes.py) parse
# back: <tool_call>{"name": ..., "arguments": {...}}</tool_call>.
CHAT_TEMPLATE = (
    "{%- if tools %}"
    '{{- \'<|im_start|>system\\nCall a tool as <tool_call>{"name": ..., "arguments": {...}}\''
    "'</tool_call>. Tools:\\n' }}"
    "{%- for tool in tools %}"
    "{%- set fn = tool['function'] if tool['function'] is defined else tool %}"
    "{%- set params = fn['parameters'] if fn['parameters'] is defined else {} %}"
    "{%- set props = params['properties'] if params['properties'] is defined else {} %}"
    "{{- fn['name'] + '(' + (props | list | join(', ')) + ')' }}"
    "{%- if fn['description'] is defined and fn['description'] %}"
    "{{- ': ' + fn['description'] }}{%- endif %}"
    "{{- '\\n' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- elif message['content'] %}"
    "{%- for part in message['content'] %}"
    "{%- if part['type'] == 'text' %}{{- part['text'] }}{%- endif %}"
    "{%- endfor %}"
    "{%- endif %}"
    "{%- if message['tool_calls'] is defined and message['tool_calls'] %}"
    "{%- for call in message['tool_calls'] %}"
    "{%- set fn = call['function'] if call['function'] is defined else call %}"
    "{{- '<tool_call>{\"name\": ' + (fn['name'] | tojson) + ', \"arguments\": ' }}"
    "{%- if fn['arguments'] is string %}{{- fn['arguments'] }}"
    "{%- else %}{{- fn['arguments'] | tojson }}{%- endif %}"
    "{{- '}</tool_call>' }}"
    "{%- endfor %}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def train_tokenizer(texts: Sequence[str], vocab_size: int) -> Tokenizer:
    """Train a byte-level BPE on `texts` (seconds for a few MB). Deterministic for its input."""
    tok = Tokenizer(models.BPE())
    # No regex split on spaces-before-words alone: code indentation still becomes few tokens
    # because runs of spaces merge during training.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(TOOL_CALL_TOKENS),  # the total stays `vocab_size`
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_CALL_TOKENS])
    return tok


def wrap(tok: Tokenizer, max_length: int) -> PreTrainedTokenizerFast:
    """The transformers tokenizer around `tok`, with chat template and special tokens set."""
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=IM_END,
        pad_token=PAD,
        additional_special_tokens=[EOS, IM_START],
        model_max_length=max_length,
        chat_template=CHAT_TEMPLATE,
        padding_side="left",  # batched generation pads on the left
        clean_up_tokenization_spaces=False,
    )


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, out: Path) -> None:
    """save_pretrained, then make sure every reader finds the chat template.

    transformers 5 writes `chat_template.jinja`; older readers (and some servers) look for
    `chat_template` in tokenizer_config.json. Both hold the same text.
    """
    tokenizer.save_pretrained(out)
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    config_path = out / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = CHAT_TEMPLATE
    # transformers 5 writes its own class name; this one resolves in 4.x and 5.x alike.
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
