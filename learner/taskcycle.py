"""The task cycle's work: mined tasks, split by commit and by file, rolled out through the
product's own agent by the serving adapter, trained on with learner/grpo.py's objective (the
update and its data: learner/candidate.py), and the
candidate's held-out solve rate against the serving adapter's for the gate.

    metrics = prepare_tasks(settings, config.tasks, run_dir, run_id)  # the "tasks" step
    report = roll_out(ctx, run_id, records, config=..., adapter=..., samples=K)  # "rollouts"
    metrics = rollout_metrics(db, run_id=run_id, instance_ids=ids, adapter=name)
    samples, stats = run_trajectories(ctx, run_id, config)  # the "train" step's task data
    # "evaluate", the gate: learner/heldout.py's evaluate_heldout (pools the serving rate)

learner/pipeline.py's steps call these (a cycle with `kind: tasks` runs
tasks -> rollouts -> train -> evaluate -> publish -> deploy). Every rollout is stored in
task_rollouts with the run's id; training reads back the run's rollouts of its train tasks,
the gate its rollouts of the held-out tasks, so the two never mix.

The split (`split_tasks`): a share of the repository's files and of its commits, chosen by a
hash of their names (stable across cycles), is held out; a task touching a held-out file, or
a revert task of a held-out commit, is held out; every other task may be trained on. Mutate
tasks share one commit, so for them the file decides. Tested in tests/learner/test_taskcycle.py
and, on the real worker and vLLM, tests/learner/test_e2e_tasks.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import math
import shutil
import statistics
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from feedback.db import transaction
from feedback.queries import adapter_name, delete_rollouts, rollouts_of
from learner.config import LearnerConfig, TasksConfig
from learner.runs import Context, RunSkipped, StepFailed
from learner.synth.gitrepo import patch_files
from learner.synth.records import TaskRecord, read_tasks, write_tasks


@dataclass(frozen=True)
class Split:
    train: list[str]  # instance ids
    heldout: list[str]
    heldout_files: list[str]
    heldout_commits: list[str]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _held(names: Sequence[str], fraction: float) -> set[str]:
    """ceil(fraction x n) of `names` (at least one when there are two or more), by hash."""
    unique = sorted(set(names), key=lambda n: hashlib.sha256(n.encode()).hexdigest())
    if len(unique) < 2:
        return set()
    return set(unique[: max(1, math.ceil(fraction * len(unique)))])


def task_files(task: TaskRecord) -> list[str]:
    return patch_files(task.patch) or patch_files(task.bug_patch)


def split_tasks(tasks: Sequence[TaskRecord], fraction: float,
                tiers: Sequence[str] | None = None) -> Split:  # fmt: skip
    """Held-out tasks by file and by commit (module docstring); the rest train. With `tiers`,
    tasks of other difficulties are in neither list (the held-out files stay the same)."""
    files = _held([f for t in tasks for f in task_files(t)], fraction)
    commits = _held([t.base_commit for t in tasks if t.kind == "revert"], fraction)
    train, heldout = [], []
    for task in (t for t in tasks if tiers is None or t.difficulty in tiers):
        held = bool(files.intersection(task_files(task))) or (
            task.kind == "revert" and task.base_commit in commits
        )
        (heldout if held else train).append(task.instance_id)
    return Split(train, heldout, sorted(files), sorted(commits))


def split_confirmation(heldout: Sequence[str], fraction: float) -> tuple[list[str], list[str]]:
    """(selection, confirmation): disjoint, ceil(fraction x n) confirmation tasks chosen by
    the hash of their ids (the same held-out tasks split the same way in every cycle), one
    selection task at least. The gate decides on selection; confirmation is measured and
    reported, never decides."""
    ranked = sorted(heldout, key=lambda i: hashlib.sha256(f"confirm:{i}".encode()).hexdigest())
    count = min(len(ranked) - 1, math.ceil(fraction * len(ranked))) if fraction else 0
    confirm = set(ranked[: max(0, count)])
    return [i for i in heldout if i not in confirm], [i for i in heldout if i in confirm]


def _mined_path(settings: Any, config: TasksConfig) -> Path:
    """Where tasks mined from the repository's current HEAD are kept between cycles."""
    from learner.synth.gitrepo import open_repo

    repo = open_repo(config.repo or "", allow_dirty=True)
    key = f"{repo.head.commit.hexsha}:{config.max_tasks}:{config.python}:{config.seed}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return settings.home / "learner" / "tasks" / f"{Path(config.repo or '').name}-{digest}.jsonl"


