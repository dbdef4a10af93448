"""OpenAIBackend specifics (what the backend contract suite does not cover).

Against the real vLLM server (`vllm_server`): runtime LoRA load/list/unload, /tokenize
counting, context window from /v1/models, tool requests. Against real sockets: a closed port,
a server that never answers, and a loopback HTTP server that answers 503 before succeeding
(the one case vLLM cannot be made to produce on demand). Config validation and the factory.

Run: .venv/bin/python -m pytest tests/models/test_openai_backend.py -q
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from transformers import AutoTokenizer

from agent_server.models.base import (
    AdapterNotFound,
    BackendUnavailable,
    ContextWindowExceeded,
    ModelBackend,
    ModelError,
    Sampling,
)
from agent_server.models.factory import build_backend, openai_config
from agent_server.models.openai_http import OpenAIBackend, OpenAIConfig
from agent_server.models.openai_wire import parse_completion
from ground.settings import Settings
from tests.models.lora import make_lora_adapter

# One event loop for the run: the session-scoped server and module fixtures share it.
session_loop = pytest.mark.asyncio(loop_scope="session")
MESSAGES = [{"role": "user", "content": "def add(a, b):"}]
GREEDY = Sampling(max_tokens=12, temperature=0, seed=0)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket closes


@pytest_asyncio.fixture(loop_scope="session")
async def backend(vllm_server) -> AsyncIterator[OpenAIBackend]:
    b = OpenAIBackend(OpenAIConfig(base_url=vllm_server.base_url, model=vllm_server.model))
    yield b
    await b.aclose()


# -- config and factory ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "fix"),
    [
        ({"base_url": "127.0.0.1:8000/v1"}, "http(s) URL"),
        ({"model": ""}, "--served-model-name"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"retries": -1}, "retries"),
        ({"backoff_s": 2.0, "backoff_max_s": 1.0}, "backoff_max_s"),
        ({"tool_choice": "sometimes"}, "tool_choice"),
        ({"tokenizer_path": "/no/such/dir"}, "tokenizer_path"),
        ({"context_window": 0}, "context_window"),
    ],
)
def test_config_says_how_to_fix_a_bad_value(kwargs: dict, fix: str) -> None:
    with pytest.raises(ValueError, match=re.escape(fix)):
        OpenAIConfig(**kwargs)


def test_factory_builds_the_http_backend_from_settings(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path,
        model_backend="openai",
        model_url="http://10.0.0.5:8000/v1",
        model_name="my-model",
        model_api_key="k",
        model_timeout_s=7,
    )
    backend = build_backend(settings)
    assert isinstance(backend, OpenAIBackend)
    assert backend.config == OpenAIConfig(
        base_url="http://10.0.0.5:8000/v1", model="my-model", api_key="k", timeout_s=7
    )
    # A local model directory means "the dir scripts/vllm-serve.sh serves": served name, and
    # tokens counted with that directory's tokenizer.
    (tmp_path / "m").mkdir()
    local = openai_config(settings.model_copy(update={"model_name": str(tmp_path / "m")}))
    assert (local.model, local.tokenizer_path) == ("apprentice-dev", str(tmp_path / "m"))


def test_the_http_backend_satisfies_the_protocol() -> None:
    # context_window is given: on Python 3.11 isinstance() reads every protocol member, and
    # an unknown window would be fetched from the server.
    config = OpenAIConfig(base_url="http://127.0.0.1:9/v1", context_window=1024)
    assert isinstance(OpenAIBackend(config), ModelBackend)


# -- the server is down or broken ---------------------------------------------------------------
@session_loop
async def test_closed_port_retries_with_backoff_then_is_unavailable_in_time() -> None:
    config = OpenAIConfig(
        base_url=f"http://127.0.0.1:{closed_port()}/v1", timeout_s=2.0, retries=3, backoff_s=0.25
    )
    backend = OpenAIBackend(config)
    start = time.monotonic()
    with pytest.raises(BackendUnavailable, match="4 attempt"):
        await backend.complete(MESSAGES, sampling=GREEDY)
    elapsed = time.monotonic() - start
    await backend.aclose()
    # Waits of 0.25 + 0.5 + 1.0 s between the 4 attempts, all inside the 2 s budget.
    assert 1.6 <= elapsed < 2.0 + 0.5, elapsed
    assert BackendUnavailable.code == "model_unavailable"


@session_loop
async def test_a_server_that_never_answers_times_out_as_unavailable() -> None:
    with socket.socket() as silent:  # accepts connections (backlog), never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        backend = OpenAIBackend(OpenAIConfig(base_url=f"http://127.0.0.1:{port}/v1", timeout_s=1.5))
        start = time.monotonic()
        with pytest.raises(BackendUnavailable, match="within 1.5 s"):
            await backend.complete(MESSAGES, sampling=GREEDY)
        elapsed = time.monotonic() - start
        with pytest.raises(BackendUnavailable):
            async for _ in backend.stream(MESSAGES, sampling=GREEDY):
                pass
        await backend.aclose()
    assert 1.4 <= elapsed < 1.5 + 0.5, elapsed


@session_loop
async def test_503_is_retried_and_the_next_answer_is_used(vllm_server) -> None:
    """A loopback server answers 503 twice, then relays a real vLLM reply."""
    body = json.dumps(await _raw_reply(vllm_server)).encode()
    hits: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        headers = dict(line.lower().split(b":", 1) for line in head.split(b"\r\n") if b":" in line)
        await reader.readexactly(int(headers[b"content-length"]))
        hits.append(1)
        if len(hits) <= 2:
            writer.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
            writer.write(b"content-length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    backend = OpenAIBackend(
        OpenAIConfig(base_url=f"http://127.0.0.1:{port}/v1", timeout_s=10, backoff_s=0.05)
    )
    completion = await backend.complete(MESSAGES, sampling=GREEDY)
    await backend.aclose()
    server.close()
    assert len(hits) == 3
    assert completion.token_ids and len(completion.logprobs) == len(completion.token_ids)


async def _raw_reply(vllm_server) -> dict:
    import httpx

    async with httpx.AsyncClient(timeout=60) as client:
        response = await client.post(
            f"{vllm_server.base_url}/chat/completions",
            json={
                "model": vllm_server.model,
                "messages": MESSAGES,
                "max_tokens": 4,
                "temperature": 0,
                "logprobs": True,
                "return_token_ids": True,
                "return_tokens_as_token_ids": True,
            },
        )
    response.raise_for_status()
    return response.json()


# -- against the real vLLM server --------------------------------------------------------------
@session_loop
async def test_runtime_lora_load_list_select_unload(
    backend: OpenAIBackend, vllm_server, tmp_path: Path
) -> None:
    adapter_dir = make_lora_adapter(vllm_server.model_dir, tmp_path / "policy-v1", seed=3)
    await backend.load_adapter("policy-v1", adapter_dir)
    models = {m["id"]: m for m in await backend.list_models()}
    assert models["policy-v1"]["parent"] == vllm_server.model
    assert models[vllm_server.model]["max_model_len"] == backend.context_window

    backend.use_adapter("policy-v1")
    served = await backend.complete(MESSAGES, sampling=GREEDY)
    assert served.adapter == "policy-v1" and served.model == vllm_server.model
    backend.use_adapter(None)

    await backend.load_adapter("policy-v1", adapter_dir)  # the same version again: no-op
    other = make_lora_adapter(vllm_server.model_dir, tmp_path / "other", seed=4)
    with pytest.raises(ModelError, match="new name"):  # one name, one version
        await backend.load_adapter("policy-v1", other)
    await backend.unload_adapter("policy-v1")
    assert "policy-v1" not in {m["id"] for m in await backend.list_models()}
    with pytest.raises(AdapterNotFound):
        await backend.unload_adapter("policy-v1")
    with pytest.raises(AdapterNotFound):
        await backend.complete(MESSAGES, sampling=GREEDY, adapter="policy-v1")
    with pytest.raises(AdapterNotFound):
        await backend.load_adapter("policy-v2", tmp_path / "missing")


@session_loop
async def test_a_prompt_beyond_the_window_and_a_closed_backend_are_typed_errors(
    vllm_server,
) -> None:
    backend = OpenAIBackend(OpenAIConfig(base_url=vllm_server.base_url, model=vllm_server.model))
    window = await asyncio.to_thread(lambda: backend.context_window)
    too_long = [{"role": "user", "content": "def f(): pass\n" * (4 * window)}]  # > 1 token a line
    with pytest.raises(ContextWindowExceeded, match="maximum context length"):
        await backend.complete(too_long, sampling=GREEDY)
    await backend.aclose()
    with pytest.raises(ModelError, match="closed"):
        await backend.complete(MESSAGES, sampling=GREEDY)


@session_loop
async def test_count_tokens_via_tokenize_matches_the_local_tokenizer(
    backend: OpenAIBackend, vllm_server
) -> None:
    remote = await asyncio.to_thread(backend.count_tokens, MESSAGES)
    local = OpenAIBackend(
        OpenAIConfig(
            base_url=vllm_server.base_url,
            model=vllm_server.model,
            tokenizer_path=str(vllm_server.model_dir),
        )
    )
    tokenizer = AutoTokenizer.from_pretrained(vllm_server.model_dir)
    expected = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True)
    expected = expected["input_ids"] if hasattr(expected, "keys") else expected
    assert remote == local.count_tokens(MESSAGES) == len(expected)
    await local.aclose()


@session_loop
async def test_context_window_is_the_servers_max_model_len(
    backend: OpenAIBackend, vllm_server
) -> None:
    config = json.loads((vllm_server.model_dir / "config.json").read_text())
    window = await asyncio.to_thread(lambda: backend.context_window)
    assert window == config["max_position_embeddings"]


@session_loop
async def test_tools_are_sent_and_the_reply_parses(backend: OpenAIBackend, vllm_server) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file of the workspace.",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string", "maxLength": 20}},
                    "required": ["path"],
                },
            },
        }
    ]
    completion = await backend.complete(MESSAGES, tools=tools, sampling=GREEDY)
    assert completion.finish_reason in {"stop", "length", "tool_calls"}
    assert len(completion.token_ids) == len(completion.logprobs) >= 1

    # tool_choice="required" makes the server force its tool-call format (hermes), which
    # shows the tools reached it; the untrained model then rambles inside the arguments.
    forced = OpenAIBackend(
        OpenAIConfig(base_url=vllm_server.base_url, model=vllm_server.model, tool_choice="required")
    )
    strict_tools = [{**tools[0], "function": {**tools[0]["function"], "strict": True}}]
    reply = await forced.complete(
        MESSAGES, tools=strict_tools, sampling=Sampling(max_tokens=48, temperature=0)
    )
    await forced.aclose()
    # Either vLLM's hermes parser extracted a whole call, or the forced prefix is in the text.
    parsed = [call.name for call in reply.tool_calls] == ["read_file"]
    assert parsed or re.match(r'<tool_call>\s*\{"name": "read_file"', reply.text), reply


def test_tool_calls_in_a_reply_become_ToolCalls() -> None:
    """vLLM's hermes parser reply shape (the dev model is too untrained to call on cue)."""
    data = {
        "choices": [
            {
                "message": {
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "chatcmpl-tool-1",
                            "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
                "logprobs": {"content": [{"token": "token_id:7", "logprob": -0.5}]},
                "token_ids": [7],
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
    completion = parse_completion(data, model="m", adapter=None)
    assert completion.finish_reason == "tool_calls" and completion.text == ""
    assert [(c.id, c.name, json.loads(c.arguments)) for c in completion.tool_calls] == [
        ("chatcmpl-tool-1", "read_file", {"path": "a.py"})
    ]
