"""Continued pretraining of the dev model on the CPU: packed code plus a little chat data.

`pack_*` turn text into fixed-length token rows; `evaluate` is the mean next-token loss on
rows; `train` runs AdamW with warmup + cosine decay over a seeded, deterministic data order,
showing a rich progress bar on stderr. Called by build.py (`apprentice model build-dev`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from rich.console import Console
from rich.progress import BarColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ground.progress import Progress
from modelbuild.dev.tokenizer import EOS


@dataclass(frozen=True)
class DevTrainConfig:
    """The dev model build's optimisation settings (not the learner's TrainConfig, which
    configures LoRA updates); validated at construction."""

    steps: int
    batch_size: int = 8
    lr: float = 3e-3
    min_lr_ratio: float = 0.1  # cosine decays to lr * min_lr_ratio
    warmup_steps: int = 20
    weight_decay: float = 0.1
    grad_clip: float = 1.0

    def __post_init__(self) -> None:
        if self.steps < 0:
            raise ValueError(f"steps must be >= 0 (0 = no training), got {self.steps}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if not 0 < self.lr < 1:
            raise ValueError(f"lr must be in (0, 1), e.g. 3e-3; got {self.lr}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")


def encode_documents(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str]) -> list[int]:
    """One token stream: each document followed by the document separator."""
    eos_id = tokenizer.convert_tokens_to_ids(EOS)
    stream: list[int] = []
    # The Rust tokenizer encodes a batch in parallel, and unlike tokenizer(...) it does not
    # warn that a document is longer than the context window (rows are cut by pack()).
    for enc in tokenizer.backend_tokenizer.encode_batch(list(texts), add_special_tokens=False):
        stream.extend(enc.ids)
        stream.append(eos_id)
    return stream


def pack(stream: Sequence[int], seq_len: int) -> torch.Tensor:
    """Cut a stream into full rows of `seq_len` tokens (the ragged tail is dropped)."""
    rows = len(stream) // seq_len
    if rows == 0:
        raise ValueError(f"need at least {seq_len} tokens to pack one row, got {len(stream)}")
    return torch.tensor(stream[: rows * seq_len], dtype=torch.long).view(rows, seq_len)


@torch.no_grad()
def evaluate(model: PreTrainedModel, rows: torch.Tensor, batch_size: int = 8) -> float:
    """Mean next-token cross-entropy (nats) over `rows`."""
    model.eval()
    total, count = 0.0, 0
    for start in range(0, rows.shape[0], batch_size):
        batch = rows[start : start + batch_size]
        loss = model(input_ids=batch, labels=batch).loss
        n = batch.numel() - batch.shape[0]  # predicted positions: all but each row's first
        total += loss.item() * n
        count += n
    return total / count


def lr_at(step: int, cfg: DevTrainConfig) -> float:
    """Linear warmup, then cosine decay to lr * min_lr_ratio at the last step."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    span = max(1, cfg.steps - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    floor = cfg.lr * cfg.min_lr_ratio
    return floor + (cfg.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def param_groups(model: PreTrainedModel, weight_decay: float) -> list[dict[str, object]]:
    # Decay matrices only; norms and biases keep their scale (the usual GPT recipe).
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def train(
    model: PreTrainedModel,
    rows: torch.Tensor,
    cfg: DevTrainConfig,
    seed: int,
    console: Console | None = None,
) -> list[float]:
    """Train in place on `rows` for cfg.steps steps; returns the training loss of each step.

    Row order is a seeded permutation, reshuffled each pass, so one seed gives one order.
    """
    if cfg.steps == 0:
        return []
    torch.manual_seed(seed)
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(
        param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8
    )
    order: list[int] = []
    losses: list[float] = []
    model.train()
    progress = Progress(
        TextColumn("[bold]training[/bold]"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} steps"),
        TextColumn("loss {task.fields[loss]:.3f}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console or Console(stderr=True),
        transient=False,
    )
    with progress:
        task = progress.add_task("train", total=cfg.steps, loss=float("nan"))
        for step in range(cfg.steps):
            if len(order) < cfg.batch_size:
                perm = list(range(rows.shape[0]))
                rng.shuffle(perm)
                order.extend(perm)
            idx, order = order[: cfg.batch_size], order[cfg.batch_size :]
            batch = rows[idx]
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, cfg)
            loss = model(input_ids=batch, labels=batch).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            losses.append(loss.item())
            progress.update(task, advance=1, loss=losses[-1])
    model.eval()
    return losses
