"""Data-parallel training of the feedback (KTO) update across processes on one machine.

    metrics = train_distributed(model_name, samples, config, parent_dir=serving_or_None,
                                out_dir=run_dir / "candidate")     # config.processes > 1
    python -m torch.distributed.run --standalone --nproc-per-node N -m learner.distributed SPEC

`train_distributed` writes the samples (learner/data.py's snapshot format) and a spec (base
model, samples file, TrainConfig as JSON, parent adapter, output folder) to a temporary
folder and runs this module under torchrun; learner/pipeline.py's feedback train step calls
it when `train.processes` > 1. Each rank loads the base on its device (gloo on the CPU; NCCL
with one GPU per rank, cuda:LOCAL_RANK), builds the same LoRA (same seed; rank 0's weights are
broadcast anyway) and runs learner/train.py's `train_policy` with a `Group` (learner/device.py):

- every rank draws the same global batch (same seed, same order) and cuts it into the same
  micro-batches (`micro_batch_tokens`, the token budget of one forward/backward); rank r
  takes micro-batches r, r + N, r + 2N, ...: a disjoint shard of the batch;
- each micro-batch's loss is scaled by its share of the *global* batch (its samples / the
  batch's), never by a per-rank mean, and its gradient accumulates locally;
- the LoRA gradients are summed across ranks in one all-reduce (SUM), so every rank holds
  the gradient one process computes over the whole batch; each clips and steps AdamW on the
  same gradient and stays in step with the others;
- figures (loss, rewards, tokens) are gathered; stopping on max_seconds is agreed by all;
- rank 0 saves the adapter (under a temporary name, renamed: whole or not at all) and the
  metrics.

So N processes compute what one process computes with the same config: the same sums, in
another order (measured differences in tests/learner/test_distributed.py). Exact with LoRA
dropout 0 (the default): with dropout, ranks draw different masks than one process would.
A batch is cut into at least N micro-batches (the largest halved until there are N), so
every rank gets a share even when the whole batch fits in one token budget. With
kl_coef = 0 the reference logprobs are computed once, shared out the same way and gathered.

A cycle naming the task objective (learner/grpo.py) trains in one process (the update refuses
a Group for an objective that does not split its batches): its samples are read from the
database inside the worker, and a task cycle's time goes to rollouts.
Tested in tests/learner/test_distributed.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from learner.config import TrainConfig
from learner.data import Sample, read_snapshot, write_snapshot

LAUNCH_MARGIN_S = 300.0  # beyond max_seconds: starting N processes and loading N models
LOG_TAIL = 4000


class DistributedTrainingFailed(RuntimeError):
    """torchrun or one of its ranks failed; the message ends with the log's tail."""


def train_distributed(
    model_name: str | Path,
    samples: Sequence[Sample],
    config: TrainConfig,
    *,
    parent_dir: Path | None,
    out_dir: Path,
) -> dict[str, Any]:
    """Train on `samples` with `config.processes` ranks (module docstring) and write the
    adapter to `out_dir` (whole or not at all); returns the train metrics (UpdateResult's,
    with `parent_used`, `processes` and `backend`)."""
    out_dir = Path(out_dir)
    with tempfile.TemporaryDirectory(prefix="apprentice-ddp-") as tmp:
        work = Path(tmp)
        write_snapshot(work / "samples.json", list(samples))
        spec = {
            "model": str(model_name),
            "samples": str(work / "samples.json"),
            "config": config.model_dump(mode="json"),
            "parent_dir": str(parent_dir) if parent_dir is not None else None,
            "out_dir": str(out_dir),
            "metrics": str(work / "metrics.json"),
        }
        (work / "spec.json").write_text(json.dumps(spec))
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   f"--nproc-per-node={config.processes}", "-m", "learner.distributed",
                   str(work / "spec.json")]  # fmt: skip
        root = str(Path(__file__).resolve().parents[1])  # so `-m learner...` imports this copy
        path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "OMP_NUM_THREADS": str(config.threads or 1), "PYTHONPATH": path}
        timeout = config.max_seconds + LAUNCH_MARGIN_S
        log_path = work / "log.txt"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)  # fmt: skip
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # torchrun and every rank
                proc.wait()
                raise DistributedTrainingFailed(
                    f"distributed training ({config.processes} processes) took over {timeout:.0f}"
                    f" s (max_seconds + {LAUNCH_MARGIN_S:.0f}); log tail:\n{_tail(log_path)}"
                ) from None
        if code != 0 or not (work / "metrics.json").is_file():
            raise DistributedTrainingFailed(
                f"distributed training ({config.processes} processes) exited with {code}; log "
                f"tail:\n{_tail(log_path)}"
            )
        return json.loads((work / "metrics.json").read_text())


def _tail(path: Path) -> str:
    return path.read_bytes()[-LOG_TAIL:].decode("utf-8", errors="replace")


def run_rank(spec: dict[str, Any]) -> None:
    """One rank's work under torchrun (RANK, WORLD_SIZE, LOCAL_RANK in the environment)."""
    import torch
    import torch.distributed as dist

    from learner.device import Group, resolve_device
    from learner.train import load_base, make_policy, save_whole, train_policy

    config = TrainConfig.model_validate(spec["config"])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = resolve_device(config.device)
    if device.type == "cuda":
        local = int(os.environ.get("LOCAL_RANK", rank))
        if local >= torch.cuda.device_count():
            raise SystemExit(f"{world} processes need {world} GPUs; torch sees "
                             f"{torch.cuda.device_count()}: lower train.processes")  # fmt: skip
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    try:
        group = Group(rank, world, device)
        base = load_base(spec["model"], device=device, dtype=config.dtype)
        parent = Path(spec["parent_dir"]) if spec["parent_dir"] else None
        policy, used = make_policy(base, config, parent_dir=parent)
        group.broadcast([p for p in policy.parameters() if p.requires_grad])

        def progress(step: int, total: int, loss: float) -> None:
            if rank == 0:
                print(f"step {step}/{total} loss {loss:.5f}", flush=True)

        result = train_policy(policy, read_snapshot(Path(spec["samples"])), config,
                              progress=progress, group=group)  # fmt: skip
        result.parent_used = used
        if rank == 0:
            save_whole(policy, Path(spec["out_dir"]))
            metrics = {**result.metrics(), "backend": dist.get_backend()}
            Path(spec["metrics"]).write_text(json.dumps(metrics))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: torchrun --nproc-per-node N -m learner.distributed SPEC.json",
              file=sys.stderr)  # fmt: skip
        return 2
    run_rank(json.loads(Path(args[0]).read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
