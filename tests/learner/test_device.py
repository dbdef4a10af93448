"""Device and precision (learner/device.py) on the CPU with the real dev model:

- "auto" resolves to the CPU in float32 here; "cuda" without CUDA is a clear error; the config
  refuses unknown names;
- bfloat16 asked for by name on the CPU trains a step: the base in bfloat16, the LoRA weights
  (and so AdamW's state) in float32, a finite loss;
- batches are made on the model's device; the train metrics carry device and dtype;
- `Group()` (one process) keeps every micro-batch and makes every collective a no-op.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from pydantic import ValidationError

from learner.config import LearnerConfig, TrainConfig
from learner.device import Group, describe, model_device, resolve_device, resolve_dtype
from learner.kto import make_batch
from learner.train import load_base, make_policy, train_policy
from tests.learner.synthetic_feedback import make_samples


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch as on a machine without a GPU, whatever this one has: the fallback is checked
    everywhere (no skip)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture(scope="module")
def samples(dev_tokenizer: Any, base_model: torch.nn.Module) -> list[Any]:
    return make_samples(dev_tokenizer, base_model, 8, seed=3)


def test_auto_is_the_cpu_in_float32_without_cuda(no_cuda: None) -> None:
    device = resolve_device("auto")
    assert device == torch.device("cpu")
    assert resolve_dtype("auto", device) is torch.float32
    assert resolve_dtype("bfloat16", device) is torch.bfloat16  # asked for by name: allowed
    assert resolve_dtype("float32", device) is torch.float32


def test_cuda_without_cuda_is_a_clear_error(no_cuda: None, dev_model_dir: Path) -> None:
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="CUDA is not available"):
        load_base(dev_model_dir, device="cuda")


def test_unknown_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown device"):
        resolve_device("tpu")
    with pytest.raises(ValueError, match="unknown dtype"):
        resolve_dtype("float16", torch.device("cpu"))
    for bad in ({"device": "tpu"}, {"dtype": "float16"}, {"processes": 0}):
        with pytest.raises(ValidationError):
            LearnerConfig.model_validate({"train": bad})
    config = TrainConfig()
    assert (config.device, config.dtype, config.processes) == ("auto", "auto", 1)
    assert TrainConfig(device="cpu", dtype="bfloat16", processes=2).processes == 2


def test_batches_are_made_on_the_given_device(samples: list[Any]) -> None:
    batch = make_batch(samples[:2], max_length=64, max_completion_length=16, device="meta")
    assert all(t.device.type == "meta" for t in (batch.input_ids, batch.weight, batch.behaviour))
    assert make_batch(samples[:2], max_length=64, max_completion_length=16).input_ids.is_cpu


def test_bfloat16_on_the_cpu_trains_a_step_with_float32_lora(
    dev_model_dir: Path, samples: list[Any]
) -> None:
    config = TrainConfig(device="cpu", dtype="bfloat16", max_steps=1, batch_size=4, lr=1e-2)
    base = load_base(dev_model_dir, device=config.device, dtype=config.dtype)
    assert describe(base) == {"device": "cpu", "dtype": "bfloat16"}
    policy, _ = make_policy(base, config)
    lora = {n: p for n, p in policy.named_parameters() if p.requires_grad}
    assert lora and all("lora_" in n and p.dtype is torch.float32 for n, p in lora.items())
    before = {n: p.detach().clone() for n, p in lora.items()}
    result = train_policy(policy, samples, config)
    assert result.steps == 1 and all(map(math.isfinite, result.losses))
    assert any(not torch.equal(p.detach(), before[n]) for n, p in lora.items())
    metrics = result.metrics()
    assert (metrics["device"], metrics["dtype"], metrics["processes"]) == ("cpu", "bfloat16", 1)


def test_train_metrics_carry_device_and_dtype(
    base_model: torch.nn.Module, samples: list[Any]
) -> None:
    config = TrainConfig(max_steps=1, batch_size=4)
    policy, _ = make_policy(copy.deepcopy(base_model), config)
    metrics = train_policy(policy, samples, config).metrics()
    assert metrics["device"] == str(model_device(policy))
    assert metrics["dtype"] == str(next(base_model.parameters()).dtype).removeprefix("torch.")


def test_one_process_group_keeps_everything_and_reduces_nothing() -> None:
    group = Group()
    assert group.deal([[0, 1], [2], [3]]) == [[0, 1], [2], [3]]
    assert (group.sum(2.5), group.any(False), group.gather("x")) == (2.5, False, ["x"])
    param = torch.nn.Parameter(torch.ones(3))
    param.grad = torch.full((3,), 2.0)
    group.sum_grads([param])
    assert torch.equal(param.grad, torch.full((3,), 2.0))
    assert Group(rank=1, world=3).deal(list(range(7))) == [1, 4]
