"""The candidate of a cycle: trained by the one update on the objectives its cycle names, and
judged by the gates its cycle names. The pipeline's "train" and "evaluate" steps call these,
whatever the kind of cycle (`LearnerConfig.cycle`, learner/config.py).

    metrics = train_candidate(ctx, run_id, config, progress)   # the "train" step
    metrics = judge_candidate(ctx, run_id, config)             # the "evaluate" step

Train: the policy continues the serving adapter (or starts a fresh LoRA); each objective the
cycle names gets its data -- "feedback": the run's dataset.json less its held-out samples, its
labelled ones to the KTO objective and its demonstrations (what people wrote instead,
learner/demos.py) to the demonstration objective (learner/demonstrate.py, weight
`mix.demonstrations`); "tasks": the run's rollouts of its train tasks (learner/taskcycle.py
`run_trajectories`) -- and its weight from `config.mix`; learner/update.py runs the update; the
candidate is saved whole under run-N/candidate. A cycle training feedback alone with
`train.processes` > 1 runs the same update in several processes (learner/distributed.py;
demonstrations are left out there and counted). Nothing to learn from raises RunSkipped with
what was missing.

Judge: each gate the cycle names decides -- "feedback": the candidate against the serving
policy on the held-out pool (learner/evaluate.py scores, learner/gate.py `feedback_decision`;
in a cycle with other objectives it is left out when there is no held-out feedback);
"tasks": held-out selection tasks (learner/heldout.py). The verdict is the strictest of them:
refuse over defer over deploy; the reasons of all are kept.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from feedback.vocab import WRITTEN
from learner.config import LearnerConfig
from learner.runs import Context, RunSkipped, save_candidate

if TYPE_CHECKING:  # the update (torch, peft) loads when a step runs, not on import
    from learner.update import Progress


def train_candidate(
    ctx: Context, run_id: int, config: LearnerConfig, progress: Progress | None = None
) -> dict[str, Any]:
    from learner.data import read_snapshot
    from learner.demonstrate import DemonstrationObjective
    from learner.grpo import TaskObjective
    from learner.train import FeedbackObjective, load_base, make_policy
    from learner.update import Part, run_update

    cycle, train = config.cycle, config.train
    feedback, demonstrations, trajectories, stats = [], [], [], None
    if "feedback" in cycle.objectives:
        dataset = [s for s in read_snapshot(ctx.run_dir(run_id) / "dataset.json")
                   if not s.heldout]  # fmt: skip
        feedback = [s for s in dataset if s.outcome != WRITTEN]
        if config.mix.demonstrations > 0:
            demonstrations = [s for s in dataset if s.outcome == WRITTEN]
    if "tasks" in cycle.objectives:
        from learner.taskcycle import run_trajectories

        trajectories, stats = run_trajectories(ctx, run_id, config)
        # Agent prompts are long: the task objective's rows may be as long as tasks.max_length
        # (every pass still under train.micro_batch_tokens, learner/batching.py).
        train = train.model_copy(update={"max_length": config.tasks.max_length})
    extra: dict[str, Any] = {"groups": dataclasses.asdict(stats)} if stats is not None else {}
    code: list[Any] = []
    if "code" in cycle.objectives and config.mix.code > 0:
        from learner.demos import Encoder
        from learner.repo_code import repo_chunks

        code = repo_chunks(config.code, Encoder.of(ctx.settings.model_name))[0]
    completions: list[Any] = []
    if "code" in cycle.objectives and config.code.completion_tasks and config.mix.completions:
        from learner.completion_rl import completion_calls

        completions, completion_stats = completion_calls(ctx, run_id, config)
        extra["completion_tasks"] = completion_stats
    if not feedback and not demonstrations and not trajectories and not code and not completions:
        raise RunSkipped(nothing_to_learn(cycle.objectives, stats))
    parent_version, parent_dir = ctx.serving_adapter()
    if cycle.objectives == ("feedback",) and train.processes > 1 and feedback:  # torchrun
        # The demonstration objective does not split its batches over ranks: left out here.
        from learner.distributed import train_distributed

        metrics = train_distributed(ctx.settings.model_name, feedback, train,
                                    parent_dir=parent_dir,
                                    out_dir=ctx.run_dir(run_id) / "candidate")  # fmt: skip
        return {
            **metrics,
            "parent_version": parent_version if metrics["parent_used"] else None,
            "demonstrations_left_out": len(demonstrations),
        }
    base = load_base(ctx.settings.model_name, device=train.device, dtype=train.dtype)
    policy, used = make_policy(base, train, parent_dir=parent_dir)
    parts = [Part(FeedbackObjective(feedback, train), config.mix.feedback, train.epochs),
             Part(DemonstrationObjective(demonstrations, train), config.mix.demonstrations,
                  train.epochs),
             Part(DemonstrationObjective(code, train, name="code"), config.mix.code, 1.0),
             Part(TaskObjective(completions, train, config.tasks.update, name="completions"),
                  config.mix.completions, config.tasks.update.epochs),
             Part(TaskObjective(trajectories, train, config.tasks.update), config.mix.tasks,
                  config.tasks.update.epochs)]  # fmt: skip
    result = run_update(policy, parts, train, progress=progress)
    result.parent_used = used
    save_candidate(ctx, run_id, policy)
    return {**result.metrics(), **extra, "parent_version": parent_version if used else None}


def nothing_to_learn(objectives: tuple[str, ...], stats: Any) -> str:
    reasons = []
    if "feedback" in objectives:
        reasons.append("nothing to learn from: no feedback samples or demonstrations")
    if stats is not None:
        reasons.append(
            f"no learning signal: {stats.groups} groups, {stats.dropped_equal} with equal "
            f"rewards, {stats.truncated_masked} truncated rollouts masked, "
            f"{stats.dropped_negative} below their group's baseline left out"
        )
    return "; ".join(reasons)


def judge_candidate(ctx: Context, run_id: int, config: LearnerConfig) -> dict[str, Any]:
    """Every gate the cycle names, and the strictest verdict (module docstring)."""
    gates = config.cycle.gates
    verdicts: dict[str, dict[str, Any]] = {}
    if "feedback" in gates:
        verdicts["feedback"] = feedback_gate(ctx, run_id, config, alone=len(gates) == 1)
    if "tasks" in gates:
        from learner.heldout import evaluate_heldout

        verdicts["tasks"] = evaluate_heldout(ctx, run_id, config)
    if "code" in gates:
        verdicts["code"] = code_gate(ctx, run_id, config)
    decided = [v for v in verdicts.values() if v]
    reasons = [r for v in decided for r in v["reasons"]]
    decisions = {v.get("decision", "refuse" if v["reasons"] else "deploy") for v in decided}
    decision = next((d for d in ("refuse", "defer") if d in decisions), "deploy")
    # A gate alone reports at the top, as it always has; with several, the feedback gate's
    # figures stay at the top and the task gate's under "tasks".
    out = dict(verdicts.get("feedback") or {})
    if "tasks" in verdicts:
        out = {**out, "tasks": verdicts["tasks"]} if "feedback" in gates else verdicts["tasks"]
    if "code" in verdicts:
        out["code"] = verdicts["code"]
    return {**out, "decision": decision, "accepted": decision == "deploy", "reasons": reasons}


def feedback_gate(ctx: Context, run_id: int, config: LearnerConfig, *,
                  alone: bool) -> dict[str, Any]:  # fmt: skip
    """The candidate against the serving policy on the held-out pool, and the gate's verdict
    (learner/gate.py: `decision` deploy | refuse | defer, `reasons` empty when it deploys).
    Beside other gates, no held-out feedback is no verdict ({})."""
    from learner.data import read_snapshot
    from learner.evaluate import adapter_is_finite, codegen_gate, score_heldout
    from learner.gate import feedback_decision

    heldout = [s for s in read_snapshot(ctx.run_dir(run_id) / "dataset.json") if s.heldout]
    if not heldout and not alone:
        return {}
    candidate = ctx.run_dir(run_id) / "candidate"
    serving_version, serving_dir = ctx.serving_adapter()
    finite = adapter_is_finite(candidate)
    scores = score_heldout(ctx.settings.model_name, heldout, candidate, serving_dir,
                           config.train, config.gate)  # fmt: skip
    decision = feedback_decision(scores, config.gate, finite=finite).as_dict()
    codegen: dict[str, Any] = {}
    if decision["accepted"]:  # HumanEval pass@1, when gate.codegen_problems > 0 (off by default)
        codegen, reasons = codegen_gate(
            ctx.settings.model_name, candidate, serving_dir, config.gate
        )
        if reasons:
            decision.update(decision="refuse", accepted=False, reasons=reasons)
    summary = scores.summary()
    evidence = decision["evidence"]
    return {
        **decision,
        **summary,
        "candidate": {
            "effect": evidence.get("effect"),
            "p_value": evidence.get("p_value"),
            "kl_to_serving": summary["kl_to_serving"],
            "perplexity": summary["perplexity"].get("candidate"),
        },  # fmt: skip
        "serving_version": serving_version,
        "finite": finite,
        **({"codegen": codegen} if codegen else {}),
    }


def code_gate(ctx: Context, run_id: int, config: LearnerConfig) -> dict[str, Any]:
    """The candidate against the serving policy on the repository's held-out files and on
    general code (learner/gate.py `code_decision`)."""
    from learner.demos import Encoder
    from learner.evaluate import adapter_is_finite, score_heldout
    from learner.gate import code_decision
    from learner.repo_code import repo_chunks

    heldout = repo_chunks(config.code, Encoder.of(ctx.settings.model_name))[1]
    candidate = ctx.run_dir(run_id) / "candidate"
    serving_version, serving_dir = ctx.serving_adapter()
    scores = score_heldout(ctx.settings.model_name, heldout, candidate, serving_dir,
                           config.train, config.gate)  # fmt: skip
    decision = code_decision(scores, config.gate, finite=adapter_is_finite(candidate))
    return {**decision.as_dict(), "files": len(heldout), "perplexity": scores.perplexity,
            "kl_to_serving": round(scores.kl_to_serving, 6),
            "serving_version": serving_version}  # fmt: skip
