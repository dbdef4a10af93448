"""Learning cycles of bench/online_learning.py, through the admin API: trigger, wait, report.

    learned = await learn(system, cycle)     # the run's verdict, figures and seconds
    adapter = await served_adapter(system)   # the adapter completions come from now

Not a test; run the bench: .venv/bin/python bench/online_learning.py --help
"""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
import time
from typing import Any

import httpx

from agent_server.protocol import messages as p
from agent_server.protocol.client import ProtocolClient
from bench.online_system import ADMIN, TOKEN, System
from feedback.vocab import adapter_name


async def served_adapter(system: System) -> str | None:
    client = await ProtocolClient.connect(system.ws, TOKEN)
    try:
        await client.send(p.CompletionRequest(id="probe", path="a.py", prefix="x = ", max_tokens=1))
        return (await client.expect(p.CompletionSuggestion)).adapter
    finally:
        await client.close()


def _ts(value: str | None) -> float | None:
    return dt.datetime.fromisoformat(value).timestamp() if value else None


async def learn(system: System, cycle: dict[str, Any], timeout: float = 1800) -> dict[str, Any]:
    """Trigger a cycle, wait for it (`timeout` s at most; a failed run's error is printed),
    then until its adapter serves; returns what happened."""
    headers = {"Authorization": f"Bearer {ADMIN}"}
    posted = time.time()
    async with httpx.AsyncClient(base_url=system.http, headers=headers, timeout=60) as api:
        queued = (await api.post("/v1/admin/runs", json={"config": cycle})).json()
        deadline = time.monotonic() + timeout
        while True:
            run = (await api.get(f"/v1/admin/runs/{queued['id']}")).json()
            if run["status"] in ("succeeded", "failed", "skipped", "deferred"):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {queued['id']} still {run['status']} after {timeout} s")
            system.check_alive()
            await asyncio.sleep(0.5)
    if run["status"] == "failed":  # a dead worker's run too: the server's reaper fails it
        print(f"run {queued['id']} failed: {run['error']}", file=sys.stderr, flush=True)
    steps = {s["name"]: s for s in run["steps"]}
    metrics = {name: s.get("metrics", {}) for name, s in steps.items()}
    if run["status"] == "succeeded":
        want = adapter_name(run["adapter_version"])
        while await served_adapter(system) != want:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{want} deployed but not served after {timeout} s")
            system.check_alive()
            await asyncio.sleep(0.25)
    done = time.time()
    deploy_start = _ts(steps.get("deploy", {}).get("started")) or done
    steps_s = {
        name: round(end - start, 2)
        for name, s in steps.items()
        if (start := _ts(s.get("started"))) and (end := _ts(s.get("finished")))
    }
    train = metrics.get("train", {})
    evaluation = metrics.get("evaluate", {})
    return {
        "run_status": run["status"], "run_error": run["error"],
        "adapter_version": run["adapter_version"],
        "adapter_path": metrics.get("publish", {}).get("path"),
        "train_s": round(deploy_start - posted, 2), "deploy_s": round(done - deploy_start, 2),
        "steps_s": steps_s, "dataset": run.get("dataset"),
        "train_steps": train.get("steps"), "train_tokens_per_s": train.get("tokens_per_s"),
        "final_loss": train.get("final_loss"),
        "heldout": evaluation.get("candidate"), "serving_heldout": evaluation.get("serving"),
        "decision": evaluation.get("decision") or _verdict(run["status"]),
        "evidence": evaluation.get("evidence"), "kl_to_serving": evaluation.get("kl_to_serving"),
        "gate_perplexity": evaluation.get("perplexity"),
    }  # fmt: skip


def _verdict(status: str) -> str:
    """A run that ended before its evaluate step: what it amounts to for the gate's count."""
    return {"deferred": "defer", "skipped": "skipped"}.get(status, status)
