"""Where the learner computes: the device, the precision, and this process's place among
data-parallel processes (learner/distributed.py).

    device = resolve_device(config.device)          # "auto": cuda when present, else cpu
    dtype = resolve_dtype(config.dtype, device)     # "auto": bfloat16 on a bf16 GPU, else fp32
    describe(policy)                                # {"device": "cuda:0", "dtype": "bfloat16"}
    group = Group()                                 # one process: every collective a no-op

Precision: the base model's weights are stored and run in `dtype` (float32 on the CPU by
default; bfloat16 on a GPU that supports it, half the memory and its tensor cores). The LoRA
weights, and so AdamW's state, stay float32 whatever the base: peft keeps adapter weights in
float32 (`autocast_adapter_dtype`), computes the LoRA path in float32 and casts its output
back to the base's dtype, and the losses run on float32 logits (learner/kto.py
`completion_logits`). No torch.autocast and no loss scaling: bfloat16 has float32's range,
and float16 (which would need a loss scaler) is not offered. On the CPU, bfloat16 is allowed
when asked for by name (it trains, slowly: tests/learner/test_device.py).

`Group` is the seam the training loop (learner/train.py) talks to about other processes:
which micro-batches of a batch are this rank's (`deal`), summing gradients and figures
across ranks, and agreeing to stop. Rank 0 of 1 (the default) does all the work alone.
Nothing to run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import torch

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16")
T = TypeVar("T")


def resolve_device(name: str | torch.device = "auto") -> torch.device:
    """The device named: for "auto" the first GPU when CUDA is available, else the CPU;
    "cuda" (or "cuda:N") without CUDA is an error that says so."""
    if isinstance(name, torch.device):
        return name
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ValueError(
                f'train.device is "{name}" but CUDA is not available to this torch '
                f'({torch.__version__}): use "auto" or "cpu", or install a CUDA build'
            )
        return torch.device(name)
    raise ValueError(f"unknown device {name!r}: use one of {', '.join(DEVICES)}")


def resolve_dtype(name: str | torch.dtype, device: torch.device) -> torch.dtype:
    """The base model's compute dtype: "auto" is bfloat16 on a GPU that supports it and
    float32 otherwise (the CPU included); "bfloat16" on a GPU without it is an error."""
    if isinstance(name, torch.dtype):
        return name
    if name == "float32":
        return torch.float32
    if name not in ("auto", "bfloat16"):
        raise ValueError(f"unknown dtype {name!r}: use one of {', '.join(DTYPES)}")
    bf16_gpu = device.type == "cuda" and torch.cuda.is_bf16_supported()
    if name == "auto":
        return torch.bfloat16 if bf16_gpu else torch.float32
    if device.type == "cuda" and not bf16_gpu:
        raise ValueError("train.dtype is bfloat16 but this GPU does not support it: use "
                         '"auto" or "float32"')  # fmt: skip
    return torch.bfloat16


def model_device(model: torch.nn.Module) -> torch.device:
    """Where `model`'s weights are: where its input tensors are made."""
    return next(model.parameters()).device


def describe(model: torch.nn.Module) -> dict[str, str]:
    """{"device", "dtype"} of a (peft-wrapped) model's base, for a run's metrics."""
    weight = model.get_input_embeddings().weight
    return {"device": str(weight.device), "dtype": str(weight.dtype).removeprefix("torch.")}


class Group:
    """This process's place in a data-parallel group of `world` processes (torch.distributed,
    initialised by the caller). The default, rank 0 of 1, is one process: every collective
    is a no-op and `deal` keeps every micro-batch."""

    def __init__(self, rank: int = 0, world: int = 1, device: torch.device | None = None):
        self.rank, self.world = rank, world
        self.device = device or torch.device("cpu")  # where collectives' tensors live

    def deal(self, pieces: Sequence[T]) -> list[T]:
        """This rank's share of a batch's micro-batches: every `world`-th, from `rank`."""
        return list(pieces[self.rank :: self.world])

    def sum_grads(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Sum every parameter's gradient across ranks (a missing one counts as zero), in one
        flat all-reduce; afterwards every rank holds the same gradients."""
        if self.world == 1:
            return
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        flat = torch.cat([p.grad.reshape(-1) for p in params])  # type: ignore[union-attr]
        torch.distributed.all_reduce(flat)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad.copy_(flat[offset : offset + n].view_as(p))  # type: ignore[union-attr]
            offset += n

    def broadcast(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Every rank starts from rank 0's weights."""
        if self.world > 1:
            with torch.no_grad():
                for p in params:
                    torch.distributed.broadcast(p.data, src=0)

    def sum(self, value: float) -> float:
        if self.world == 1:
            return value
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        torch.distributed.all_reduce(t)
        return float(t[0])

    def any(self, flag: bool) -> bool:
        """True on every rank when it is true on one (so all ranks stop together)."""
        return self.sum(1.0 if flag else 0.0) > 0

    def gather(self, value: Any) -> list[Any]:
        """Every rank's `value`, in rank order (picklable objects)."""
        if self.world == 1:
            return [value]
        out: list[Any] = [None] * self.world
        torch.distributed.all_gather_object(out, value)
        return out
