"""Batches within a token budget: the bound on every forward pass the learner makes.

    for positions in micro_batches(chunk, config):       # runs of samples, in order
        batch = batch_of([chunk[k] for k in positions], config, device=model_device(model))

`TrainConfig.micro_batch_tokens` is a hard budget: no forward pass -- training (learner/
train.py, learner/kto.py), the reference and lp_old logprob passes, task RL (learner/grpo.py)
and scoring -- gets more padded tokens (rows x longest row) than it. One rule cuts a sample
(learner/kto.py `kept`): its row holds at most `row_limit(config)` = min(max_length,
micro_batch_tokens) tokens; the completion keeps its first `max_completion_length` tokens
(and at most row_limit - 1: a completion longer than the budget is capped), the prompt its
last tokens that fit. `micro_batches` measures rows with the same rule and packs runs of
samples whose padded size stays within the budget (a single sample always fits), so a
sample longer than the budget is cut, never given an oversized pass of its own.
Activation memory grows with the padded tokens of a pass (~2 MB a token on SmolLM2-135M in
float32 without gradient checkpointing): the budget bounds a step's memory whatever the
data, and task cycles' `tasks.max_length` (4096 by default) above it counts as the budget.
Tested in tests/learner/test_memory.py. Nothing to run.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Sequence

import torch

from learner.config import TrainConfig
from learner.data import Sample
from learner.kto import Batch, kept, make_batch

log = logging.getLogger(__name__)


def row_limit(config: TrainConfig) -> int:
    """Tokens one sample's row may hold: max_length, but never more than one pass's budget."""
    return min(config.max_length, config.micro_batch_tokens)


def note_budget(config: TrainConfig) -> None:
    """Say once per update when max_length is over the budget (a task cycle's 4096): rows
    are cut to micro_batch_tokens instead."""
    if config.max_length > config.micro_batch_tokens:
        log.info("max_length %d is over micro_batch_tokens %d: every row is cut to %d tokens "
                 "(prompts from the left)", config.max_length, config.micro_batch_tokens,
                 config.micro_batch_tokens)  # fmt: skip


def row_length(sample: Sample, config: TrainConfig) -> int:
    """The tokens `sample` keeps in a batch (learner/kto.py `kept`)."""
    prompt, completion = kept(len(sample.prompt_ids), len(sample.completion_ids),
                              max_length=row_limit(config),
                              max_completion_length=config.max_completion_length)  # fmt: skip
    return prompt + completion


def micro_batches(
    chunk: Sequence[Sample], config: TrainConfig, *, pieces: int = 1
) -> list[list[int]]:
    """Positions of `chunk` cut, in order, into runs whose padded size (samples x longest
    row, rows cut by `row_length`) stays within `config.micro_batch_tokens`; gradients
    accumulate over runs. At least `pieces` runs when there are that many samples (the
    largest halved until then): with N data-parallel processes every rank gets a share."""
    out: list[list[int]] = []
    longest = 0
    for position, sample in enumerate(chunk):
        length = row_length(sample, config)
        if out and (len(out[-1]) + 1) * max(longest, length) <= config.micro_batch_tokens:
            out[-1].append(position)
            longest = max(longest, length)
        else:
            out.append([position])
            longest = length
    while len(out) < min(pieces, len(chunk)):
        largest = max(range(len(out)), key=lambda i: len(out[i]))
        run = out[largest]
        out[largest : largest + 1] = [run[: len(run) // 2], run[len(run) // 2 :]]
    return out


def batch_of(
    chunk: Sequence[Sample],
    config: TrainConfig,
    lambdas: tuple[float, float] = (1.0, 1.0),
    *,
    device: torch.device | None = None,
) -> Batch:
    """`chunk` (a run of `micro_batches`) as one batch, every row cut to `row_limit`."""
    return make_batch(chunk, max_length=row_limit(config), lambdas=lambdas, device=device,
                      max_completion_length=config.max_completion_length)  # fmt: skip


def compact(ids: Sequence[int]) -> array[int]:
    """Token ids as 4-byte ints: a list of Python ints costs ~36 bytes a token (a pointer and
    an int object each), so thousands of agent calls of thousands of tokens held GBs."""
    return array("i", ids)


def unpad(values: torch.Tensor, batch: Batch) -> list[list[float]]:
    """A [B, T] tensor of per-completion-token values back into per-sample lists."""
    return [row[mask.bool()].tolist() for row, mask in zip(values, batch.completion_mask,
                                                           strict=True)]  # fmt: skip


def align_rows(rows: Sequence[Sequence[float]], batch: Batch) -> torch.Tensor:
    """Per-sample lists back into the batch's right-aligned [B, T] layout."""
    out = torch.zeros_like(batch.completion_mask)
    span = out.shape[1]
    for i, row in enumerate(rows):
        if row:
            out[i, span - len(row) :] = torch.tensor(row, dtype=out.dtype)
    return out
