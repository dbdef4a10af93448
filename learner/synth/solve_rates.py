"""`apprentice tasks eval`: rollouts of the agent on mined tasks, concurrently and bounded,
summarized as JSON (the Apprentice task benchmark).

    report = await evaluate_tasks(records, backend, repo="/path/to/repo", samples=2,
                                  concurrency=4, config=RolloutConfig(statement="vague"))
    report["solve_rate"], report["per_tier"], report["per_kind"], report["mean_steps"]
    report = await run_eval_command(settings, "tasks.jsonl", repo=".", adapter="policy-v3")

Each task is rolled out `samples` times (rollout.py), at most `concurrency` at once (an
asyncio semaphore; the sandbox's commands and tests run in child processes, grading and git
in worker threads, so the machine's cores are the limit). Each rollout has its own wall
budget (RolloutConfig.wall_s, enforced by the loop, with a backstop); a hung test is killed
by grading's timeout; a rollout that fails outside the agent (its starting files, the
sandbox, grading) is recorded as "crashed" with the error, and the others go on.
`backend` is one ModelBackend shared by every rollout (vLLM batches them; the embedded
backend serves one at a time), or a factory `(task, sample) -> ModelBackend` (tests give
each rollout its own ScriptedModel). `run_eval_command` picks the backend and adapter the way
`apprentice eval codegen` does (learner/codegen.py) and is what the CLI calls.
Tested in tests/learner/synth/test_solve_rates.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from agent_server.models.base import ModelBackend
from learner.synth.records import TaskRecord, read_tasks
from learner.synth.rollout import RolloutConfig, RolloutResult, run_rollout
from learner.synth.sandbox import SandboxConfig

BackendFactory = Callable[[TaskRecord, int], ModelBackend]
FilesFor = Callable[[TaskRecord], Mapping[str, str]]


def default_concurrency() -> int:
    """Rollouts at once by default: one per core, leaving one for the model and the rest."""
    return max(1, (os.cpu_count() or 2) - 1)


async def evaluate_tasks(
    records: Sequence[TaskRecord],
    backend: ModelBackend | BackendFactory,
    *,
    repo: str | os.PathLike[str] | None = None,
    files_for: FilesFor | None = None,
    adapter: str | None = None,
    samples: int = 1,
    concurrency: int | None = None,
    config: RolloutConfig | None = None,
    db: sessionmaker[Session] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Roll out every task `samples` times, `concurrency` at once; the JSON summary."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    limit = concurrency if concurrency is not None else default_concurrency()
    if limit < 1:
        raise ValueError(f"concurrency must be >= 1, got {limit}")
    if not records:
        raise ValueError("no tasks to evaluate: the task file is empty")
    if repo is None and files_for is None:
        raise ValueError("evaluate_tasks needs the tasks' repository (repo) or files_for")
    cfg = config or RolloutConfig()
    gate = asyncio.Semaphore(limit)
    jobs = [(task, k) for task in records for k in range(samples)]
    done = 0
    started = time.monotonic()

    async def one(task: TaskRecord, sample: int) -> RolloutResult:
        nonlocal done
        async with gate:
            shared = hasattr(backend, "complete")  # a backend, not a factory
            model = backend if shared else backend(task, sample)  # type: ignore[operator]
            files = files_for(task) if files_for is not None else None
            try:
                result = await run_rollout(task, model, files=files, repo=repo, adapter=adapter,
                                           config=cfg, db=db)  # fmt: skip
            except Exception as exc:  # outside the agent: recorded, the others go on
                result = crashed(task, model, adapter, cfg, f"{type(exc).__name__}: {exc}")
        done += 1
        if progress is not None:
            progress(
                f"[{done}/{len(jobs)}] {task.instance_id} #{sample}: {result.status} "
                f"reward={result.reward:g} steps={result.steps} ({result.wall_s:.1f}s)"
            )
        return result

    results = await asyncio.gather(*(one(t, k) for t, k in jobs))
    return summarize(results, samples=samples, concurrency=limit, config=cfg,
                     wall_s=time.monotonic() - started)  # fmt: skip


def crashed(
    task: TaskRecord, model: ModelBackend, adapter: str | None, cfg: RolloutConfig, error: str
) -> RolloutResult:
    """The record of a rollout that failed before or after the agent ran."""
    terms = {"reward": 0.0, "solved": False, "truncated": True, "infra_failure": True}
    return RolloutResult(
        task.instance_id, task.kind, task.difficulty, cfg.statement, model.model_name,
        adapter, "crashed", error, 0.0, terms, True, 0, 0, 0, 0.0, "", {},
    )  # fmt: skip


def _rates(results: Sequence[RolloutResult]) -> dict[str, Any]:
    solved = [bool(r.terms.get("solved")) for r in results]
    return {
        "rollouts": len(results),
        "solved": sum(solved),
        "solve_rate": round(sum(solved) / len(results), 4) if results else 0.0,
        "mean_reward": round(statistics.fmean(r.reward for r in results), 4) if results else 0.0,
    }


def summarize(
    results: Sequence[RolloutResult],
    *,
    samples: int,
    concurrency: int,
    config: RolloutConfig,
    wall_s: float,
) -> dict[str, Any]:
    """The benchmark's JSON: solve rate overall, per tier, per kind; means of steps, tokens,
    summaries and wall time; statuses; one line per rollout."""
    groups: dict[str, dict[str, list[RolloutResult]]] = {"tier": defaultdict(list),
                                                         "kind": defaultdict(list)}  # fmt: skip
    for r in results:
        groups["tier"][r.difficulty].append(r)
        groups["kind"][r.kind].append(r)

    def mean(name: str) -> float:
        return round(statistics.fmean(getattr(r, name) for r in results), 3) if results else 0.0

    first = results[0] if results else None
    return {
        "benchmark": "apprentice-tasks",
        "model": first.model if first else None,
        "adapter": first.adapter if first else None,
        "statement": config.statement,
        "tasks": len({r.instance_id for r in results}),
        "samples": samples,
        "concurrency": concurrency,
        "step_limit": config.step_limit,
        "wall_budget_s": config.wall_s,
        **_rates(results),
        "per_tier": {k: _rates(v) for k, v in sorted(groups["tier"].items())},
        "per_kind": {k: _rates(v) for k, v in sorted(groups["kind"].items())},
        "mean_steps": mean("steps"),
        "mean_tokens": mean("tokens"),
        "mean_summaries": mean("summaries"),
        "summaries": sum(r.summaries for r in results),
        "mean_wall_s": mean("wall_s"),
        "wall_s": round(wall_s, 3),
        "statuses": dict(Counter(r.status for r in results)),
        "truncated": sum(r.truncated for r in results),
        "tests_timed_out": sum(bool(r.terms.get("tests_timed_out")) for r in results),
        "results": [
            {k: v for k, v in r.summary().items() if k not in ("terms", "outcomes")}
            | {"solved": bool(r.terms.get("solved"))}
            for r in results
        ],
    }


async def run_eval_command(
    settings: Any,
    tasks: str | os.PathLike[str],
    *,
    repo: str | os.PathLike[str] = ".",
    adapter: str | None = None,
    model: str | None = None,
    samples: int = 1,
    concurrency: int | None = None,
    config: RolloutConfig | None = None,
    python: str | None = None,
    store: bool = True,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """`apprentice tasks eval FILE.jsonl [--repo PATH] [--adapter NAME] [--model PATH]
    [--samples K] [--concurrency N] [--python PATH] [--no-store]`: the tasks of `tasks`
    (read_tasks: RecordError on a bad file), their starting files rebuilt from `repo`, on the
    configured backend (or the embedded one on `model`); with `store`, every rollout and
    its calls go to the settings' database. ValueError on bad input (the CLI prints it)."""
    from agent_server.models.embedded import EmbeddedBackend
    from agent_server.models.embedded_config import EmbeddedConfig
    from agent_server.models.factory import build_backend
    from learner.codegen import adapter_folder

    records = read_tasks(tasks)
    if not (Path(repo) / ".git").exists():
        raise ValueError(f"{repo}: not a git repository (the tasks' starting files come from it)")
    cfg = config or RolloutConfig()
    if python is not None:
        cfg = dataclasses.replace(cfg, sandbox=dataclasses.replace(cfg.sandbox, python=python))
    SandboxConfig.interpreter(cfg.sandbox)  # a missing interpreter fails before any model loads
    embedded = model is not None or settings.model_backend == "embedded"
    target = adapter_folder(adapter, settings.adapters_dir) if adapter and embedded else None
    if model is not None:
        conf = EmbeddedConfig(model_dir=Path(model), adapters_dir=settings.adapters_dir)
        backend: Any = EmbeddedBackend(conf)
    else:
        backend = build_backend(settings)
    engine = None
    try:
        name = adapter
        if target is not None:
            name, folder = target
            await backend.load_adapter(name, folder)
        db = None
        if store:
            from feedback.db import make_engine, make_sessionmaker

            engine = make_engine(settings.database_url)
            db = make_sessionmaker(engine)
        return await evaluate_tasks(
            records, backend, repo=repo, adapter=name, samples=samples,
            concurrency=concurrency, config=cfg, db=db, progress=progress,
        )  # fmt: skip
    finally:
        await backend.aclose()
        if engine is not None:
            engine.dispose()
