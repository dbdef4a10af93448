"""The inline-completion prompt: plain text under a file header, the model's fill-in-the-middle
format when it has one, stop strings for a line or a block, the prefix's last space left to
the model, cut (far ends first) to fit, and `shown`: code to insert, never a markdown fence.
Run: .venv/bin/python -m pytest tests/session/test_inline_prompt.py -q
"""

from __future__ import annotations

import pytest

from agent_server.agent.scripted import ScriptedModel
from agent_server.models.fim import FORMATS, Infill, detect_infill
from agent_server.session.prompts import (
    BLOCK_STOPS,
    LINE_STOPS,
    InlinePrompt,
    file_header,
    fit_inline_prompt,
    inline_prompt,
)

QWEN = Infill("qwen", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")


def test_the_header_is_a_comment_in_the_files_language() -> None:
    assert file_header("a.py", "python") == "# a.py\n"
    assert file_header("src/m.ts", "") == "// src/m.ts\n"  # the language from the suffix
    assert file_header("q.sql", "sql") == "-- q.sql\n"
    assert file_header("notes.txt", "plaintext") == ""  # no comment syntax known: none


def test_prefix_completion_when_the_model_has_no_infill_format() -> None:
    prompt = inline_prompt("a.py", "python", "def f(x):\n    return x", "\n\nprint(1)\n", None)
    assert prompt == InlinePrompt("# a.py\ndef f(x):\n    return x", BLOCK_STOPS)
    assert prompt.messages() == [{"role": "prompt", "content": prompt.text, "format": "prefix"}]


def test_the_models_infill_format_when_it_has_one() -> None:
    prompt = inline_prompt("a.py", "python", "y = f(", ")\n", QWEN)
    assert prompt.text == "<|fim_prefix|># a.py\ny = f(<|fim_suffix|>)\n<|fim_middle|>"
    assert prompt.infill and prompt.stop == LINE_STOPS  # code after the cursor on its line


def test_a_trailing_space_is_left_to_the_model_and_taken_back() -> None:
    prompt = inline_prompt("a.py", "python", "def f(x):\n    ", "", None)
    assert prompt.text == "# a.py\ndef f(x):\n   " and prompt.healed == " "
    assert prompt.shown(" return x") == "return x"  # SmolLM2 writes the space with the word
    assert prompt.shown("return x") == "return x"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("```python\n```", ""),
        ("```", ""),
        ("\n\n", ""),
        ("```py\nreturn 1\n```\nThis returns one.", "return 1"),
        ("return 1\n```", "return 1"),
        ("x + 1  \n", "x + 1"),
        ("a\n    b", "a\n    b"),  # a block is kept whole
    ],
)
def test_shown_is_code_never_a_fence(text: str, shown: str) -> None:
    assert InlinePrompt("p", BLOCK_STOPS).shown(text) == shown


def test_fit_cuts_the_far_ends_and_keeps_the_cursors_surroundings() -> None:
    prefix = "".join(f"line_{i} = {i}\n" for i in range(400))
    model = ScriptedModel([], context_window=1_000)  # one token a character
    prompt = fit_inline_prompt(model, "a.py", "python", prefix, "tail()\n", 64)
    assert model.count_text_tokens(prompt.text) <= 1_000 - 64
    assert prompt.text.startswith("# a.py\n") and prefix.endswith(prompt.text[7:])
    assert "line_399 = 399\n" in prompt.text and "line_0 = 0\n" not in prompt.text


def test_infill_detection_reads_one_token_per_marker() -> None:
    vocab = {"<fim_prefix>": 1, "<fim_suffix>": 2, "<fim_middle>": 3, "<fim_pad>": 4,
             "<|endoftext|>": 0}  # fmt: skip
    found = detect_infill(vocab.get)
    assert found is not None and found.family == "starcoder"
    assert set(found.stop_token_ids) == {4, 0, 1}  # pad, end of text, a new hole
    assert found.render("a", "b") == "<fim_prefix>a<fim_suffix>b<fim_middle>"
    assert detect_infill({"<|im_start|>": 1}.get) is None  # SmolLM2, the dev model
    assert {f[0] for f in FORMATS} >= {"qwen", "starcoder", "deepseek"}