def load_or_mine(settings: Any, config: TasksConfig) -> tuple[list[TaskRecord], str]:
    """The cycle's tasks: `tasks_file`, or mined from `repo` (once per HEAD, then reused)."""
    from learner.synth.gitrepo import MiningError
    from learner.synth.mine import mine_tasks

    if config.repo is None:
        raise StepFailed("a task cycle needs tasks.repo (a git repository with a pytest suite)")
    if config.tasks_file is not None:
        return read_tasks(config.tasks_file), config.tasks_file
    try:
        cached = _mined_path(settings, config)
        if cached.is_file():
            return read_tasks(cached), str(cached)
        records = mine_tasks(config.repo, max_tasks=config.max_tasks, python=config.python,
                             timeout_s=config.mine_timeout_s, seed=config.seed)  # fmt: skip
    except MiningError as exc:
        raise StepFailed(f"mining {config.repo}: {exc}") from exc
    if not records:
        raise RunSkipped(f"no task could be mined from {config.repo}")
    write_tasks(cached, records)
    return records, str(cached)


def prepare_tasks(settings: Any, config: TasksConfig, run_dir: Path, run_id: int) -> dict[str, Any]:
    """The "tasks" step: tasks.jsonl and split.json in the run folder; its metrics."""
    records, source = load_or_mine(settings, config)
    split = split_tasks(records, config.heldout_fraction, config.tiers)
    if not split.train or not split.heldout:
        raise RunSkipped(f"{len(records)} tasks (tiers: {config.tiers or 'all'}) give "
                         f"{len(split.train)} to train on, {len(split.heldout)} held out: a task "
                         "cycle needs both (mine more, in more files, or more tiers)")  # fmt: skip
    # Each cycle trains on the next `train_tasks` of the train split (all, in turn).
    start = (run_id * config.train_tasks) % len(split.train)
    chosen = (split.train[start:] + split.train[:start])[: config.train_tasks]
    selection, confirmation = split_confirmation(split.heldout, config.confirm_fraction)
    heldout, confirm = selection[: config.max_heldout], confirmation[: config.max_confirm]
    write_tasks(run_dir / "tasks.jsonl", records)
    plan = split.as_dict() | {"chosen": chosen, "evaluated": heldout, "confirmation": confirm}
    tmp = run_dir / "split.json.tmp"
    tmp.write_text(json.dumps(plan, indent=1))
    tmp.replace(run_dir / "split.json")
    by_id = {r.instance_id: r for r in records}
    return {
        "source": source, "tasks": len(records), "train": len(split.train),
        "heldout": len(split.heldout), "chosen": chosen, "evaluated": heldout,
        "confirmation": confirm,
        "heldout_files": split.heldout_files, "heldout_commits": split.heldout_commits,
        "tiers": dict(Counter(by_id[i].difficulty for i in chosen)),
    }  # fmt: skip


def read_plan(run_dir: Path) -> tuple[dict[str, TaskRecord], dict[str, Any]]:
    records = {r.instance_id: r for r in read_tasks(run_dir / "tasks.jsonl")}
    return records, json.loads((run_dir / "split.json").read_text())


def forget_rollouts(db: sessionmaker[Session], run_id: int, instance_ids: Sequence[str],
                    adapter: str | None) -> int:  # fmt: skip
    """Delete what an interrupted attempt of a step stored (a redelivered message)."""
    with transaction(db) as s:
        return delete_rollouts(s, run_ids=[run_id], instance_ids=instance_ids, adapter=adapter)


def roll_out(
    ctx: Context,
    run_id: int,
    records: Sequence[TaskRecord],
    *,
    config: TasksConfig,
    adapter: tuple[str, Path] | None,
    samples: int,
    unload: bool = False,
) -> dict[str, Any]:
    """`samples` rollouts of each task by `adapter` ((name, folder); None: the base model) on
    the backend the settings name, stored with `run_id`; learner.synth.solve_rates' report.
    The adapter is loaded first (a no-op when it is already served) and, with `unload`,
    unloaded after (a candidate under evaluation)."""
    from agent_server.agent.config import AgentConfig
    from learner.synth.reward import RewardConfig
    from learner.synth.rollout import RolloutConfig
    from learner.synth.sandbox import SandboxConfig
    from learner.synth.solve_rates import evaluate_tasks

    name = adapter[0] if adapter else None
    forget_rollouts(ctx.db, run_id, [r.instance_id for r in records], name)
    rollout = RolloutConfig(
        statement=config.statement, step_limit=config.step_limit, wall_s=config.wall_s,
        max_tokens=config.max_tokens, temperature=config.temperature, run_id=run_id,
        sandbox=SandboxConfig(python=config.python),
        agent=AgentConfig(few_shot=config.few_shot),
        reward=RewardConfig(outcome_only=config.reward == "outcome"),
    )  # fmt: skip

    async def go() -> dict[str, Any]:
        backend = ctx.backend(ctx.settings)
        try:
            if adapter is not None:
                await backend.load_adapter(*adapter)
            backend.use_adapter(name)  # None too: the base model, whatever was used before
            try:
                return await evaluate_tasks(
                    records, backend, repo=config.repo, adapter=name, samples=samples,
                    concurrency=config.concurrency, config=rollout, db=ctx.db,
                    progress=lambda line: ctx.report("rollouts", {"status": "progress",
                                                                  "line": line}),
                )  # fmt: skip
            finally:
                if adapter is not None and unload:
                    await backend.unload_adapter(name or "")
        finally:
            await backend.aclose()

    return asyncio.run(go())


