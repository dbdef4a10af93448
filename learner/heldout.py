"""A task cycle's "evaluate" step: the candidate's and the serving adapter's solve rates on
the run's held-out tasks, and the gate's verdict on them.

    metrics = evaluate_heldout(ctx, run_id, config)   # {"candidate", "serving", "reasons"...}

Both adapters roll out each held-out task `eval_samples` times. The serving adapter's rate then
**pools** its fresh rollouts of every comparable run (`comparable_runs`: the same held-out
tasks evaluated, the same rollout settings, the same model), so an adapter served for five
cycles is measured on five times the rollouts and the gate and bench/task_rl.py compare
against a rate that tightens while it serves. Only rollouts under the serving adapter's own
name count: the rollouts that evaluated it as a candidate are the ones the gate picked it on,
and would bias its rate upward. `serving.fresh` is this run's share alone.
The held-out tasks are two disjoint sets (learner/taskcycle.py `split_confirmation`): the gate
decides on the *selection* tasks, a paired test over tasks (learner/gate.py `task_decision`);
the *confirmation* tasks are rolled out by both adapters and reported, never used to decide,
so the number that confirms an adapter is not the one that picked it. Tested in
tests/learner/test_taskcycle.py.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from feedback.db import transaction
from feedback.models import LearnerRun
from feedback.queries import list_runs, rollout_models, solved_per_task
from learner.config import LearnerConfig, TasksConfig
from learner.runs import Context, run_config
from learner.taskcycle import read_plan, roll_out, rollout_metrics, serving, visible_candidate

# What a rollout's outcome depends on besides the adapter: runs that differ in any of these
# measure something else. (`concurrency` and `samples` do not change one rollout.)
ROLLOUT_KEYS = ("repo", "tasks_file", "max_tasks", "python", "seed", "statement", "few_shot",
                "step_limit", "wall_s", "max_tokens", "temperature")  # fmt: skip
POOL_RUNS = 100  # earlier runs looked at, newest first


def _settings(tasks: TasksConfig) -> dict[str, Any]:
    return {key: getattr(tasks, key) for key in ROLLOUT_KEYS}


def _evaluated(run: LearnerRun) -> list[str] | None:
    step = next((s for s in run.steps or [] if s.get("name") == "tasks"), None)
    return (step or {}).get("metrics", {}).get("evaluated")


def comparable_runs(ctx: Context, run_id: int, evaluated: list[str],
                    tasks: TasksConfig) -> list[int]:  # fmt: skip
    """This run and the earlier ones (of the newest POOL_RUNS) that evaluated the same held-out
    tasks under the same rollout settings: their rollouts of one adapter measure one rate."""
    wanted, found = _settings(tasks), [run_id]
    with transaction(ctx.db) as s:
        for run in list_runs(s, limit=POOL_RUNS, before=run_id):
            if _evaluated(run) != evaluated:
                continue
            try:
                if _settings(run_config(run).tasks) == wanted:
                    found.append(run.id)
            except ValidationError:  # a config this version no longer reads
                continue
    return sorted(found)


def _one_model(ctx: Context, runs: list[int], evaluated: list[str], adapter: str | None) -> bool:
    """Whether the rollouts that would be pooled (this run's among them) all ran on one model."""
    with transaction(ctx.db) as s:
        return len(rollout_models(s, run_ids=runs, instance_ids=evaluated, adapter=adapter)) == 1


def per_task(ctx: Context, runs: list[int], instance_ids: list[str],
             adapter: str | None) -> dict[str, list[int]]:  # fmt: skip
    """Per task, [solved, rollouts] of `adapter` (None: the base model) in these runs."""
    with transaction(ctx.db) as s:
        return solved_per_task(s, run_ids=runs, instance_ids=instance_ids, adapter=adapter)


def evaluate_heldout(ctx: Context, run_id: int, config: LearnerConfig) -> dict[str, Any]:
    """Held-out tasks rolled out by the candidate (loaded under a name of its own) and by the
    serving adapter, the same number of times each: the selection tasks decide (the serving
    rate pooled over comparable runs; learner/gate.py `task_decision`, a paired test over
    tasks), the confirmation tasks are measured and reported only."""
    from learner.evaluate import adapter_is_finite
    from learner.gate import task_decision

    records, plan = read_plan(ctx.run_dir(run_id))
    evaluated, confirm = list(plan["evaluated"]), list(plan.get("confirmation", []))
    heldout = [records[i] for i in evaluated + confirm]
    candidate_dir = visible_candidate(ctx, run_id)
    finite = adapter_is_finite(candidate_dir)
    version, current = serving(ctx)
    names = {"serving": current[0] if current else None, "candidate": f"candidate-run-{run_id}"}
    # A new name per candidate: vLLM keys its prefix cache by adapter name.
    for adapter, unload in ((current, False), ((names["candidate"], candidate_dir), True)):
        roll_out(ctx, run_id, heldout, config=config.tasks, adapter=adapter,
                 samples=config.tasks.eval_samples, unload=unload)  # fmt: skip
    reports = {role: rollout_metrics(ctx.db, run_id=run_id, instance_ids=evaluated,
                                     adapter=name) for role, name in names.items()}  # fmt: skip
    runs = comparable_runs(ctx, run_id, evaluated, config.tasks)
    pool = [run_id]
    if len(runs) > 1 and _one_model(ctx, runs, evaluated, names["serving"]):
        fresh = {k: reports["serving"][k] for k in ("rollouts", "solved", "solve_rate")}
        pooled = rollout_metrics(ctx.db, run_id=runs, instance_ids=evaluated,
                                 adapter=names["serving"])  # fmt: skip
        reports["serving"], pool = {**pooled, "runs": runs, "fresh": fresh}, runs
    tasks = {"candidate": per_task(ctx, [run_id], evaluated, names["candidate"]),
             "serving": per_task(ctx, pool, evaluated, names["serving"])}  # fmt: skip
    decision = task_decision(tasks["candidate"], tasks["serving"], config.gate, finite=finite)
    confirmation: dict[str, Any] = {"tasks": confirm}
    if confirm:  # reported, never decides
        confirmation |= {
            role: rollout_metrics(ctx.db, run_id=run_id, instance_ids=confirm, adapter=name)
            for role, name in names.items()
        }
        confirmation["per_task"] = {role: per_task(ctx, [run_id], confirm, name)
                                    for role, name in names.items()}  # fmt: skip
    return {**reports, **decision.as_dict(), "serving_version": version, "finite": finite,
            "selection": {"tasks": evaluated, "per_task": tasks},
            "confirmation": confirmation}  # fmt: skip
