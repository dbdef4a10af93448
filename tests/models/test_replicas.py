"""`ReplicaPool` and the multi-server `VLLMDeployer`, against small real HTTP servers.

Each replica is a `FakeVllm` (tests/models/fake_vllm.py): real sockets, vLLM's endpoints and
errors, a log of what it loaded and served in which order. Spreading, fail-over on a dead
port, no retry once a stream has reached the caller, the health loop taking a replica out and
giving it the serving adapter before it is back, adapter calls on every replica, the factory
and settings, and the deployer's handling of a replica that is down. The same on real vLLM:
tests/models/test_replicas_vllm.py.

    .venv/bin/python -m pytest tests/models/test_replicas.py -q
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from agent_server.models.base import (
    AdapterNotFound,
    BackendUnavailable,
    ModelBackend,
    ModelError,
    Sampling,
    collect_stream,
)
from agent_server.models.deployments import load_and_check
from agent_server.models.factory import build_backend
from agent_server.models.openai_http import OpenAIBackend, OpenAIConfig
from agent_server.models.replicas import ReplicaPool
from ground.settings import Settings
from learner.config import DeployConfig
from learner.deploy import VLLMDeployer
from tests.models.fake_vllm import BASE, FakeVllm

# One event loop for the run, as the session-scoped fixtures' (tests/models/test_openai_backend.py).
session_loop = pytest.mark.asyncio(loop_scope="session")
MESSAGES = [{"role": "user", "content": "def add(a, b):"}]
SAMPLING = Sampling(max_tokens=4, temperature=0)
CONFIG = OpenAIConfig(model=BASE, timeout_s=5, retries=1, backoff_s=0.05, context_window=2048)


@pytest.fixture
def fakes() -> Iterator[list[FakeVllm]]:
    servers = [FakeVllm().start(), FakeVllm().start()]
    yield servers
    for server in servers:
        server.stop()


@pytest_asyncio.fixture
async def pool(fakes: list[FakeVllm]) -> AsyncIterator[ReplicaPool]:
    made = ReplicaPool(CONFIG, [f.base_url for f in fakes], health_interval_s=0.1)
    yield made
    await made.aclose()


async def wait_until(check, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


def adapter_dir(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    return folder


@session_loop
async def test_requests_are_spread_over_the_replicas(pool: ReplicaPool, fakes) -> None:
    assert isinstance(pool, ModelBackend)
    for _ in range(4):
        completion = await pool.complete(MESSAGES, sampling=SAMPLING)
        assert completion.token_ids == [11, 12, 13] and completion.adapter is None
    streamed = await collect_stream(pool.stream(MESSAGES, sampling=SAMPLING), BASE)
    assert streamed.text == "abc" and streamed.token_ids == [11, 12, 13]
    assert sorted(len(f.chats()) for f in fakes) == [2, 3]
    assert [r.requests for r in pool.replicas] == [len(f.chats()) for f in fakes]


@session_loop
async def test_a_dead_replica_is_failed_over_and_leaves_rotation(pool: ReplicaPool, fakes):
    fakes[1].stop()  # connection refused from now on
    for _ in range(4):
        assert (await pool.complete(MESSAGES, sampling=SAMPLING)).text == "abc"
        chunks = [c async for c in pool.stream(MESSAGES, sampling=SAMPLING)]
        assert "".join(c.text for c in chunks) == "abc"
    assert pool.in_rotation == [fakes[0].base_url]
    assert len(fakes[0].chats()) == 8

    fakes[0].stop()
    with pytest.raises(BackendUnavailable) as info:
        await pool.complete(MESSAGES, sampling=SAMPLING)
    assert info.value.code == "model_unavailable"
    await wait_until(lambda: not pool.in_rotation)
    with pytest.raises(BackendUnavailable, match="no model server is in rotation"):
        await pool.complete(MESSAGES, sampling=SAMPLING)


@session_loop
async def test_a_stream_is_not_retried_once_a_chunk_reached_the_caller(pool, fakes) -> None:
    for fake in fakes:
        fake.break_streams = True
    received = []
    with pytest.raises(BackendUnavailable, match="broke"):
        async for chunk in pool.stream(MESSAGES, sampling=SAMPLING):
            received.append(chunk.text)
    assert received == ["a"]
    assert sum(len(f.chats()) for f in fakes) == 1  # not sent again


@session_loop
async def test_a_replica_back_gets_the_serving_adapter_before_traffic(
    pool: ReplicaPool, fakes, tmp_path: Path
) -> None:
    v1 = adapter_dir(tmp_path, "policy-v1")
    await pool.load_adapter("policy-v1", v1)
    pool.use_adapter("policy-v1")
    assert [f.adapters for f in fakes] == [{"policy-v1": str(v1)}] * 2

    fakes[1].healthy = False  # the health loop takes it out
    await pool.complete(MESSAGES, sampling=SAMPLING)  # starts the loop
    await wait_until(lambda: pool.in_rotation == [fakes[0].base_url])
    fakes[1].stop()
    fakes[1].events.clear()

    v2 = adapter_dir(tmp_path, "policy-v2")  # deployed while it is down
    await pool.load_adapter("policy-v2", v2)
    pool.use_adapter("policy-v2")
    for _ in range(3):
        assert (await pool.complete(MESSAGES, sampling=SAMPLING)).adapter == "policy-v2"
    assert fakes[1].chats() == []

    fakes[1].healthy, fakes[1].fail_loads = True, True
    fakes[1].start()  # a new process: no adapters, and at first it cannot load one
    await asyncio.sleep(0.5)  # healthy for several rounds, yet kept out without the adapter
    assert pool.in_rotation == [fakes[0].base_url] and fakes[1].chats() == []
    fakes[1].fail_loads = False
    await wait_until(lambda: len(pool.in_rotation) == 2)
    assert fakes[1].adapters == {"policy-v2": str(v2)}  # only the serving one
    for _ in range(4):
        await pool.complete(MESSAGES, sampling=SAMPLING)
    assert fakes[1].events[0] == ("load", "policy-v2")
    assert fakes[1].chats() == ["policy-v2"] * 2


@session_loop
async def test_adapter_calls_reach_every_replica_and_any_failure_raises(
    pool: ReplicaPool, fakes, tmp_path: Path
) -> None:
    v1 = adapter_dir(tmp_path, "policy-v1")
    await load_and_check(pool, "policy-v1", v1)
    assert await pool.adapter_names() == ["policy-v1"]
    await pool.load_adapter("policy-v1", v1)  # again: a no-op

    fakes[1].fail_loads = True  # the canary through the pool fails: the row would not flip
    with pytest.raises(ModelError, match=fakes[1].base_url):
        await load_and_check(pool, "policy-v2", adapter_dir(tmp_path, "policy-v2"))

    pool.use_adapter("policy-v1")
    await pool.unload_adapter("policy-v1")
    assert pool.adapter is None and list(fakes[0].adapters) == ["policy-v2"]  # loaded there
    assert fakes[1].adapters == {}
    with pytest.raises(AdapterNotFound):
        await pool.unload_adapter("policy-v1")
    with pytest.raises(AdapterNotFound):
        await pool.complete(MESSAGES, sampling=SAMPLING, adapter="policy-v1")


def test_settings_and_factory(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("APPRENTICE_MODEL_URLS", "http://a:8000/v1, http://b:8000/v1")
    settings = Settings(home=tmp_path, model_backend="openai", model_name="served")
    assert settings.model_urls == ["http://a:8000/v1", "http://b:8000/v1"]
    pool = build_backend(settings)
    assert isinstance(pool, ReplicaPool) and pool.in_rotation == settings.model_urls
    assert pool.health_interval_s == settings.model_health_interval_s == 5.0

    monkeypatch.setenv("APPRENTICE_MODEL_URLS", '["http://c:8000/v1"]')
    one = build_backend(Settings(home=tmp_path, model_backend="openai", model_name="served"))
    assert isinstance(one, OpenAIBackend) and one.config.base_url == "http://c:8000/v1"
    monkeypatch.delenv("APPRENTICE_MODEL_URLS")
    plain = build_backend(Settings(home=tmp_path, model_backend="openai", model_name="served"))
    assert isinstance(plain, OpenAIBackend) and plain.config.base_url == Settings().model_url


def deployer(tmp_path: Path, urls: list[str]) -> VLLMDeployer:
    settings = Settings(home=tmp_path, model_backend="openai", model_name=BASE, model_urls=urls)
    return VLLMDeployer(settings, DeployConfig(timeout_s=5))


@session_loop
async def test_the_deployer_loads_on_every_replica_and_skips_one_that_is_down(
    fakes, tmp_path: Path
) -> None:
    urls = [f.base_url for f in fakes]
    v1 = adapter_dir(tmp_path, "policy-v1")
    deploy = deployer(tmp_path, urls)
    details = await deploy.put_into_service("policy-v1", v1)
    assert details["replicas"] == urls and details["skipped"] == []
    assert [f.events for f in fakes] == [[("load", "policy-v1"), ("chat", "policy-v1")]] * 2

    fakes[1].healthy = False  # down at deploy time: skipped, the pool restores it later
    details = await deploy.put_into_service("policy-v2", adapter_dir(tmp_path, "policy-v2"))
    assert (details["replicas"], details["skipped"]) == ([urls[0]], [urls[1]])
    assert "policy-v2" not in fakes[1].adapters
    assert await deploy.retire({"policy-v2"}) == ["policy-v1"]
    assert list(fakes[0].adapters) == ["policy-v2"] and "policy-v1" in fakes[1].adapters

    fakes[1].healthy, fakes[1].fail_loads = True, True  # up but cannot load: the deploy fails
    with pytest.raises(ModelError, match=urls[1]):
        await deploy.put_into_service("policy-v3", adapter_dir(tmp_path, "policy-v3"))
    for fake in fakes:
        fake.healthy = False
    with pytest.raises(BackendUnavailable, match="no model server is up"):
        await deploy.put_into_service("policy-v3", tmp_path / "policy-v3")
    await deploy.aclose()