def rollout_metrics(
    db: sessionmaker[Session],
    *,
    run_id: int | Sequence[int],
    instance_ids: Sequence[str],
    adapter: str | None,
) -> dict[str, Any]:
    """What the run's (or runs') metrics show of its rollouts: solve rate, reward mean and
    spread, the mean of each numeric reward term, truncations, statuses, steps, summary sizes,
    and how varied the policy is: `distinct_replies`, per task its distinct first replies over
    its rollouts (1.0: all differ; 1/K: K copies of one), averaged over tasks."""
    runs = [run_id] if isinstance(run_id, int) else list(run_id)
    with transaction(db) as s:
        rows = rollouts_of(s, run_ids=runs, instance_ids=instance_ids, adapter=adapter)
    rewards = [r.reward for r in rows]
    terms: dict[str, list[float]] = {}
    for r in rows:
        for key, value in (r.reward_terms or {}).items():
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if number or key == "solved":
                terms.setdefault(key, []).append(float(value))
    summary_tokens = [len(c.completion_token_ids) for r in rows for c in r.calls
                      if c.kind == "summary"]  # fmt: skip
    solved = sum(bool((r.reward_terms or {}).get("solved")) for r in rows)
    firsts: dict[str, list[tuple[int, ...]]] = {}
    for r in rows:
        first = next((c for c in r.calls if c.kind == "agent"), None)
        firsts.setdefault(r.instance_id, []).append(
            tuple(first.completion_token_ids) if first else ()
        )
    distinct = [len(set(f)) / len(f) for f in firsts.values()]
    return {
        "adapter": adapter,
        "rollouts": len(rows),
        "solved": solved,
        "solve_rate": round(solved / len(rows), 4) if rows else 0.0,
        "reward_mean": round(statistics.fmean(rewards), 4) if rows else 0.0,
        "reward_std": round(statistics.pstdev(rewards), 4) if rows else 0.0,
        "terms": {k: round(statistics.fmean(v), 4) for k, v in sorted(terms.items())},
        "truncated": sum(r.truncated for r in rows),
        "statuses": dict(Counter(r.status for r in rows)),
        "mean_steps": round(statistics.fmean(r.steps for r in rows), 2) if rows else 0.0,
        "summaries": len(summary_tokens),
        "mean_summary_tokens": round(statistics.fmean(summary_tokens), 1)
        if summary_tokens else 0.0,
        "distinct_replies": round(statistics.fmean(distinct), 4) if distinct else 0.0,
    }  # fmt: skip


def serving(ctx: Context) -> tuple[int | None, tuple[str, Path] | None]:
    """(version, (name, folder)) of the serving adapter; (None, None): the base model."""
    version, folder = ctx.serving_adapter()
    if version is None or folder is None:
        return None, None
    return version, (adapter_name(version), folder)


def run_trajectories(ctx: Context, run_id: int, config: LearnerConfig) -> tuple[list[Any], Any]:
    """(CallSamples, GroupStats) of the run's rollouts of its train tasks (its held-out ones
    are evaluation's, never these), as `tasks.update.advantages` selects them."""
    from learner.trajectories import group_rollouts, load_rollouts, trajectory_samples

    _, plan = read_plan(ctx.run_dir(run_id))
    chosen = set(plan["chosen"])
    mine = [r for r in load_rollouts(ctx.db, run_id=run_id) if r.instance_id in chosen]
    positive = config.tasks.update.advantages == "positive"
    return trajectory_samples(group_rollouts(mine), positive_only=positive)


def visible_candidate(ctx: Context, run_id: int) -> Path:
    """The run's candidate copied under `adapters_dir/candidates/`: the folder the model
    servers see (a volume shared with vLLM, docs/deploy.md); the run's own folder may live
    on a disk only this worker has."""
    source = ctx.run_dir(run_id) / "candidate"
    target = ctx.settings.adapters_dir / "candidates" / f"candidate-run-{run_id}"
    tmp = target.with_name(f".tmp-{target.name}-{uuid.uuid4().hex[:8]}")
    shutil.copytree(source, tmp)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target
