"""Online learning, measured: does the served model learn what a person means, in minutes?

    .venv/bin/python bench/online_learning.py [--model PATH] [--user regex|intent]
        [--code-dir DIR] [--seeds N] [--rounds N] [--suggestions 64] [--eval-prompts N]
        [--quiet-share 0.2] [--no-written] [--context LINES] [--clients N]
        [--backend vllm|embedded] [--epochs E] [--train-seconds S] [--lr LR] [--max-length T]
        [--accept-regex REGEX] [--broker-url URL] [--database-url URL] [--keep-adapters DIR]

The bench starts the whole system in a temporary APPRENTICE_HOME: the model (--model: any
Hugging Face checkpoint folder; default $APPRENTICE_TEST_MODEL or the dev model,
.cache/dev-model, built if missing), vLLM (from .vllm-venv; or the embedded backend),
`apprentice serve`, `apprentice worker` (embedded SQLite broker unless --broker-url) and a
migrated database (SQLite unless --database-url); then it talks to it only through the real
interfaces: the WebSocket protocol for completions (the product's inline completion path,
prompt and all) and outcomes as the editors send them (`shown` for a completion with text,
the verdict, `written` after a rejection: what the person typed instead), the admin API to
trigger a learning cycle and read its result.

Code comes from the .py files under --code-dir (any folder, subfolders included: e.g. a
library installed from PyPI with `pip install --target DIR`; default the standard library),
split for good by path (bench/online_users.py): the learner is only ever given outcomes on
prompts cut from the train files; the held-out files give the perplexity text and the intent
user's measured prompts. A --quiet-share of the prompts are cut before a blank line: the
person was about to write nothing. Two simulated users:
- `regex` (default): accepts a completion exactly when it matches --accept-regex (default
  `file`). Easy to game: junk that matches is "accepted".
- `intent`: accepts exactly when the completion's first line is the file's real next line
  (modulo surrounding whitespace; nothing at a quiet prompt), and after a rejection types the
  real line (--no-written: reports nothing more, to measure what the typed text adds). Its
  acceptance is measured on --eval-prompts prompts cut from held-out files (the same prompts
  every round; their outcomes are never sent).

Round r (0 <= r < N): serve --suggestions completions on fresh train-file prompts (--clients
connections at once, so the model server can batch them), send the user's outcomes; serve
the held-out prompts; perplexity of the served policy (base + deployed adapter, transformers
+ peft) on the held-out files and on general code (the gate's standard-library slice);
POST /v1/admin/runs -> wait for the run -> wait until completions come from its adapter.
Round N only serves and measures. Per round: requests, shown share, accepted, acceptance of
what was shown (`acceptance_rate`: on the held-out prompts for intent, the train prompts for
regex), distinct share of what was shown, both perplexities, and wall seconds (`serve_s`,
`train_s`, `deploy_s`, `measure_s`). --seeds N runs the whole bench N times (seed s: prompts,
train.seed) on a fresh system each and reports each seed's figures and, per round, the mean
and the spread (min, max). Prints one JSON object on stdout: {"seeds": [...], "rounds_mean",
"acceptance_ratio" (acceptance of shown, last round / round 0, per seed), "accepted_ratio",
"perplexity_ratio", "general_perplexity_ratio", "decisions", ...}; each round is also printed
on stderr as it ends. The cycles run with the learner's defaults (the gate's included)
unless the options say otherwise. Never part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent_server.protocol import messages as p  # noqa: E402
from agent_server.protocol.client import ProtocolClient  # noqa: E402
from bench.online_cycle import learn  # noqa: E402
from bench.online_system import TOKEN, System  # noqa: E402
from bench.online_users import (  # noqa: E402
    CodeFiles,
    IntentUser,
    Perplexity,
    Prompt,
    RegexUser,
    User,
    code_prompts,
)

DEFAULT_REGEX = "file"
MAX_PERPLEXITY_RATIO = 1.10
EVAL_SEED = 10_000  # the held-out prompts: one fixed set for every round and seed


async def serve(
    system: System, user: User, prompts: list[Prompt], *, send: bool, max_tokens: int,
    clients: int = 1, written: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """One completion per prompt through the WebSocket, `clients` connections at once (each
    one person typing: one request at a time). With `send`, the outcomes the editors send:
    `shown` for a completion with text (an empty one shows nothing and says nothing), the
    user's verdict, and after a rejection what they wrote instead (`written`, unless
    `written` is off); each acknowledged. Without, only judged."""
    results: list[tuple[bool, str | None, str]] = [(False, None, "")] * len(prompts)
    queue = list(enumerate(prompts))

    async def person() -> None:
        client = await ProtocolClient.connect(system.ws, TOKEN)

        async def report(sid: str, outcome: str, final_text: str | None = None) -> None:
            await client.send(p.EditOutcome(
                suggestion_id=sid, client_event_id=uuid.uuid4().hex, outcome=outcome,  # type: ignore[arg-type]
                final_text=final_text))  # fmt: skip
            await client.expect(p.OutcomeAck)

        try:
            while queue:
                i, prompt = queue.pop(0)
                await client.send(p.CompletionRequest(
                    id=f"c{i}", path=prompt.path, language="python", prefix=prompt.prefix,
                    max_tokens=max_tokens))  # fmt: skip
                reply = await client.expect(p.CompletionSuggestion)
                ok = bool(reply.text) and user.accepts(prompt, reply.text)
                results[i] = (ok, reply.adapter, reply.text)
                if not send or not reply.text:
                    continue
                await report(reply.suggestion_id, "shown")
                await report(reply.suggestion_id, "accepted" if ok else "rejected")
                typed = user.writes(prompt)
                if not ok and written and typed is not None:
                    await report(reply.suggestion_id, "written", typed)
        finally:
            await client.close()

    await asyncio.gather(*(person() for _ in range(max(1, min(clients, len(prompts))))))
    n = len(prompts)
    accepted = sum(ok for ok, _, _ in results)
    shown = [text for _, _, text in results if text]
    return {"requests": n, "shown": len(shown), "accepted": accepted,
            "shown_share": round(len(shown) / n, 4) if n else None,
            "acceptance": round(accepted / n, 4) if n else None,
            "acceptance_of_shown": round(accepted / len(shown), 4) if shown else None,
            "distinct_share": round(len(set(shown)) / len(shown), 4) if shown else None,
            "quiet_prompts": sum(pr.quiet for pr in prompts),
            "served_by": sorted({str(a) for _, a, _ in results}),
            "examples": shown[:3]}  # fmt: skip


async def run_bench(args: argparse.Namespace, system: System, seed: int) -> dict[str, Any]:
    from learner.general_code import chosen_files, stdlib_dir

    user: User = IntentUser() if args.user == "intent" else RegexUser(args.accept_regex)
    files = CodeFiles(args.code_dir)
    measured = code_prompts(files.heldout, args.eval_prompts, EVAL_SEED, context=args.context,
                            quiet_share=args.quiet_share, root=files.root)  # fmt: skip
    ppl = Perplexity(system.model, files.heldout[: args.ppl_files], tokens=args.ppl_tokens)
    general = Perplexity(system.model, list(chosen_files(str(stdlib_dir()), args.ppl_files)),
                         tokens=args.ppl_tokens)  # fmt: skip
    cycle: dict[str, Any] = {"data": {"settle_s": 0.0}, "train": {
        "epochs": args.epochs, "max_seconds": args.train_seconds, "seed": seed}}  # fmt: skip
    for key, value in (("lr", args.lr), ("max_length", args.max_length)):
        if value:
            cycle["train"][key] = value
    rounds: list[dict[str, Any]] = []
    adapter_dir: Path | None = None
    for r in range(args.rounds + 1):
        started = time.monotonic()
        prompts = code_prompts(files.train, args.suggestions, seed=1000 * seed + r,
                               context=args.context, quiet_share=args.quiet_share,
                               root=files.root)  # fmt: skip
        learnt = await serve(system, user, prompts, send=True, max_tokens=args.max_tokens,
                             clients=args.clients, written=not args.no_written)  # fmt: skip
        heldout = (await serve(system, user, measured, send=False, max_tokens=args.max_tokens,
                               clients=args.clients) if measured else None)  # fmt: skip
        serve_s = time.monotonic() - started
        perplexity, general_ppl = ppl(adapter_dir), general(adapter_dir)
        measure_s = time.monotonic() - started - serve_s
        headline = heldout if args.user == "intent" and heldout else learnt
        row: dict[str, Any] = {
            "round": r, "requests": headline["requests"], "shown_share": headline["shown_share"],
            "accepted": headline["accepted"], "acceptance_rate": headline["acceptance_of_shown"],
            "distinct_share": headline["distinct_share"], "perplexity": round(perplexity, 4),
            "general_perplexity": round(general_ppl, 4),
            "train_prompts": learnt, "heldout_prompts": heldout,
            "serve_s": round(serve_s, 2), "measure_s": round(measure_s, 2),
        }  # fmt: skip
        if r < args.rounds:
            learned = await learn(system, cycle)
            row |= {"train_s": learned["train_s"], "deploy_s": learned["deploy_s"],
                    "learn": learned}  # fmt: skip
            if learned["run_status"] == "succeeded" and learned["adapter_path"]:
                adapter_dir = Path(learned["adapter_path"])
        row["wall_s"] = round(time.monotonic() - started, 2)
        rounds.append(row)
        print(json.dumps({"seed": seed, **row}), file=sys.stderr, flush=True)
    return {"seed": seed, "rounds": rounds, "cycle": cycle,
            "perplexity_text": {"files": len(ppl.chunks), "tokens": ppl.tokens},
            **ratios(rounds)}  # fmt: skip


def ratios(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One seed's last round against its round 0, and what the gate decided."""
    first, last = rounds[0], rounds[-1]

    def ratio(key: str) -> float | None:
        return round(last[key] / first[key], 4) if first[key] and last[key] is not None else None

    shipped = [x for x in rounds if served(x) != served(first)]
    return {
        "acceptance_ratio": ratio("acceptance_rate"), "accepted_ratio": ratio("accepted"),
        "shown_share_ratio": ratio("shown_share"), "perplexity_ratio": ratio("perplexity"),
        "general_perplexity_ratio": ratio("general_perplexity"),
        "decisions": dict(Counter(x["learn"]["decision"] for x in rounds if "learn" in x)),
        "shipped_rounds": len(shipped),
        "max_round_wall_s": max(x["wall_s"] for x in rounds),
    }  # fmt: skip


