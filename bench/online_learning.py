"""Online learning, measured: does the served model learn what a person accepts, in minutes?

    .venv/bin/python bench/online_learning.py [--model PATH] [--user regex|intent]
        [--accept-regex REGEX] [--rounds N] [--suggestions 64] [--eval-prompts N]
        [--context LINES] [--clients N] [--backend vllm|embedded] [--epochs E] [--train-seconds S]
        [--lr LR] [--max-length T] [--broker-url URL] [--database-url URL]

The bench starts the whole system in a temporary APPRENTICE_HOME: the model (--model: any
Hugging Face checkpoint folder; default $APPRENTICE_TEST_MODEL or the dev model,
.cache/dev-model, built if missing), vLLM (from .vllm-venv; or the embedded backend),
`apprentice serve`, `apprentice worker` (embedded SQLite broker unless --broker-url) and a
migrated database (SQLite unless --database-url); then it talks to it only through the real
interfaces: the WebSocket protocol for completions (the product's inline completion path,
prompt and all) and outcomes, the admin API to trigger a learning cycle and read its result.

Code comes from the .py files of --code-dir (default: the standard library), split for good
by file name (bench/online_users.py): the learner is only ever given outcomes on prompts
cut from the train files; the held-out files give the perplexity text and the intent user's
measured prompts. Two simulated users:
- `regex` (default): accepts a completion exactly when it matches --accept-regex (default
  `file`). Easy to game: junk that matches is "accepted".
- `intent`: accepts exactly when the completion's first line is the file's real next line
  (modulo surrounding whitespace). Its acceptance is measured on --eval-prompts prompts cut
  from held-out files (the same prompts every round; their outcomes are never sent).

Round r (0 <= r < N): serve --suggestions completions on fresh train-file prompts (seeded by
r; --clients connections at once, default 4, so the model server can batch them), send the
user's outcomes; serve the held-out prompts (if any); held-out code perplexity
of the served policy (base + deployed adapter, computed here with transformers + peft);
POST /v1/admin/runs -> wait for the run -> wait until completions come from its adapter.
Round N only serves and measures. Per round: acceptance (`acceptance_rate`: on the
train-file prompts for regex, on the held-out prompts for intent; both reported),
`distinct_share` (distinct completion texts / completions), `perplexity`, and wall seconds
split into `serve_s` (completions), `train_s` (run posted -> deploy step starts: collect,
train, evaluate, publish, with `steps_s` per step), `deploy_s` (deploy step starts -> its
adapter serves) and `measure_s` (perplexity). Prints one JSON object on stdout:
{"rounds": [...], "ratio": acceptance(N) / acceptance(0), "perplexity_ratio": ppl(N) / ppl(0),
"goal_met": ratio >= 1.5 (regex) or 1.1 (intent) and perplexity_ratio <= 1.1,
"decisions": the gate's verdicts counted (deploy / defer / refuse), "served_ratios": each
round's acceptance over round 0's, "shipped_rounds": rounds served by a policy the learner
shipped, "nothing_worse_shipped": each of those >= 0.9, "same_policy_ratios": the rounds
still served by round 0's policy (its own round-to-round noise), ...}; each round is
also printed on stderr as it ends. The cycles run with the learner's defaults (the gate's
included) unless the options say otherwise. Never part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent_server.protocol import messages as p  # noqa: E402
from agent_server.protocol.client import ProtocolClient  # noqa: E402
from bench.online_system import ADMIN, TOKEN, System  # noqa: E402
from bench.online_users import (  # noqa: E402
    CodeFiles,
    IntentUser,
    Perplexity,
    Prompt,
    RegexUser,
    User,
    code_prompts,
)
from feedback.vocab import adapter_name  # noqa: E402

DEFAULT_REGEX = "file"
GOALS = {"regex": 1.5, "intent": 1.1}  # acceptance(N) / acceptance(0)
MAX_PERPLEXITY_RATIO = 1.10
EVAL_SEED = 10_000  # the held-out prompts: one fixed set for every round


async def serve(
    system: System, user: User, prompts: list[Prompt], *, send: bool, max_tokens: int,
    clients: int = 1,
) -> dict[str, Any]:  # fmt: skip
    """One completion per prompt through the WebSocket, `clients` connections at once (each
    one person typing: one request at a time); the user's outcome sent (and acknowledged)
    when `send`, else only judged."""
    results: list[tuple[bool, str | None, str]] = [(False, None, "")] * len(prompts)
    queue = list(enumerate(prompts))

    async def person() -> None:
        client = await ProtocolClient.connect(system.ws, TOKEN)
        try:
            while queue:
                i, prompt = queue.pop(0)
                request = p.CompletionRequest(
                    id=f"c{i}",
                    path=prompt.path,
                    language="python",
                    prefix=prompt.prefix,
                    max_tokens=max_tokens,
                )
                await client.send(request)
                reply = await client.expect(p.CompletionSuggestion)
                ok = user.accepts(prompt, reply.text)
                results[i] = (ok, reply.adapter, reply.text)
                if send:
                    await client.send(p.EditOutcome(
                        suggestion_id=reply.suggestion_id, client_event_id=uuid.uuid4().hex,
                        outcome="accepted" if ok else "rejected"))  # type: ignore[arg-type]  # fmt: skip
                    await client.expect(p.OutcomeAck)
        finally:
            await client.close()

    await asyncio.gather(*(person() for _ in range(max(1, min(clients, len(prompts))))))
    n = len(prompts)
    accepted = sum(ok for ok, _, _ in results)
    texts = [text for _, _, text in results]
    return {"acceptance": round(accepted / n, 4) if n else None, "accepted": accepted, "n": n,
            "distinct_share": round(len(set(texts)) / n, 4) if n else None,
            "served_by": sorted({str(a) for _, a, _ in results}),
            "examples": texts[:3]}  # fmt: skip


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


async def run_bench(args: argparse.Namespace, system: System) -> dict[str, Any]:
    user: User = IntentUser() if args.user == "intent" else RegexUser(args.accept_regex)
    files = CodeFiles(args.code_dir)
    measured = code_prompts(files.heldout, args.eval_prompts, EVAL_SEED, context=args.context)
    ppl = Perplexity(system.model, files.heldout[: args.ppl_files], tokens=args.ppl_tokens)
    cycle = {"data": {"settle_s": 0.0},
             "train": {"epochs": args.epochs, "max_seconds": args.train_seconds}}  # fmt: skip
    for key, value in (("lr", args.lr), ("max_length", args.max_length)):
        if value:
            cycle["train"][key] = value
    rounds: list[dict[str, Any]] = []
    adapter_dir: Path | None = None
    for r in range(args.rounds + 1):
        started = time.monotonic()
        prompts = code_prompts(files.train, args.suggestions, seed=r, context=args.context)
        learnt = await serve(
            system, user, prompts, send=True, max_tokens=args.max_tokens, clients=args.clients
        )
        heldout = (await serve(system, user, measured, send=False, max_tokens=args.max_tokens,
                               clients=args.clients) if measured else None)  # fmt: skip
        serve_s = time.monotonic() - started
        perplexity = ppl(adapter_dir)
        measure_s = time.monotonic() - started - serve_s
        headline = heldout if args.user == "intent" and heldout else learnt
        row: dict[str, Any] = {
            "round": r, "acceptance_rate": headline["acceptance"],
            "distinct_share": headline["distinct_share"], "perplexity": round(perplexity, 4),
            "train_prompts": learnt, "heldout_prompts": heldout,
            "serve_s": round(serve_s, 2), "measure_s": round(measure_s, 2),
        }  # fmt: skip
        if r < args.rounds:
            learned = await learn(system, cycle)
            row |= {
                "train_s": learned["train_s"],
                "deploy_s": learned["deploy_s"],
                "learn": learned,
            }
            if learned["run_status"] == "succeeded" and learned["adapter_path"]:
                adapter_dir = Path(learned["adapter_path"])
        row["wall_s"] = round(time.monotonic() - started, 2)
        rounds.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    first, last = rounds[0]["acceptance_rate"], rounds[-1]["acceptance_rate"]
    ratio = last / first if first else None
    shipped = [x for x in rounds if served(x) != served(rounds[0])]
    ppl_ratio = rounds[-1]["perplexity"] / rounds[0]["perplexity"]
    goal = GOALS[args.user]
    return {
        "model": str(system.model), "user": user.name, "backend": args.backend,
        "suggestions": args.suggestions, "eval_prompts": args.eval_prompts, "cycle": cycle,
        "clients": args.clients,
        "perplexity_text": {"files": len(ppl.chunks), "tokens": ppl.tokens},
        "summary": [{k: x.get(k) for k in ("round", "acceptance_rate", "distinct_share",
                     "perplexity", "wall_s", "serve_s", "train_s", "deploy_s", "measure_s")}
                    for x in rounds],
        "rounds": rounds, "ratio": ratio, "goal_ratio": goal,
        "perplexity_ratio": round(ppl_ratio, 4),
        "max_round_wall_s": max(x["wall_s"] for x in rounds),
        # The gate's verdicts, and the served policies against round 0: each round measures
        # the policy serving then, so "nothing worse shipped" is every round served by a
        # policy the learner shipped >= 0.9x (none shipped: true). The rounds still served
        # by round 0's policy give the noise of one round's figure (`same_policy_ratios`).
        "decisions": dict(Counter(x["learn"]["decision"] for x in rounds if "learn" in x)),
        "served_ratios": [round(x["acceptance_rate"] / first, 4) if first else None
                          for x in rounds],
        "shipped_rounds": len(shipped),
        "same_policy_ratios": [round(x["acceptance_rate"] / first, 4) if first else None
                               for x in rounds if served(x) == served(rounds[0])],
        "nothing_worse_shipped": bool(first) and all(
            x["acceptance_rate"] >= 0.9 * first for x in shipped),
        "goal_met": bool(ratio is not None and ratio >= goal
                         and ppl_ratio <= MAX_PERPLEXITY_RATIO),
    }  # fmt: skip


def served(row: dict[str, Any]) -> list[str]:
    """The adapters that served a round's measured completions."""
    return list((row.get("heldout_prompts") or row["train_prompts"])["served_by"])


