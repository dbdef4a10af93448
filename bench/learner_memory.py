"""Learner memory: the peak resident set and train throughput of one update, by dataset size.

    .venv/bin/python bench/learner_memory.py [--model PATH] [--sizes 200,2000,5000]
        [--paths feedback,tasks] [--max-steps 1] [--max-seconds 300] [--batch-size 2]
        [--budget TOKENS] [--checkpointing on|off] [--no-release] [--threads 2]

For each dataset size N and each path, one update in a fresh subprocess (so its ru_maxrss,
the process's high-water mark, is that run's own):
- feedback: learner/train.py `train_policy` (the KTO update, a feedback cycle's) on N
  synthetic `learner.data.Sample`s: prompts are windows of real Python source (the
  standard library's, tokenized by the model's tokenizer) of 200 to 1,500 tokens,
  completions the next 8 to 64 tokens, half of them desirable;
- tasks: learner/grpo.py `train_trajectories` (the task-RL update) on N trajectory samples
  (`trajectory_samples` of rollouts of 8 model calls, 4 rollouts a task) whose prompts grow
  like an agent's context, from 1,500 to ~6,000 tokens of source, completions of 16 to
  128 tokens.
Token ids are distinct int objects, as a collect step's snapshot (JSON) or the database
gives them, so the dataset's own memory counts. The update runs with TrainConfig's defaults
(micro_batch_tokens, gradient_checkpointing, kl_coef, ...) but for --max-steps optimizer
steps of --batch-size samples, stopped at --max-seconds; --budget sets micro_batch_tokens,
--checkpointing overrides gradient_checkpointing, --no-release turns off learner/memory.py
`release` between micro-batches (to measure what it buys).

Prints one JSON object: per path, per size: `peak_rss_gb` (ru_maxrss of the run: model,
dataset and update), `update_peak_rss_gb` (the update's own sampled peak, its metrics'
`peak_rss_gb`), `data_rss_gb` (resident set once model and data are loaded), `after_rss_gb`
(once the update returned: what a long-lived worker keeps), `tokens_per_s`
(tokens through the training passes / wall seconds of the update call, lp_old's or the
reference's pass included), `seconds`, `steps`; per path `growth` = peak_rss_gb at the
largest size / at the smallest; `goal_met`: every peak <= 6 GB and every growth <= 1.2.
One step of 2 samples keeps the default run short (6 minutes on 2 busy cores): the peak is
a pass's, and a pass is at most the budget whatever the batch.

Measured 2026-12-07, `--model .cache/real-model --sizes 200,2000,5000` (SmolLM2-135M,
float32, 2 busy CPU cores, micro_batch_tokens 2048, gradient checkpointing): peak RSS
feedback 3.26 / 3.36 / 3.35 GB (growth 1.03, 39-80 tokens/s), tasks 3.29 / 3.41 / 3.60 GB
(growth 1.10, 50-71 tokens/s), 1.1-1.3 GB resident after each update: goal met. The old
shape of a task update (`--sizes 200 --paths tasks --budget 4096 --checkpointing off
--no-release`: 4,096-token rows, as tasks.max_length made them) peaked at 11.6 GB and kept
9.8 GB. Gradient checkpointing's and release's own figures: learner/config.py
`gradient_checkpointing`, learner/memory.py. Never part of the test run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GOAL_GB, GOAL_GROWTH = 6.0, 1.2
CALLS = 8  # model calls per synthetic rollout


def source_tokens(tokenizer: Any, chars: int = 2_000_000) -> list[int]:
    """Real Python source (the standard library), tokenized: the pool windows come from."""
    text, root = [], Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.glob("*.py")):
        text.append(path.read_text(encoding="utf-8", errors="replace"))
        if sum(map(len, text)) > chars:
            break
    return list(tokenizer("\n".join(text), add_special_tokens=False)["input_ids"])


def fresh(ids: list[int]) -> list[int]:
    """The same ids as distinct int objects, as decoding JSON or a database row makes them."""
    return json.loads(json.dumps(ids))


def feedback_samples(pool: list[int], n: int, rng: random.Random) -> list[Any]:
    from learner.data import Sample

    out = []
    for i in range(n):
        length, completion = rng.randint(200, 1500), rng.randint(8, 64)
        at = rng.randrange(len(pool) - length - completion)
        ids = fresh(pool[at : at + length + completion])
        out.append(Sample(f"s{i}", i % 2 == 0, 1.0, ids[:length], ids[length:],
                          [-1.0] * completion, 0, "accepted" if i % 2 == 0 else "rejected",
                          False))  # fmt: skip
    return out


def task_samples(pool: list[int], n: int, rng: random.Random) -> list[Any]:
    """n trajectory samples the way a task cycle makes them: rollouts (of 8 calls, 4 of a
    task, rewards 1, 0, 1, 0) as load_rollouts reads them, through trajectory_samples."""
    from learner.trajectories import Call, Rollout, group_rollouts, trajectory_samples

    rollouts = []
    for r in range(-(-n // CALLS)):
        start, calls = rng.randrange(len(pool) - 7000), []
        for seq in range(1, CALLS + 1):
            length, completion = 1500 + (seq - 1) * 640, rng.randint(16, 128)
            ids = fresh(pool[start : start + length + completion])
            calls.append(Call(seq, "agent", ids[:length], ids[length:], [-1.0] * completion))
        rollouts.append(Rollout(f"r{r}", f"task{r // 4}", float(r % 2 == 0), False, tuple(calls)))
    samples, _ = trajectory_samples(group_rollouts(rollouts))
    return samples[:n]


def child(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from transformers import AutoTokenizer

    import learner.grpo
    import learner.train
    from learner.config import TaskTrainConfig, TrainConfig
    from learner.memory import max_rss_gb, rss_gb
    from learner.train import load_base, make_policy

    torch.set_num_threads(args.threads)
    if args.no_release:
        learner.train.release = learner.grpo.release = lambda: None  # type: ignore[attr-defined]
    overrides: dict[str, Any] = {"max_steps": args.max_steps, "batch_size": args.batch_size,
                                 "max_seconds": args.max_seconds}  # fmt: skip
    if args.budget:
        overrides["micro_batch_tokens"] = args.budget
    if args.checkpointing:
        overrides["gradient_checkpointing"] = args.checkpointing == "on"
    config = TrainConfig(**overrides)
    rng = random.Random(args.size)
    pool = source_tokens(AutoTokenizer.from_pretrained(args.model))
    policy, _ = make_policy(load_base(args.model, device="cpu", dtype="float32"), config)
    if args.child == "feedback":
        samples = feedback_samples(pool, args.size, rng)
        del pool
        data_rss = rss_gb()
        started = time.monotonic()
        result: Any = learner.train.train_policy(policy, samples, config)
    else:
        samples = task_samples(pool, args.size, rng)
        del pool
        data_rss = rss_gb()
        # a task cycle's train config: tasks.max_length over the budget (learner/taskcycle.py)
        train = config.model_copy(update={"max_length": 4096})
        started = time.monotonic()
        result = learner.grpo.train_trajectories(policy, samples, train, TaskTrainConfig())
    seconds, after = time.monotonic() - started, rss_gb()
    return {"peak_rss_gb": round(max_rss_gb(), 3),
            "update_peak_rss_gb": round(result.peak_rss_gb, 3),
            "data_rss_gb": round(data_rss, 3), "after_rss_gb": round(after, 3),
            "tokens": result.tokens,
            "tokens_per_s": round(result.tokens / seconds, 1), "seconds": round(seconds, 1),
            "steps": result.steps, "micro_batch_tokens": config.micro_batch_tokens,
            "gradient_checkpointing": config.gradient_checkpointing,
            "rss_gb_by_step": result.curves.get("rss_gb", [])}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="model folder (default: the dev model)")
    parser.add_argument("--sizes", default="200,2000,5000", help="dataset sizes, comma-separated")
    parser.add_argument("--paths", default="feedback,tasks", help="feedback, tasks or both")
    parser.add_argument("--max-steps", type=int, default=1, help="optimizer steps per update")
    parser.add_argument("--max-seconds", type=float, default=300.0, help="per update")
    parser.add_argument("--batch-size", type=int, default=2, help="samples per step")
    parser.add_argument("--budget", type=int, help="micro_batch_tokens (default: TrainConfig's)")
    parser.add_argument("--checkpointing", choices=["on", "off"], help="default: TrainConfig's")
    parser.add_argument("--no-release", action="store_true", help="no release between passes")
    parser.add_argument("--threads", type=int, default=2, help="torch threads in each run")
    parser.add_argument("--child", choices=["feedback", "tasks"], help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model is None:
        from tests.fixtures.models import CACHE, ensure_dev_model

        args.model = ensure_dev_model(CACHE)
    if args.child:
        print(json.dumps(child(args)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    out: dict[str, Any] = {"model": str(args.model), "sizes": sizes, "max_steps": args.max_steps,
                           "batch_size": args.batch_size, "threads": args.threads}  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "OMP_WAIT_POLICY": "PASSIVE"}
    passed = []
    for path in args.paths.split(","):
        runs = {}
        for size in sizes:
            command = [sys.executable, __file__, "--child", path, "--size", str(size),
                       "--model", str(args.model), "--max-steps", str(args.max_steps),
                       "--max-seconds", str(args.max_seconds), "--batch-size",
                       str(args.batch_size), "--threads", str(args.threads)]  # fmt: skip
            command += ["--budget", str(args.budget)] if args.budget else []
            command += ["--checkpointing", args.checkpointing] if args.checkpointing else []
            command += ["--no-release"] if args.no_release else []
            done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env)
            if done.returncode != 0:
                sys.exit(f"{path} at {size} failed:\n{done.stderr[-4000:]}")
            runs[size] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{path} {size}: {runs[size]}", file=sys.stderr)
        growth = runs[sizes[-1]]["peak_rss_gb"] / runs[sizes[0]]["peak_rss_gb"]
        out[path] = {"runs": runs, "growth": round(growth, 3)}
        passed.append(growth <= GOAL_GROWTH and all(r["peak_rss_gb"] <= GOAL_GB
                                                    for r in runs.values()))  # fmt: skip
    out["goal_met"] = all(passed)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
