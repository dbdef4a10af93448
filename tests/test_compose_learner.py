"""The learner's layout in docker-compose.yml: a GPU worker on the accel queue, a CPU worker
on the default queue, the GPUs each service reserves, and the artifacts in an object store
(the `objectstore` profile). Checked without a Docker engine, like tests/test_compose.py
(whose helpers this reuses): real `Settings` built from each service's environment, worker
commands parsed by the real CLI, and the object store's shell steps run by a real `sh`
against stand-ins for the `minio` and `mc` binaries (which only the image has).

    .venv/bin/python -m pytest tests/test_compose_learner.py -q
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.test_compose import (
    COMPOSE_TEXT,
    DOT_ENV,
    OURS,
    WORKERS,
    env_of,
    interpolate,
    resolve_cli,
    settings_of,
)

OBJECTSTORE_ENV = DOT_ENV | {
    "APPRENTICE_ARTIFACTS_URL": "s3://apprentice/artifacts",
    "APPRENTICE_S3_ENDPOINT_URL": "http://minio:9000",
    "AWS_ACCESS_KEY_ID": "placeholder-key-id",
    "AWS_SECRET_ACCESS_KEY": "placeholder-secret-key",
}


def services_with(env: dict[str, str]) -> dict[str, Any]:
    return yaml.safe_load(interpolate(COMPOSE_TEXT, env))["services"]


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    return services_with(DOT_ENV)


def consumed(service: dict[str, Any]) -> list[str]:
    """The queues `apprentice worker --queue ...` consumes, as the real CLI parses them."""
    command, params = resolve_cli(service["command"])
    assert command.name == "worker"
    (queues,) = [v for k, v in params.items() if "queue" in k]
    return list(queues or [])


@pytest.mark.parametrize(
    "env",
    [{}, {"APPRENTICE_LEARNER_QUEUE": "cpu-a", "APPRENTICE_LEARNER_ACCEL_QUEUE": "gpu-a"}],
    ids=["defaults", "from-dot-env"],
)
def test_every_process_agrees_on_the_queues_and_each_worker_takes_its_own(
    env, monkeypatch, tmp_path
):
    services = services_with(DOT_ENV | env)
    # Every process that sends learner tasks (the admin API, beat, workers chaining steps).
    queues = {
        name: (s.learner_queue, s.accel_queue)
        for name in sorted(OURS)
        for s in [settings_of(services[name], monkeypatch, tmp_path)]
    }
    assert len(set(queues.values())) == 1, queues
    default, accel = queues["agent-server"]
    if env:
        assert (default, accel) == ("cpu-a", "gpu-a")
    assert accel != default, "train and rollouts must reach the GPU worker alone"
    assert consumed(services["learner-gpu-worker"]) == [accel]
    assert consumed(services["learner-cpu-worker"]) == [default]


def test_the_cpu_worker_reads_the_schedules_threshold(services, monkeypatch, tmp_path):
    # scheduled_cycle goes to the default queue: the CPU worker decides whether to start.
    assert "APPRENTICE_LEARNER_MIN_FEEDBACK" in env_of(services["learner-cpu-worker"])
    beat = settings_of(services["learner-beat"], monkeypatch, tmp_path)
    cpu = settings_of(services["learner-cpu-worker"], monkeypatch, tmp_path)
    assert beat.learner_queue == cpu.learner_queue


def gpus(service: dict[str, Any]) -> list[dict[str, Any]]:
    devices = service.get("deploy", {}).get("resources", {}).get("reservations", {})
    return [d for d in devices.get("devices", []) if "gpu" in d["capabilities"]]


@pytest.mark.parametrize("name", ["vllm", "learner-gpu-worker"])
def test_gpu_reserved(services, name):
    devices = gpus(services[name])
    assert devices and all(d["driver"] == "nvidia" and int(d["count"]) >= 1 for d in devices)


def test_only_vllm_and_the_gpu_worker_reserve_gpus(services):
    assert {n for n, svc in services.items() if gpus(svc)} == {
        "vllm", "learner-gpu-worker"}  # fmt: skip


@pytest.mark.parametrize("tp", ["1", "4"])
def test_vllm_reserves_one_gpu_per_tensor_parallel_shard(tp):
    services = yaml.safe_load(
        interpolate(COMPOSE_TEXT, DOT_ENV | {"VLLM_TENSOR_PARALLEL_SIZE": tp})
    )["services"]
    flags = dict(a.split("=", 1) for a in services["vllm"]["command"] if "=" in a)
    assert flags["--tensor-parallel-size"] == tp
    assert [int(d["count"]) for d in gpus(services["vllm"])] == [int(tp)]
    assert services["vllm"]["ipc"] == "host", "tensor-parallel shards share memory"


def test_gpu_worker_builds_a_cuda_torch_and_the_rest_cpu(services):
    services = services
    build = services["learner-gpu-worker"]["build"]
    assert build["args"]["TORCH_VARIANT"].startswith("cu")
    for name in ("agent-server", "migrate", "learner-beat", "learner-cpu-worker"):
        assert services[name]["build"]["args"]["TORCH_VARIANT"] == "cpu"
    assert services["learner-gpu-worker"]["image"] != services["migrate"]["image"]


def test_the_default_stack_keeps_artifacts_on_the_shared_volume(services, monkeypatch, tmp_path):
    for name in sorted(OURS):
        s = settings_of(services[name], monkeypatch, tmp_path)
        assert (s.artifacts_url, s.s3_endpoint_url) == ("", ""), name
    # The object store is opt-in: nothing of the default stack waits for it.
    for name in ("minio", "minio-init"):
        assert services[name]["profiles"] == ["objectstore"]
    assert not any(
        dep.startswith("minio") for svc in services.values() for dep in svc.get("depends_on", {})
        if "objectstore" not in svc.get("profiles", [])
    )  # fmt: skip


def test_objectstore_settings_reach_every_process(monkeypatch, tmp_path):
    services = services_with(OBJECTSTORE_ENV)
    for name in sorted(OURS):
        s = settings_of(services[name], monkeypatch, tmp_path)
        assert s.artifacts_url == OBJECTSTORE_ENV["APPRENTICE_ARTIFACTS_URL"], name
        endpoint = urlsplit(s.s3_endpoint_url)
        assert endpoint.hostname in services and endpoint.hostname == "minio"
        assert f"--address :{endpoint.port}" in services["minio"]["command"][0]
        has_keys = bool(env_of(services[name]).get("AWS_SECRET_ACCESS_KEY"))
        assert has_keys == (name in WORKERS), f"{name}: only the learner workers hold the keys"


def run_sh(script: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`sh -c SCRIPT` with stand-ins for `mc` and `minio` that log their arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("mc", "minio"):
        stub = bin_dir / tool
        stub.write_text(f'#!/bin/sh\necho "{tool} $*" >> "{tmp_path}/calls"\n')
        stub.chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"
    return subprocess.run(["sh", "-c", script], env={"PATH": path, **env}, text=True,
                          capture_output=True, timeout=30)  # fmt: skip


def calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize(
    ("url", "bucket"),
    [("s3://apprentice/artifacts", "apprentice"), ("s3://team-b", "team-b"), ("", None),
     ("/data/artifacts", None), ("s3:///prefix", None)],
)  # fmt: skip
def test_minio_init_makes_the_bucket_the_artifacts_url_names(url, bucket, tmp_path):
    services = services_with(OBJECTSTORE_ENV | {"APPRENTICE_ARTIFACTS_URL": url})
    init = services["minio-init"]
    assert init["entrypoint"] == ["sh", "-c"]
    done = run_sh(init["command"][0], env_of(init), tmp_path)
    if bucket is None:
        assert done.returncode == 2 and "s3://BUCKET/prefix" in done.stderr
        assert calls(tmp_path) == []
        return
    assert done.returncode == 0, done.stderr
    key, secret = OBJECTSTORE_ENV["AWS_ACCESS_KEY_ID"], OBJECTSTORE_ENV["AWS_SECRET_ACCESS_KEY"]
    assert calls(tmp_path) == [
        f"mc alias set store http://minio:9000 {key} {secret}",
        f"mc mb --ignore-existing store/{bucket}",
    ]
    assert init["depends_on"]["minio"]["condition"] == "service_healthy"


@pytest.mark.parametrize("configured", [True, False])
def test_minio_refuses_to_start_without_credentials(configured, tmp_path):
    services = services_with(OBJECTSTORE_ENV if configured else DOT_ENV)
    minio = services["minio"]
    done = run_sh(minio["command"][0], env_of(minio), tmp_path)
    if configured:
        assert done.returncode == 0, done.stderr
        assert calls(tmp_path) == ["minio server /data --address :9000"]
    else:
        assert done.returncode == 2 and "AWS_SECRET_ACCESS_KEY" in done.stderr
        assert calls(tmp_path) == []
    assert "minio-data" in {v.split(":")[0] for v in minio["volumes"]}
