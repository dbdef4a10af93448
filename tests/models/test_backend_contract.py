"""The ModelBackend contract: one suite, run against every backend on the real dev model.

Parametrized over "vllm" (OpenAIBackend against the real vLLM server, `vllm_server`) and
"embedded" (EmbeddedBackend in this process). What the agent loop and the learner rely on:
token ids and per-token logprobs consistent with the text, streaming equal to completing,
JSON-schema replies that always parse and validate, LoRA adapters loaded at runtime and
selected by name (the AdapterHost protocol), unknown adapters and unreachable backends as
typed errors.

Run one backend: .venv/bin/python -m pytest tests/models/test_backend_contract.py -k vllm -q
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import jsonschema
import pytest
import pytest_asyncio
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from agent_server.models.base import (
    AdapterBackend,
    AdapterHost,
    AdapterNotFound,
    BackendUnavailable,
    ModelBackend,
    ModelError,
    Sampling,
)
from agent_server.models.embedded import EmbeddedBackend, EmbeddedConfig
from agent_server.models.openai_http import OpenAIBackend, OpenAIConfig
from agent_server.models.structured import parse_json
from tests.models.lora import make_lora_adapter

session_loop = pytest.mark.asyncio(loop_scope="session")
KINDS = [pytest.param("vllm", marks=pytest.mark.vllm, id="vllm"), pytest.param("embedded")]
MESSAGES = [
    {"role": "system", "content": "You are a careful Python programmer."},
    {"role": "user", "content": "def fibonacci(n):"},
]
GREEDY = Sampling(max_tokens=32, temperature=0, seed=0)
SCHEMA = {  # every string and number bounded, so a reply always closes within max_tokens
    "type": "object",
    "properties": {
        "file": {"type": "string", "maxLength": 24},
        "kind": {"enum": ["fix", "feature", "docs"]},
        "line": {"type": "integer", "minimum": 1, "maximum": 9999},
        "done": {"type": "boolean"},
    },
    "required": ["file", "kind", "line", "done"],
    "additionalProperties": False,
}


@pytest_asyncio.fixture(scope="module", params=KINDS, loop_scope="session")
async def backend(
    request: pytest.FixtureRequest, dev_model_dir: Path
) -> AsyncIterator[AdapterBackend]:
    if request.param == "vllm":
        server = request.getfixturevalue("vllm_server")
        config = OpenAIConfig(
            base_url=server.base_url, model=server.model, tokenizer_path=str(dev_model_dir)
        )
        made: AdapterBackend = OpenAIBackend(config)
    else:
        made = EmbeddedBackend(EmbeddedConfig(model_dir=dev_model_dir))
    yield made
    await made.aclose()


@pytest.fixture(scope="module")
def tokenizer(dev_model_dir: Path) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(dev_model_dir)


@pytest.fixture(scope="module")
def adapter_dir(dev_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_lora_adapter(dev_model_dir, tmp_path_factory.mktemp("lora") / "a", seed=7)


def kind_of(backend: ModelBackend) -> str:
    return "vllm" if isinstance(backend, OpenAIBackend) else "embedded"


@session_loop
async def test_completion_has_ids_and_logprobs_consistent_with_its_text(
    backend: ModelBackend, tokenizer: PreTrainedTokenizerBase, dev_model_dir: Path
) -> None:
    completion = await backend.complete(MESSAGES, sampling=GREEDY)
    ids, logprobs = completion.token_ids, completion.logprobs
    assert ids and len(logprobs) == len(ids)
    assert all(math.isfinite(lp) and lp <= 0 for lp in logprobs), logprobs
    assert tokenizer.decode(ids, skip_special_tokens=True) == completion.text
    assert completion.finish_reason in {"stop", "length"}
    assert completion.usage.completion_tokens == len(ids)
    prompt_tokens = await asyncio.to_thread(backend.count_tokens, MESSAGES)
    assert completion.usage.prompt_tokens == prompt_tokens
    assert completion.prompt_token_ids is not None  # exact ids: tests/models/test_prompt_ids.py
    assert len(completion.prompt_token_ids) == prompt_tokens
    assert (completion.model, completion.adapter) == (backend.model_name, None)
    config = json.loads((dev_model_dir / "config.json").read_text())
    window = await asyncio.to_thread(lambda: backend.context_window)
    assert window == config["max_position_embeddings"]


@session_loop
async def test_stream_yields_the_same_completion(backend: ModelBackend) -> None:
    completion = await backend.complete(MESSAGES, sampling=GREEDY)
    chunks = [chunk async for chunk in backend.stream(MESSAGES, sampling=GREEDY)]
    assert "".join(c.text for c in chunks) == completion.text
    assert [t for c in chunks for t in c.token_ids] == completion.token_ids
    streamed = [lp for c in chunks for lp in c.logprobs]
    assert streamed == pytest.approx(completion.logprobs, abs=1e-3)
    last = chunks[-1]
    assert last.finish_reason == completion.finish_reason and last.usage == completion.usage
    assert all(c.finish_reason is None and c.usage is None for c in chunks[:-1])


@session_loop
async def test_schema_replies_parse_and_validate_20_of_20(backend: ModelBackend) -> None:
    async def one(seed: int) -> bool:
        sampling = Sampling(max_tokens=96, temperature=1.0, seed=seed)
        completion = await backend.complete(MESSAGES, schema=SCHEMA, sampling=sampling)
        try:
            jsonschema.validate(parse_json(completion.text), SCHEMA)
        except (ValueError, jsonschema.ValidationError):
            return False
        return len(completion.logprobs) == len(completion.token_ids)

    results = await asyncio.gather(*(one(seed) for seed in range(20)))
    assert sum(results) == 20, results


@session_loop
async def test_a_lora_adapter_loads_at_runtime_and_is_selected_by_name(
    backend: AdapterBackend, adapter_dir: Path
) -> None:
    assert isinstance(backend, AdapterHost)
    name = f"contract-{kind_of(backend)}-v1"
    await backend.load_adapter(name, adapter_dir)
    assert name in await backend.adapter_names()
    assert backend.model_name not in await backend.adapter_names()
    base = await backend.complete(MESSAGES, sampling=GREEDY)
    tuned = await backend.complete(MESSAGES, sampling=GREEDY, adapter=name)
    assert tuned.adapter == name and base.adapter is None
    assert tuned.token_ids != base.token_ids, "the adapter did not change the output"

    backend.use_adapter(name)  # the deployed version: served when a call names none
    try:
        assert backend.adapter == name
        by_default = await backend.complete(MESSAGES, sampling=GREEDY)
    finally:
        backend.use_adapter(None)
    assert (by_default.adapter, by_default.token_ids) == (name, tuned.token_ids)
    again = await backend.complete(MESSAGES, sampling=GREEDY)
    assert (again.adapter, again.token_ids) == (None, base.token_ids)

    await backend.unload_adapter(name)
    assert name not in await backend.adapter_names()
    with pytest.raises(AdapterNotFound):
        await backend.complete(MESSAGES, sampling=GREEDY, adapter=name)


@session_loop
async def test_an_unknown_adapter_is_AdapterNotFound(backend: ModelBackend) -> None:
    with pytest.raises(AdapterNotFound) as caught:
        await backend.complete(MESSAGES, sampling=GREEDY, adapter="never-loaded-v9")
    assert caught.value.code == "adapter_not_found"
    with pytest.raises(AdapterNotFound):
        async for _ in backend.stream(MESSAGES, sampling=GREEDY, adapter="never-loaded-v9"):
            pass


@session_loop
async def test_an_unreachable_backend_fails_typed_within_its_timeout(
    backend: ModelBackend, dev_model_dir: Path
) -> None:
    """vllm: a closed port with a 2 s timeout. embedded (no server): a closed backend."""
    timeout_s = 2.0
    if kind_of(backend) == "vllm":
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]  # nothing listens once the socket is closed
        down: ModelBackend = OpenAIBackend(
            OpenAIConfig(base_url=f"http://127.0.0.1:{port}/v1", timeout_s=timeout_s)
        )
        expected: type[ModelError] = BackendUnavailable
    else:
        down = EmbeddedBackend(EmbeddedConfig(model_dir=dev_model_dir))
        await down.aclose()
        expected = ModelError
    start = time.monotonic()
    with pytest.raises(expected):
        await down.complete(MESSAGES, sampling=GREEDY)
    assert time.monotonic() - start < timeout_s + 0.5
    await down.aclose()
