"""Online learning, measured: does the served model learn what a person accepts, in minutes?

    .venv/bin/python bench/online_learning.py [--accept-regex REGEX] [--rounds N]
        [--backend vllm|embedded] [--suggestions 64] [--broker-url URL] [--database-url URL]

A simulated user accepts an inline completion exactly when its text matches REGEX and
rejects it otherwise. The bench starts the whole system in a temporary APPRENTICE_HOME:
the dev model (.cache/dev-model, built if missing), vLLM (from .vllm-venv; or the embedded
backend), `apprentice serve`, `apprentice worker` (embedded SQLite broker unless
--broker-url) and a migrated database (SQLite unless --database-url); then it talks to it
only through the real interfaces: the WebSocket protocol for completions and outcomes, the
admin API to trigger a learning cycle and read its result.

Round r (0 <= r < N): serve SUGGESTIONS completions on fresh code prompts (stdlib files,
seeded by r) -> the user's outcomes -> POST /v1/admin/runs -> wait for the run -> wait
until completions are served by the deployed adapter. Round N only serves and measures.
Prints one JSON object on stdout: {"rounds": [{"round", "acceptance_rate", "wall_s", ...}],
"ratio": rate(N) / rate(0), "goal_met": ratio >= 1.5 and every round under 180 s, ...}.
The default regex `file` matched about 30% of the dev model's completions (10-50% wanted).
Never part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent_server.protocol import messages as p  # noqa: E402
from agent_server.protocol.client import ProtocolClient  # noqa: E402
from feedback.vocab import adapter_name  # noqa: E402

TOKEN, ADMIN = "bench-token-0123456789abcdef", "bench-admin-0123456789abcdef"
DEFAULT_REGEX = "file"
# Learning config per cycle: small data, a few epochs; outcomes are stored before their
# acknowledgement arrives, so no settling delay is needed.
CYCLE = {"data": {"settle_s": 0.0}, "train": {"epochs": 3.0, "max_seconds": 120}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def code_prompts(n: int, seed: int) -> list[tuple[str, str]]:
    """(file name, prefix) pairs: ~15 lines of a stdlib file, cut before an indented line."""
    rng = random.Random(seed)
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    out: list[tuple[str, str]] = []
    while len(out) < n:
        path = rng.choice(files)
        lines = path.read_text(errors="replace").splitlines()
        if len(lines) < 40:
            continue
        cut = rng.randrange(10, len(lines) - 5)
        indent = re.match(r"\s*", lines[cut]).group(0)  # type: ignore[union-attr]
        out.append((path.name, "\n".join(lines[max(0, cut - 15) : cut]) + "\n" + indent))
    return out


class System:
    """The processes of one Apprentice installation, started in order, stopped together."""

    def __init__(self, args: argparse.Namespace, home: Path) -> None:
        self.args, self.home = args, home
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs = home / "logs"
        self.logs.mkdir(parents=True)
        self.port = free_port()
        self.env = {
            "APPRENTICE_HOME": str(home), "APPRENTICE_TOKEN": TOKEN,
            "APPRENTICE_ADMIN_TOKEN": ADMIN, "APPRENTICE_PORT": str(self.port),
            "APPRENTICE_LEARNER_INTERVAL_S": "0", "OMP_WAIT_POLICY": "PASSIVE",
            "APPRENTICE_LOG_LEVEL": "WARNING",
        }  # fmt: skip
        if args.database_url:
            self.env["APPRENTICE_DATABASE_URL"] = args.database_url
        if args.broker_url:
            self.env |= {"APPRENTICE_BROKER_URL": args.broker_url,
                         "APPRENTICE_RESULT_BACKEND": args.broker_url,
                         "APPRENTICE_LEARNER_QUEUE": f"bench-{uuid.uuid4().hex[:8]}"}  # fmt: skip

    def spawn(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with (self.logs / f"{name}.log").open("wb") as log:
            proc = subprocess.Popen(argv, cwd=REPO, env={**os.environ, **env}, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        self.procs.append(proc)
        return proc

    def wait_http(self, url: str, proc: subprocess.Popen[bytes], name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited {proc.returncode}:\n{tail}")
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"{name} not up at {url} after {timeout:.0f} s")

    def start(self) -> None:
        from feedback.migrate import upgrade
        from tests.fixtures.models import CACHE, ensure_dev_model

        model = ensure_dev_model(CACHE)
        self.env["APPRENTICE_MODEL_NAME"] = str(model)
        upgrade(self.args.database_url or f"sqlite:///{self.home / 'apprentice.db'}")
        if self.args.backend == "vllm":
            from agent_server.models.vllm_command import server_command, server_env

            vport = free_port()
            vllm = self.spawn("vllm", server_command(model, vport), server_env())
            self.wait_http(f"http://127.0.0.1:{vport}/health", vllm, "vllm", 600)
            self.env |= {"APPRENTICE_MODEL_BACKEND": "openai",
                         "APPRENTICE_MODEL_URL": f"http://127.0.0.1:{vport}/v1"}  # fmt: skip
        cli = [sys.executable, "-m", "apprentice.cli"]
        server = self.spawn("server", [*cli, "serve"], self.env)
        self.wait_http(f"{self.http}/healthz", server, "server", 300)
        self.spawn("worker", [*cli, "worker"], self.env | {"APPRENTICE_LOG_LEVEL": "INFO"})

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


async def serve_round(
    system: System, pattern: re.Pattern[str], n: int, seed: int
) -> dict[str, Any]:
    """n completions, each accepted iff it matches; outcomes acknowledged before returning."""
    client = await ProtocolClient.connect(f"ws://127.0.0.1:{system.port}/v1/ws", TOKEN)
    accepted, adapters, examples = 0, set(), []
    try:
        for i, (name, prefix) in enumerate(code_prompts(n, seed)):
            await client.send(p.CompletionRequest(id=f"c{i}", path=name, language="python",
                                                  prefix=prefix, max_tokens=24))  # fmt: skip
            reply = await client.expect(p.CompletionSuggestion)
            ok = bool(pattern.search(reply.text))
            accepted += ok
            adapters.add(reply.adapter)
            if len(examples) < 3:
                examples.append(reply.text[:80])
            await client.send(
                p.EditOutcome(suggestion_id=reply.suggestion_id, client_event_id=uuid.uuid4().hex,
                              outcome="accepted" if ok else "rejected")  # type: ignore[arg-type]
            )  # fmt: skip
            await client.expect(p.OutcomeAck)
    finally:
        await client.close()
    return {"acceptance_rate": accepted / n, "accepted": accepted, "suggestions": n,
            "served_by": sorted(map(str, adapters)), "examples": examples}  # fmt: skip


async def served_adapter(system: System) -> str | None:
    client = await ProtocolClient.connect(f"ws://127.0.0.1:{system.port}/v1/ws", TOKEN)
    try:
        await client.send(p.CompletionRequest(id="probe", path="a.py", prefix="x = ", max_tokens=1))
        return (await client.expect(p.CompletionSuggestion)).adapter
    finally:
        await client.close()


async def learn(system: System, timeout: float = 900) -> dict[str, Any]:
    """Trigger a cycle, wait for it, then until its adapter serves; returns what happened."""
    headers = {"Authorization": f"Bearer {ADMIN}"}
    async with httpx.AsyncClient(base_url=system.http, headers=headers, timeout=60) as api:
        queued = (await api.post("/v1/admin/runs", json={"config": CYCLE})).json()
        deadline = time.monotonic() + timeout
        while True:
            run = (await api.get(f"/v1/admin/runs/{queued['id']}")).json()
            if run["status"] in ("succeeded", "failed", "skipped"):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {queued['id']} still {run['status']} after {timeout} s")
            await asyncio.sleep(0.5)
    steps = {s["name"]: s.get("metrics", {}) for s in run["steps"]}
    if run["status"] == "succeeded":
        want = adapter_name(run["adapter_version"])
        while await served_adapter(system) != want:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{want} deployed but not served after {timeout} s")
            await asyncio.sleep(0.25)
    evaluation = steps.get("evaluate", {})
    return {
        "run_status": run["status"], "run_error": run["error"],
        "adapter_version": run["adapter_version"],
        "train_steps": steps.get("train", {}).get("steps"),
        "train_tokens_per_s": steps.get("train", {}).get("tokens_per_s"),
        "heldout": evaluation.get("candidate"), "serving_heldout": evaluation.get("serving"),
    }  # fmt: skip


async def run_bench(args: argparse.Namespace, system: System) -> dict[str, Any]:
    pattern = re.compile(args.accept_regex)
    rounds = []
    for r in range(args.rounds + 1):
        started = time.monotonic()
        served = await serve_round(system, pattern, args.suggestions, seed=r)
        serve_s = time.monotonic() - started
        learned = await learn(system) if r < args.rounds else None
        rounds.append({"round": r, **served, "wall_s": round(time.monotonic() - started, 2),
                       "serve_s": round(serve_s, 2), "learn": learned})  # fmt: skip
        print(json.dumps(rounds[-1]), file=sys.stderr, flush=True)
    first, last = rounds[0]["acceptance_rate"], rounds[-1]["acceptance_rate"]
    ratio = last / first if first else None
    slowest = max(x["wall_s"] for x in rounds)
    return {
        "regex": args.accept_regex, "backend": args.backend, "suggestions": args.suggestions,
        "rounds": rounds, "ratio": ratio, "max_round_wall_s": slowest,
        "goal_met": bool(ratio is not None and ratio >= 1.5 and slowest < 180),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--accept-regex", default=DEFAULT_REGEX)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--suggestions", type=int, default=64, help="completions per round")
    default_backend = "vllm" if (REPO / ".vllm-venv" / "bin" / "python").exists() else "embedded"
    parser.add_argument("--backend", choices=["vllm", "embedded"], default=default_backend)
    parser.add_argument("--broker-url", default="", help="e.g. redis://127.0.0.1:6379/12")
    parser.add_argument("--database-url", default="", help="default: SQLite in the temp home")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="apprentice-bench-") as tmp:
        system = System(args, Path(tmp) / "home")
        try:
            system.start()
            result = asyncio.run(run_bench(args, system))
        finally:
            system.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
