"""Training throughput: our train step (learner/train.py) against TRL's KTOTrainer.

    pip install -e '.[bench]'          # trl (pulls datasets/pandas/pyarrow; no torch change)
    .venv/bin/python bench/train_throughput.py [--model PATH] [--samples 128] [--epochs 2]
        [--threads 1] [--repeats 2]

Same model (--model PATH: any checkpoint folder, default the dev model; float32, CPU), same
data, same LoRA config (rank 8 on all linear layers), same batch size, epochs, learning rate
and beta. The data: completions the model sampled on code prompts (bench/online_users.py's
train-file prompts), labelled by a regex,
written once; TRL gets them as text (prompt rendered with the chat template, completion
decoded), ours as the logged token ids. Each trainer runs in its own subprocess, so the
peak resident memory (ru_maxrss) is its own, and the runs alternate ours/TRL `--repeats`
times (the machine's load drifts). Throughput = dataset tokens x epochs / wall time of the
training call (reference logprobs included for both: we compute them once per run, TRL
per step, plus its KL pass on mismatched pairs).

Prints one JSON object: {"ours": {...}, "trl": {...}, "ratio": ours/trl tokens per second,
"goal_met": ratio >= 1.0, ...}. Never part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LR, BETA, BATCH = 2e-3, 0.1, 8


def make_data(model_dir: Path, n: int, out: Path) -> None:
    """n sampled completions with labels (the same data both trainers read)."""
    from agent_server.models.base import Sampling
    from agent_server.models.embedded import EmbeddedBackend
    from agent_server.models.embedded_config import EmbeddedConfig
    from agent_server.session.prompts import completion_prompt
    from bench.online_users import CodeFiles, code_prompts

    async def sample() -> list[dict[str, Any]]:
        backend = EmbeddedBackend(EmbeddedConfig(model_dir=model_dir))
        rows = []
        for item in code_prompts(CodeFiles().train, n, seed=123):
            prompt = completion_prompt(item.path, "python", item.prefix, "")
            c = await backend.complete(prompt, sampling=Sampling(max_tokens=24, temperature=0.7))
            label = bool(re.search("file", c.text))
            rows.append({"prompt_ids": c.prompt_token_ids, "completion_ids": c.token_ids,
                         "logprobs": c.logprobs, "label": label})  # fmt: skip
        await backend.aclose()
        return rows

    out.write_text(json.dumps(asyncio.run(sample())))


def run_ours(model_dir: Path, data: list[dict[str, Any]], epochs: float) -> dict[str, Any]:
    from learner.config import TrainConfig
    from learner.data import Sample
    from learner.train import load_base, make_policy, train_policy

    samples = [
        Sample(f"s{i}", r["label"], 1.0, r["prompt_ids"], r["completion_ids"], r["logprobs"], 0,
               "accepted" if r["label"] else "rejected", False)
        for i, r in enumerate(data)
    ]  # fmt: skip
    config = TrainConfig(lr=LR, beta=BETA, batch_size=BATCH, epochs=epochs, max_seconds=3600)
    policy, _ = make_policy(load_base(model_dir), config)
    baseline = _rss_mb()
    started = time.perf_counter()
    result = train_policy(policy, samples, config)
    return {"seconds": time.perf_counter() - started, "steps": result.steps,
            "baseline_rss_mb": baseline, "final_loss": result.final_loss}  # fmt: skip


def run_trl(
    model_dir: Path, data: list[dict[str, Any]], epochs: float, tmp: Path
) -> dict[str, Any]:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import KTOConfig, KTOTrainer

    from learner.config import TrainConfig
    from learner.train import load_base, lora_config

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = {
        "prompt": [tokenizer.decode(r["prompt_ids"]) for r in data],
        "completion": [tokenizer.decode(r["completion_ids"]) for r in data],
        "label": [r["label"] for r in data],
    }
    good = sum(rows["label"])
    args = KTOConfig(
        output_dir=str(tmp / "trl"), per_device_train_batch_size=BATCH, num_train_epochs=epochs,
        learning_rate=LR, beta=BETA, max_length=1024, save_strategy="no", report_to="none",
        logging_strategy="no", use_cpu=True, seed=0, dataloader_num_workers=0,
        disable_tqdm=True, undesirable_weight=good / max(1, len(data) - good),
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
    )  # fmt: skip
    trainer = KTOTrainer(
        model=load_base(model_dir), args=args, train_dataset=Dataset.from_dict(rows),
        processing_class=tokenizer, peft_config=lora_config(TrainConfig()),
    )  # fmt: skip
    baseline = _rss_mb()
    started = time.perf_counter()
    output = trainer.train()
    return {"seconds": time.perf_counter() - started, "steps": output.global_step,
            "baseline_rss_mb": baseline, "final_loss": output.training_loss}  # fmt: skip


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(which: str, model_dir: Path, data_path: Path, epochs: float, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    data = json.loads(data_path.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        out = (run_ours(model_dir, data, epochs) if which == "ours"
               else run_trl(model_dir, data, epochs, Path(tmp)))  # fmt: skip
    tokens = sum(len(r["prompt_ids"]) + len(r["completion_ids"]) for r in data) * epochs
    out |= {"tokens": tokens, "tokens_per_s": tokens / out["seconds"], "peak_rss_mb": _rss_mb()}
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=128)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads in each trainer")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--child", choices=["ours", "trl"], help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help="model folder (default: the dev model)")
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.model, args.data, args.epochs, args.threads)
        return
    try:
        import trl  # noqa: F401
    except ImportError:
        sys.exit("trl is not installed: pip install -e '.[bench]' (it leaves torch alone)")
    from tests.fixtures.models import CACHE, ensure_dev_model

    model = args.model.resolve() if args.model else ensure_dev_model(CACHE)
    with tempfile.TemporaryDirectory(prefix="apprentice-throughput-") as tmp:
        data = Path(tmp) / "data.json"
        make_data(model, args.samples, data)
        runs: dict[str, list[dict[str, Any]]] = {"ours": [], "trl": []}
        for _ in range(args.repeats):
            for which in ("ours", "trl"):
                command = [sys.executable, __file__, "--child", which, "--model", str(model),
                           "--data", str(data), "--epochs", str(args.epochs),
                           "--threads", str(args.threads)]  # fmt: skip
                env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
                done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env)
                if done.returncode != 0:
                    sys.exit(f"{which} failed:\n{done.stderr[-4000:]}")
                runs[which].append(json.loads(done.stdout.strip().splitlines()[-1]))
        rows = json.loads(data.read_text())
    summary = {name: _summary(r) for name, r in runs.items()}
    ratio = summary["ours"]["tokens_per_s"] / summary["trl"]["tokens_per_s"]
    print(json.dumps({
        "samples": args.samples, "epochs": args.epochs, "threads": args.threads,
        "batch_size": BATCH, "accepted": sum(r["label"] for r in rows),
        "ours": summary["ours"], "trl": summary["trl"], "ratio": ratio, "goal_met": ratio >= 1.0,
        "runs": runs,
    }))  # fmt: skip


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in runs),
        "seconds": statistics.median(r["seconds"] for r in runs),
        "steps": runs[0]["steps"],
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "train_rss_mb": max(r["peak_rss_mb"] - r["baseline_rss_mb"] for r in runs),
    }


if __name__ == "__main__":
    main()
