"""How fast does a model learn to copy a line from its context? (the skill every edit needs)

    .venv/bin/python bench/copy_probe.py [--model PATH] [--steps N] [--lr LR] [--batch N]
        [--eval-every N] [--eval-n N] [--seed N]

Every edit action copies a path and a line from the prompt into `search`. The dev model does
not (docs/tasks.md: 0 of 32 held-out agent traces answered exactly after `apprentice model
build-agent`), so this probe isolates the skill: a row shows six source lines, then "The
faulty line: `<one of them>`", then `search: "`, and the loss is on the copied line (and its
closing quote) only. Lines come from the dev model's own corpus (corpus.collect): training
rows from its train files, the measured rows from its held-out files, so a line copied
right was never memorized. It trains a copy of the model in memory (all weights, AdamW) and
never writes one.

Prints a line per evaluation on stderr, then one JSON object on stdout: the held-out exact-copy
count (greedy, the whole line token for token) at step 0 (the baseline) and after every
--eval-every steps, beside the training loss and the seconds. Never part of the test run.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CONTEXT_LINES = 6


def corpus_lines(held_out: bool) -> list[str]:
    """Stripped, non-comment source lines of 15-60 characters from the dev model's corpus."""
    from modelbuild.dev import corpus

    out = []
    for f in corpus.collect():
        if f.held_out != held_out:
            continue
        for line in f.text.splitlines():
            line = line.strip()
            if 15 <= len(line) <= 60 and not line.startswith("#"):
                out.append(line)
    return out


def copy_row(tokenizer, lines: list[str], rng: random.Random) -> tuple[list[int], list[int]]:
    """(ids, labels): six lines, the faulty one quoted, then `search: "`; labels on the copy."""
    shown = rng.sample(lines, CONTEXT_LINES)
    target = rng.choice(shown)
    prompt = "The file:\n" + "\n".join(shown) + f'\nThe faulty line: `{target}`\nsearch: "'
    encode = lambda text: tokenizer(text, add_special_tokens=False).input_ids  # noqa: E731
    prompt_ids, answer_ids = encode(prompt), encode(target + '"')
    return prompt_ids + answer_ids, [-100] * len(prompt_ids) + answer_ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="model folder (default: the dev model)")
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--eval-n", type=int, default=100, help="held-out rows measured")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from bench.online_learning import default_model
    from modelbuild.agent.copyrows import exact_copies
    from modelbuild.agent.pretrain import padded_batch

    model_dir = (args.model or default_model()).resolve()
    if not (model_dir / "config.json").is_file():
        sys.exit(f"{model_dir} holds no model (no config.json): pass --model with a checkpoint")
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    train_lines, heldout_lines = corpus_lines(False), corpus_lines(True)
    measured = [copy_row(tokenizer, heldout_lines, random.Random(i)) for i in range(args.eval_n)]
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    curve = [{"step": 0, "train_loss": None, "heldout_exact": exact_copies(model, measured, pad_id),
              "seconds": 0.0}]  # fmt: skip
    print(json.dumps(curve[0]), file=sys.stderr, flush=True)
    start = time.monotonic()
    model.train()
    for step in range(1, args.steps + 1):
        rows = [copy_row(tokenizer, train_lines, rng) for _ in range(args.batch)]
        loss = model(**padded_batch(rows, pad_id)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        if step % args.eval_every == 0 or step == args.steps:
            point = {"step": step, "train_loss": round(loss.item(), 4),
                     "heldout_exact": exact_copies(model, measured, pad_id),
                     "seconds": round(time.monotonic() - start, 1)}  # fmt: skip
            curve.append(point)
            print(json.dumps(point), file=sys.stderr, flush=True)
    print(json.dumps({
        "model": str(model_dir), "steps": args.steps, "lr": args.lr, "batch": args.batch,
        "train_lines": len(train_lines), "heldout_lines": len(heldout_lines),
        "eval_n": args.eval_n, "baseline_exact": curve[0]["heldout_exact"],
        "final_exact": curve[-1]["heldout_exact"], "curve": curve,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
