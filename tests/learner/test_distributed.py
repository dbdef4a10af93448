"""Data-parallel training (learner/distributed.py): real torchrun, 2 processes, gloo, the dev
model on the CPU.

- 2 processes train the same LoRA weights as one process on the same global batches: the
  same sums in another order, so equal up to float rounding (amplified a little by AdamW's
  normalisation of near-zero gradients). Measured on the dev model with these settings
  (3 steps, lr 3e-3): max |w2 - w1| = 4.7e-6 against max |w| = 0.067 (7e-5 of it); the test
  allows 1e-3 x max |w|, 14 times what was measured;
- a failed launch raises with the log's tail;
- the pipeline's train step with `processes: 2` produces the candidate (and says so).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from learner import pipeline
from learner.config import TrainConfig
from learner.distributed import DistributedTrainingFailed, train_distributed
from learner.train import make_policy, save_adapter, train_policy
from tests.learner.synthetic_feedback import make_samples, seed_feedback

pytestmark = pytest.mark.slow
RELATIVE_TOLERANCE = 1e-3  # of the largest LoRA weight (measured: module docstring)
# Small micro-batches, so every batch of 6 makes several and both ranks work.
CONFIG = dict(max_steps=3, batch_size=6, micro_batch_tokens=96, lr=3e-3, threads=1)


@pytest.fixture(scope="module")
def samples(dev_tokenizer: Any, base_model: torch.nn.Module) -> list[Any]:
    return [s for s in make_samples(dev_tokenizer, base_model, 16, seed=5) if not s.heldout]


def test_two_processes_train_what_one_does(
    dev_model_dir: Path, base_model: torch.nn.Module, samples: list[Any], tmp_path: Path
) -> None:
    config = TrainConfig(**CONFIG, processes=2)
    policy, _ = make_policy(copy.deepcopy(base_model), config)
    one = train_policy(policy, samples, config)
    save_adapter(policy, tmp_path / "one")

    started = time.monotonic()
    two = train_distributed(dev_model_dir, samples, config, parent_dir=None,
                            out_dir=tmp_path / "two")  # fmt: skip
    took = time.monotonic() - started
    assert (two["processes"], two["backend"], two["steps"]) == (2, "gloo", 3), two
    assert (two["device"], two["dtype"]) == ("cpu", "float32")
    assert two["micro_batches"] == one.micro_batches >= 2 * 3, "both ranks had work"
    assert two["tokens"] == one.tokens and two["samples"] == one.samples
    assert two["losses"] == pytest.approx(one.losses, abs=1e-4)

    a = load_file(str(tmp_path / "one" / "adapter_model.safetensors"))
    b = load_file(str(tmp_path / "two" / "adapter_model.safetensors"))
    assert a.keys() == b.keys()
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    scale = max(float(a[k].abs().max()) for k in a)
    print(f"2 vs 1 process: max abs diff {diff:.3g}, max |w| {scale:.3g}, {took:.1f} s")
    assert scale > 0 and diff <= RELATIVE_TOLERANCE * scale, (diff, scale)
    assert not list(tmp_path.glob(".two-*")), "no temporary folder left behind"


def test_a_failed_launch_says_why(samples: list[Any], tmp_path: Path) -> None:
    config = TrainConfig(**CONFIG, processes=2)
    with pytest.raises(DistributedTrainingFailed, match="exited with") as caught:
        train_distributed(tmp_path / "no-model", samples[:2], config, parent_dir=None,
                          out_dir=tmp_path / "out")  # fmt: skip
    assert "no-model" in str(caught.value)  # the log's tail names what went wrong
    assert not (tmp_path / "out").exists()


def test_the_train_step_with_two_processes_makes_the_candidate(
    ctx: pipeline.Context, dev_tokenizer: Any, dev_model_dir: Path
) -> None:
    seed_feedback(ctx.db, dev_tokenizer, dev_model_dir, 16)
    overrides = {"data": {"settle_s": 0.0, "heldout_fraction": 0.5}, "gate": {"min_per_class": 1},
                 "train": {**CONFIG, "max_steps": 2, "processes": 2}}  # fmt: skip
    run_id = pipeline.create_cycle(ctx, trigger="test", overrides=overrides)
    pipeline.collect(ctx, run_id)
    metrics = pipeline.train(ctx, run_id)
    assert (metrics["processes"], metrics["steps"], metrics["device"]) == (2, 2, "cpu")
    assert metrics["parent_version"] is None
    candidate = ctx.run_dir(run_id) / "candidate"
    assert (candidate / "adapter_model.safetensors").is_file()
    assert (candidate / "adapter_config.json").is_file()


def test_every_rank_gets_a_share_of_a_batch_that_fits_one_pass(samples: list[Any]) -> None:
    from learner.train import micro_batches

    config = TrainConfig(batch_size=6)  # the default budget: 6 short samples fit one pass
    assert micro_batches(samples[:6], config) == [[0, 1, 2, 3, 4, 5]]
    assert micro_batches(samples[:6], config, pieces=2) == [[0, 1, 2], [3, 4, 5]]
    assert micro_batches(samples[:6], config, pieces=4) == [[0], [1, 2], [3], [4, 5]]
    assert micro_batches(samples[:2], config, pieces=4) == [[0], [1]]  # no empty pieces
