"""How much OpenAIBackend adds over a bare HTTP request to the same vLLM server.

Runs N short greedy completions through `OpenAIBackend.complete` and N raw httpx POSTs of the
identical JSON body (the one the backend sends, parsed with `.json()` on both sides),
interleaved and alternating which goes first so server drift hits both equally. Prints JSON:
per-call p50 and mean for each, and their ratios (goal: backend/raw <= 1.05); then
`client_only`: both paths against a canned copy of a real reply (httpx.MockTransport), the
client-side cost alone in microseconds, which a busy machine's noise cannot hide.

    .venv/bin/python bench/backend_overhead.py [--model PATH]      # starts its own server
    .venv/bin/python bench/backend_overhead.py --base-url http://127.0.0.1:8000/v1 -n 100

Without --base-url it serves --model (any checkpoint folder; default: $APPRENTICE_TEST_MODEL
or .cache/dev-model) with the command line of scripts/vllm-serve.sh and stops it afterwards;
--served-name is the model name the requests carry. Never part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent_server.models.base import Sampling  # noqa: E402
from agent_server.models.openai_http import OpenAIBackend, OpenAIConfig  # noqa: E402
from agent_server.models.openai_wire import chat_payload  # noqa: E402
from agent_server.models.vllm_command import SERVED_NAME, server_command, server_env  # noqa: E402

MESSAGES = [{"role": "user", "content": "def add(a, b):"}]


def start_server(model_dir: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log_path = Path(tempfile.mkdtemp(prefix="bench-vllm-")) / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            server_command(model_dir, port),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=server_env(),
            start_new_session=True,  # one killpg stops the engine-core child too
        )
    root = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"vLLM exited during startup; see {log_path}")
        try:
            if httpx.get(f"{root}/health", timeout=2).status_code == 200:
                return process, f"{root}/v1", log_path
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    os.killpg(process.pid, signal.SIGKILL)
    sys.exit(f"vLLM not healthy after 300 s; see {log_path}")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(samples) * 1000, 3),
        "mean_ms": round(statistics.fmean(samples) * 1000, 3),
    }


async def measure(base_url: str, model: str, n: int, max_tokens: int, warmup: int) -> dict:
    sampling = Sampling(max_tokens=max_tokens, temperature=0, seed=0)
    body = chat_payload(model, MESSAGES, sampling)
    backend = OpenAIBackend(OpenAIConfig(base_url=base_url, model=model, timeout_s=300))
    raw_client = httpx.AsyncClient(timeout=300)
    url = f"{base_url.rstrip('/')}/chat/completions"

    async def via_backend() -> float:
        start = time.perf_counter()
        completion = await backend.complete(MESSAGES, sampling=sampling)
        elapsed = time.perf_counter() - start
        assert completion.token_ids
        return elapsed

    async def via_raw() -> float:
        start = time.perf_counter()
        response = await raw_client.post(url, json=body)
        response.raise_for_status()
        data = response.json()
        elapsed = time.perf_counter() - start
        assert data["choices"][0]["token_ids"]
        return elapsed

    for _ in range(warmup):  # first requests pay one-off costs on both paths
        await via_backend()
        await via_raw()
    ours: list[float] = []
    raw: list[float] = []
    for i in range(n):
        if i % 2 == 0:
            ours.append(await via_backend())
            raw.append(await via_raw())
        else:
            raw.append(await via_raw())
            ours.append(await via_backend())
    reply = (await raw_client.post(url, json=body)).content
    await backend.aclose()
    await raw_client.aclose()
    backend_s, raw_s = summary(ours), summary(raw)
    return {
        "n": n,
        "max_tokens": max_tokens,
        "backend": backend_s,
        "raw_httpx": raw_s,
        "ratio_p50": round(backend_s["p50_ms"] / raw_s["p50_ms"], 4),
        "ratio_mean": round(backend_s["mean_ms"] / raw_s["mean_ms"], 4),
        "goal_ratio": 1.05,
        "client_only": await client_only(base_url, model, sampling, reply),
    }


async def client_only(base_url: str, model: str, sampling: Sampling, reply: bytes) -> dict:
    """The same two paths against a canned copy of a real reply: the client's own cost,
    free of the server's (and of a busy machine's) noise."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=reply, headers={"content-type": "application/json"})

    transport = httpx.MockTransport(answer)
    backend = OpenAIBackend(OpenAIConfig(base_url=base_url, model=model), transport=transport)
    raw_client = httpx.AsyncClient(transport=transport)
    body = chat_payload(model, MESSAGES, sampling)
    url = f"{base_url.rstrip('/')}/chat/completions"
    ours: list[float] = []
    raw: list[float] = []
    for i in range(4000):
        start = time.perf_counter()
        if i % 2:
            await backend.complete(MESSAGES, sampling=sampling)
            ours.append(time.perf_counter() - start)
        else:
            (await raw_client.post(url, json=body)).json()
            raw.append(time.perf_counter() - start)
    await backend.aclose()
    await raw_client.aclose()
    ours_us, raw_us = statistics.median(ours) * 1e6, statistics.median(raw) * 1e6
    return {
        "calls": len(ours),
        "backend_p50_us": round(ours_us, 1),
        "raw_httpx_p50_us": round(raw_us, 1),
        "added_p50_us": round(ours_us - raw_us, 1),
    }


def main() -> None:
    default_model = os.environ.get("APPRENTICE_TEST_MODEL", str(REPO / ".cache" / "dev-model"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", help="an already running server (.../v1)")
    parser.add_argument("--model", "--model-dir", dest="model_dir", type=Path,
                        default=Path(default_model), help="model folder to serve")  # fmt: skip
    parser.add_argument("--served-name", default=SERVED_NAME, help="model name in requests")
    parser.add_argument("-n", type=int, default=50, help="completions per path")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()

    process = None
    base_url = args.base_url
    if base_url is None:
        if not (args.model_dir / "config.json").is_file():
            sys.exit(
                f"{args.model_dir} holds no model: build one with "
                f"`apprentice model build-dev --out {args.model_dir}`, or pass --base-url"
            )
        process, base_url, log_path = start_server(args.model_dir)
        print(f"started vLLM at {base_url} (log {log_path})", file=sys.stderr)
    try:
        result = asyncio.run(
            measure(base_url, args.served_name, args.n, args.max_tokens, args.warmup)
        )
    finally:
        if process is not None:
            stop_server(process)
    result["server"] = base_url if args.base_url else "started by the benchmark"
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