def served(row: dict[str, Any]) -> list[str]:
    """The adapters that served a round's measured completions."""
    return list((row.get("heldout_prompts") or row["train_prompts"])["served_by"])


def spread(values: list[Any]) -> dict[str, Any]:
    real = [v for v in values if v is not None]
    if not real:
        return {"mean": None, "min": None, "max": None, "n": 0}
    return {"mean": round(statistics.fmean(real), 4), "min": min(real), "max": max(real),
            "n": len(real)}  # fmt: skip


def summarize(args: argparse.Namespace, model: Path, seeds: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("requests", "shown_share", "accepted", "acceptance_rate", "distinct_share",
            "perplexity", "general_perplexity", "wall_s")  # fmt: skip
    per_round = [{"round": r, **{k: spread([s["rounds"][r][k] for s in seeds]) for k in keys}}
                 for r in range(args.rounds + 1)]  # fmt: skip
    totals = ("acceptance_ratio", "accepted_ratio", "shown_share_ratio", "perplexity_ratio",
              "general_perplexity_ratio", "max_round_wall_s")  # fmt: skip
    return {
        "model": str(model), "user": args.user, "backend": args.backend,
        "code_dir": str(args.code_dir or "stdlib"), "written": not args.no_written,
        "quiet_share": args.quiet_share, "suggestions": args.suggestions,
        "eval_prompts": args.eval_prompts, "clients": args.clients,
        "summary": [{k: x.get(k) for k in ("seed", "acceptance_ratio", "accepted_ratio",
                     "perplexity_ratio", "general_perplexity_ratio", "decisions",
                     "max_round_wall_s")} for x in seeds],
        "rounds_mean": per_round, **{k: spread([s[k] for s in seeds]) for k in totals},
        "seeds": seeds,
    }  # fmt: skip


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
    parser.add_argument("--seeds", type=int, default=1, help="whole runs, a fresh system each")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--suggestions", type=int, default=64, help="learning prompts a round")
    parser.add_argument("--eval-prompts", type=int, default=None,
                        help="held-out prompts a round (default: regex 0, intent 64)")  # fmt: skip
    parser.add_argument(
        "--quiet-share",
        type=float,
        default=0.2,
        help="share of prompts cut before a blank line (nothing to write)",
    )
    parser.add_argument(
        "--no-written",
        action="store_true",
        help="the person types nothing after a rejection (no `written`)",
    )
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
    parser.add_argument("--keep-adapters", type=Path, default=None,
                        help="copy each seed's published adapters here (seed-N/policy-vM), "
                        "e.g. for `apprentice eval completions --adapter`")  # fmt: skip
    args = parser.parse_args()
    if args.eval_prompts is None:
        args.eval_prompts = 64 if args.user == "intent" else 0
    if args.code_dir is not None and not args.code_dir.is_dir():
        sys.exit(f"error: --code-dir {args.code_dir} is not a folder")
    model = (args.model or default_model()).resolve()
    if not (model / "config.json").is_file():
        sys.exit(f"{model} holds no model (no config.json): pass --model with a checkpoint folder")
    seeds = []
    for seed in range(args.seeds):
        with tempfile.TemporaryDirectory(prefix="apprentice-bench-") as tmp:
            system = System(Path(tmp) / "home", model, backend=args.backend,
                            database_url=args.database_url, broker_url=args.broker_url)  # fmt: skip
            try:
                system.start()
                seeds.append(asyncio.run(run_bench(args, system, seed)))
            finally:
                system.stop()
                if args.keep_adapters is not None:
                    kept = args.keep_adapters / f"seed-{seed}"
                    shutil.copytree(Path(tmp) / "home" / "adapters", kept, dirs_exist_ok=True)
    print(json.dumps(summarize(args, model, seeds)))


if __name__ == "__main__":
    main()
