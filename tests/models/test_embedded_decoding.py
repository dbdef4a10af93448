"""EmbeddedBackend decoding: logprobs are the model's own log-softmax, schema-constrained
replies parse and validate every time (nested schemas, tight token budgets) with logprobs
renormalised over the allowed tokens, and a schema that cannot compile is a typed error.

The real dev model (`dev_model_dir`) in this process; the rest of the backend's specifics
are in test_embedded_backend.py.
Run: .venv/bin/python -m pytest tests/models/test_embedded_decoding.py -q
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import jsonschema
import pytest
import pytest_asyncio
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from agent_server.agent.actions import action_schema
from agent_server.models.base import ModelError, Sampling
from agent_server.models.constrained import JsonGuide
from agent_server.models.embedded import EmbeddedBackend, EmbeddedConfig

session_loop = pytest.mark.asyncio(loop_scope="session")
MESSAGES = [{"role": "user", "content": "def add(a, b):"}]

ACTION_SCHEMA = {  # the agent's action shape: a tool name plus string arguments
    "type": "object",
    "properties": {
        "tool": {"enum": ["read_file", "edit_file", "run", "finish"]},
        "args": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "maxLength": 24},
                "text": {"type": "string", "maxLength": 40},
            },
            "required": ["path", "text"],
            "additionalProperties": False,
        },
    },
    "required": ["tool", "args"],
    "additionalProperties": False,
}
NESTED_SCHEMA = {
    "type": "object",
    "properties": {
        "kind": {"type": "string", "enum": ["plan", "patch"]},
        "steps": {
            "type": "array",
            "maxItems": 3,
            "items": {
                "type": "object",
                "properties": {
                    "file": {"type": "string", "maxLength": 12},
                    "line": {"type": "integer"},
                    "score": {"type": "number"},
                    "done": {"type": "boolean"},
                    "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}},
                },
                "required": ["file", "line", "done"],
                "additionalProperties": False,
            },
        },
        "meta": {
            "type": "object",
            "properties": {"note": {"type": "string", "maxLength": 10}, "n": {"type": "integer"}},
            "required": ["n"],
            "additionalProperties": False,
        },
    },
    "required": ["kind", "steps", "meta"],
    "additionalProperties": False,
}


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def backend(dev_model_dir: Path) -> AsyncIterator[EmbeddedBackend]:
    b = EmbeddedBackend(EmbeddedConfig(model_dir=Path(dev_model_dir)))
    yield b
    await b.aclose()


@session_loop
async def test_logprobs_are_the_models_own_log_softmax(
    backend: EmbeddedBackend, dev_model_dir: Path
) -> None:
    c = await backend.complete(MESSAGES, sampling=Sampling(max_tokens=20, temperature=1.3, seed=4))
    assert c.prompt_token_ids is not None and len(c.logprobs) == len(c.token_ids) > 0
    expected = _raw_logprobs(Path(dev_model_dir), c.prompt_token_ids, c.token_ids)
    assert torch.allclose(torch.tensor(c.logprobs), expected, atol=1e-3), (c.logprobs, expected)


# -- constrained decoding ----------------------------------------------------------------------
@session_loop
@pytest.mark.parametrize("schema", [ACTION_SCHEMA, NESTED_SCHEMA], ids=["action", "nested"])
async def test_schema_replies_always_parse_and_validate(
    backend: EmbeddedBackend, schema: dict
) -> None:
    seen = set()
    for seed in range(20):
        c = await backend.complete(
            MESSAGES, schema=schema, sampling=Sampling(max_tokens=120, temperature=1.0, seed=seed)
        )
        value = json.loads(c.text)  # strict: no raw control characters either
        jsonschema.validate(value, schema)
        assert c.finish_reason == "stop" and c.token_ids[-1] in backend._stop_token_ids
        seen.add(c.text)
    assert len(seen) > 10  # sampled, not one canned reply


@session_loop
async def test_a_tight_budget_still_closes_the_document(backend: EmbeddedBackend) -> None:
    lengths = set()
    for seed in range(20):
        c = await backend.complete(
            MESSAGES,
            schema=NESTED_SCHEMA,
            sampling=Sampling(max_tokens=30, temperature=1, seed=seed),
        )
        jsonschema.validate(json.loads(c.text), NESTED_SCHEMA)
        assert c.usage.completion_tokens <= 30
        lengths.add(c.usage.completion_tokens)
    assert 30 in lengths  # the budget was what ended (some of) them, and they still closed
    with pytest.raises(ModelError, match="max_tokens"):
        await backend.complete(MESSAGES, schema=NESTED_SCHEMA, sampling=Sampling(max_tokens=5))


def _raw_logprobs(model_dir: Path, prompt: list[int], tokens: list[int]) -> torch.Tensor:
    """The model's own log-softmax of each token, recomputed in one forward pass."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + tokens])).logits[0].float()
    start = len(prompt) - 1
    logprobs = torch.log_softmax(logits[start : start + len(tokens)], dim=-1)
    return logprobs.gather(1, torch.tensor(tokens)[:, None])[:, 0]


@session_loop
async def test_schema_logprobs_are_renormalised_over_the_allowed_tokens(
    backend: EmbeddedBackend, dev_model_dir: Path
) -> None:
    c = await backend.complete(
        MESSAGES, schema=ACTION_SCHEMA, sampling=Sampling(max_tokens=60, temperature=1, seed=8)
    )
    raw = _raw_logprobs(Path(dev_model_dir), c.prompt_token_ids or [], c.token_ids)
    got = torch.tensor(c.logprobs)
    # The grammar mask removes probability mass, so each token's logprob can only go up.
    assert bool((got >= raw - 1e-3).all()), (got, raw)
    assert bool((got > raw + 0.1).any())
    assert bool((got <= 1e-6).all())


@session_loop
async def test_a_schema_that_cannot_compile_is_a_model_error(backend: EmbeddedBackend) -> None:
    with pytest.raises(ModelError) as info:
        await backend.complete(MESSAGES, schema={"type": "no-such-type"})
    assert info.value.code == "schema_unsupported"


def test_the_action_schema_lets_an_edit_quote_and_break_lines(dev_model_dir: Path) -> None:
    """An edit of a line with a string literal, or of two lines, needs `\\"` and `\\n` inside
    `search`: the grammar of the agent's action schema must accept every token of it
    (xgrammar drops escapes from length-bounded strings: agent/actions.py)."""
    tokenizer = AutoTokenizer.from_pretrained(dev_model_dir)
    stop = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    guide = JsonGuide(tokenizer, len(tokenizer), stop)
    args = {"path": "shop/names.py", "search": 'return "hello " - name\n', "replace": "x\\y"}
    action = {"thought": "fix it", "tool": "edit", "args": args}
    text = json.dumps(action, separators=(",", ":"))
    assert '\\"hello \\"' in text and "\\n" in text and "\\\\" in text
    run = guide.start(action_schema())
    for token in guide.encode_text(text):
        run.accept(token)  # raises ModelError on a token the grammar refuses
    assert run.completed
    # And the thought stays bounded: a rambling model still closes the object.
    assert action_schema()["anyOf"][0]["properties"]["thought"]["maxLength"] > 0