def default_model() -> Path:
    env = os.environ.get("APPRENTICE_TEST_MODEL")
    if env and (Path(env) / "config.json").is_file():
        return Path(env).resolve()
    from tests.fixtures.models import CACHE, ensure_dev_model

    return ensure_dev_model(CACHE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="model folder (default: the dev model)")
    parser.add_argument("--user", choices=["regex", "intent"], default="regex")
    parser.add_argument("--accept-regex", default=DEFAULT_REGEX)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--suggestions", type=int, default=64, help="learning prompts a round")
    parser.add_argument("--eval-prompts", type=int, default=None,
                        help="held-out prompts a round (default: regex 0, intent 64)")  # fmt: skip
    parser.add_argument("--max-tokens", type=int, default=24, help="per completion")
    parser.add_argument("--clients", type=int, default=4,
                        help="simulated people typing at once (WebSocket connections); the "
                        "model server batches their requests")  # fmt: skip
    parser.add_argument("--code-dir", type=Path, help="folder of .py files (default: stdlib)")
    parser.add_argument("--context", type=int, default=15, help="lines before the cursor")
    parser.add_argument("--ppl-files", type=int, default=8, help="held-out files for perplexity")
    parser.add_argument("--ppl-tokens", type=int, default=256, help="tokens of each such file")
    parser.add_argument("--epochs", type=float, default=3.0, help="train.epochs of each cycle")
    parser.add_argument("--train-seconds", type=float, default=120, help="train.max_seconds")
    parser.add_argument("--lr", type=float, default=None, help="train.lr (default: learner's)")
    parser.add_argument("--max-length", type=int, default=None,
                        help="train.max_length: prompt + completion tokens trained on, the "
                        "prompt cut from the left (default: learner's)")  # fmt: skip
    default_backend = "vllm" if (REPO / ".vllm-venv" / "bin" / "python").exists() else "embedded"
    parser.add_argument("--backend", choices=["vllm", "embedded"], default=default_backend)
    parser.add_argument("--broker-url", default="", help="e.g. redis://127.0.0.1:6379/12")
    parser.add_argument("--database-url", default="", help="default: SQLite in the temp home")
    args = parser.parse_args()
    if args.eval_prompts is None:
        args.eval_prompts = 64 if args.user == "intent" else 0
    model = (args.model or default_model()).resolve()
    if not (model / "config.json").is_file():
        sys.exit(f"{model} holds no model (no config.json): pass --model with a checkpoint folder")
    with tempfile.TemporaryDirectory(prefix="apprentice-bench-") as tmp:
        system = System(Path(tmp) / "home", model, backend=args.backend,
                        database_url=args.database_url, broker_url=args.broker_url)  # fmt: skip
        try:
            system.start()
            result = asyncio.run(run_bench(args, system))
        finally:
            system.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
