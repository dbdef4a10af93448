"""Task cycles in one process (learner/pipeline.py's task steps, learner/taskcycle.py):
tasks mined from a small real repository, split by file and by commit; rollouts of the
product's agent in real sandboxes, graded by the repository's tests; the update on the dev
model; the gate on held-out solve rates; publish and deploy (embedded); the next cycle's
rollouts by the new adapter.

The model is an oracle (a ScriptedModel that applies a task's reference patch when the
test says so), so every reward is known: train tasks are solved on every other attempt
(groups with signal), and held-out tasks by whichever adapter the test favours. The same
cycle on the dev model, a real Celery worker and vLLM is tests/learner/test_e2e_vllm.py.

Run: .venv/bin/python -m pytest tests/learner/test_taskcycle.py -q
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_server.agent.scripted import ScriptedModel
from agent_server.models.base import Message
from feedback.db import transaction
from feedback.models import TaskRollout
from feedback.queries import active_deployment, get_run, list_adapters
from learner.pipeline import TASK_STEPS, Context, create_cycle, run_cycle
from learner.synth.mine import mine_tasks
from learner.synth.records import TaskRecord, read_tasks, write_tasks
from learner.taskcycle import split_tasks, task_files
from tests.learner.synth.synth_repo import make_task_repo
from tests.learner.synthetic_feedback import seed_feedback

TASKS = {"python": sys.executable, "max_tasks": 8, "mine_timeout_s": 120, "train_tasks": 2,
         "samples": 4, "eval_samples": 1, "max_heldout": 2, "step_limit": 4, "wall_s": 60,
         "max_tokens": 256, "concurrency": 2, "max_confirm": 1}  # fmt: skip
# A handful of held-out tasks: the gate decides on one selection task at least (the default
# asks for 4); half the feedback held out, 3 of each kind, for the mixed cycles' feedback gate.
CONFIG = {"train": {"max_seconds": 60, "max_length": 512}, "tasks": TASKS,
          "gate": {"min_tasks": 1, "min_per_class": 3}}  # fmt: skip
Decide = Callable[[TaskRecord, str | None, int], bool]  # (task, adapter, attempt) -> solve?


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(make_task_repo(tmp_path_factory.mktemp("tasks") / "shop").working_tree_dir)


@pytest.fixture(scope="module")
def mined(repo: Path) -> list[TaskRecord]:
    return mine_tasks(repo, max_tasks=8, python=sys.executable, timeout_s=120)


@pytest.fixture(scope="module")
def mutations(mined: list[TaskRecord], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one-line mutate tasks (the oracle's edits apply exactly), as a tasks_file."""
    return write_tasks(tmp_path_factory.mktemp("file") / "tasks.jsonl",
                       [t for t in mined if t.kind == "mutate"])  # fmt: skip


def test_the_split_holds_out_whole_files_and_commits(mined: list[TaskRecord]) -> None:
    split = split_tasks(mined, 0.3)
    assert split.train and split.heldout and split.heldout_files
    assert sorted(split.train + split.heldout) == sorted(t.instance_id for t in mined)
    by_id = {t.instance_id: t for t in mined}
    for instance in split.train:  # nothing trained on touches a held-out file or commit
        task = by_id[instance]
        assert not set(task_files(task)) & set(split.heldout_files)
        assert task.kind != "revert" or task.base_commit not in split.heldout_commits
    for instance in split.heldout:
        task = by_id[instance]
        assert set(task_files(task)) & set(split.heldout_files) or (
            task.base_commit in split.heldout_commits
        )
    assert split_tasks(list(reversed(mined)), 0.3).heldout_files == split.heldout_files
    one_file = [t for t in mined if task_files(t) == task_files(mined[0])]
    assert not split_tasks(one_file, 0.3).heldout  # one file: nothing to hold out by file


def test_tiers_keep_other_difficulties_out_of_both_sides(mined: list[TaskRecord]) -> None:
    everything = split_tasks(mined, 0.3)
    easy = split_tasks(mined, 0.3, tiers=["easy"])
    by_id = {t.instance_id: t for t in mined}
    assert {by_id[i].difficulty for i in easy.train + easy.heldout} == {"easy"}
    assert {t.difficulty for t in mined} != {"easy"}  # the shop has harder (revert) tasks
    assert set(easy.train) < set(everything.train) or set(easy.heldout) < set(everything.heldout)
    assert set(easy.heldout) <= set(everything.heldout)  # never a held-out task trained on
    assert easy.heldout_files == everything.heldout_files


def _edits(patch: str) -> list[dict[str, str]]:
    """The reference patch as the agent's edit actions (search -> replace, per hunk)."""
    edits, path, old, new = [], "", [], []
    for line in patch.splitlines() + ["@@"]:
        if line.startswith("+++ b/"):
            path = line[6:]
        elif line.startswith(("@@", "--- ", "diff ")):
            if old or new:
                edits.append({"path": path, "search": "\n".join(old), "replace": "\n".join(new)})
            old, new = [], []
        elif line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
        elif line.startswith(" "):
            old.append(line[1:])
            new.append(line[1:])
    return edits


def act(tool: str, **args: str) -> str:
    return json.dumps({"thought": "next", "tool": tool, "args": args})


class Oracle(ScriptedModel):
    """Applies a task's reference patch when `decide` says so, else finishes at once. Its
    fake token ids are folded into the dev model's vocabulary so the update can run."""

    def __init__(self, tasks: list[TaskRecord], decide: Decide, vocab: int) -> None:
        super().__init__([self._act] * 10_000, context_window=32_768, chars_per_token=4)
        self.tasks, self.decide, self.vocab = tasks, decide, vocab
        self.attempts: Counter[tuple[str, str | None]] = Counter()
        self.loaded: set[str] = set()

    def _act(self, messages: list[Message]) -> str:
        def statement(m: Message) -> TaskRecord | None:
            text = str(m.get("content"))
            return next((t for t in self.tasks if t.problem_statement in text), None)

        start = next(i for i, m in enumerate(messages) if statement(m))  # after any few-shots
        task = statement(messages[start])
        assert task is not None
        edits = _edits(task.patch)
        done = sum(m["role"] == "assistant" for m in messages[start:])
        if done == 0:  # a new rollout
            attempt = self.attempts[(task.instance_id, self.adapter)]
            self.attempts[(task.instance_id, self.adapter)] += 1
            if not self.decide(task, self.adapter, attempt):
                return act("finish", message="nothing to do")
        if done < len(edits):
            return act("edit", **edits[done])
        return act("finish", message="fixed")

    def _tokens(self, text: str) -> list[int]:
        return [i % self.vocab for i in super()._tokens(text)]

    def prompt_ids(self, messages: Any) -> list[int]:
        return [i % self.vocab for i in super().prompt_ids(messages)]

    async def load_adapter(self, name: str, path: Any) -> None:
        self.loaded.add(name)

    async def unload_adapter(self, name: str) -> None:
        self.loaded.discard(name)


def _run(
    ctx: Context, repo: Path, tasks_file: Path, oracle: Oracle, kind: str = "tasks", **more: Any
) -> Any:
    ctx.backend = lambda settings: oracle
    tasks = TASKS | {"repo": str(repo), "tasks_file": str(tasks_file)} | more
    config = CONFIG | {"kind": kind, "tasks": tasks,
                       "data": {"settle_s": 0.0, "heldout_fraction": 0.5}}  # fmt: skip
    run = run_cycle(ctx, create_cycle(ctx, trigger="test", overrides=config))
    return run, {s["name"]: s for s in run.steps}


def _rows(ctx: Context, run_id: int) -> list[tuple[Any, ...]]:
    with transaction(ctx.db) as db:
        rows = db.query(TaskRollout).filter(TaskRollout.run_id == run_id).all()
        return [(r.instance_id, r.status, r.reward, r.message[:300], r.diff[:300]) for r in rows]


def rollout_adapters(db_factory: Any, run_id: int) -> dict[str, set[str | None]]:
    """instance id -> the adapters its stored rollouts of run `run_id` name."""
    with transaction(db_factory) as db:
        rows = db.query(TaskRollout).filter(TaskRollout.run_id == run_id).all()
        out: dict[str, set[str | None]] = {}
        for row in rows:
            out.setdefault(row.instance_id, set()).add(row.adapter)
        return out


def candidate_solves_heldout(mutations: Path) -> Decide:
    """Held-out tasks: solved by a candidate only (the gate deploys); train tasks: every
    other attempt (groups with a signal)."""
    heldout = set(split_tasks(read_tasks(mutations), 0.3).heldout)

    def decide(task: TaskRecord, adapter: str | None, attempt: int) -> bool:
        if task.instance_id in heldout:
            return adapter is not None and adapter.startswith("candidate-")
        return attempt % 2 == 0

    return decide


def test_a_task_cycle_trains_publishes_deploys_and_the_next_one_rolls_out_with_it(
    ctx: Context, repo: Path, mutations: Path, dev_tokenizer: Any
) -> None:
    tasks = read_tasks(mutations)
    heldout = set(split_tasks(tasks, 0.3).heldout)
    # the candidate solves the held-out tasks the base model does not
    oracle = Oracle(tasks, candidate_solves_heldout(mutations), len(dev_tokenizer))
    run, steps = _run(ctx, repo, mutations, oracle)
    assert run.status == "succeeded", (run.error, steps["rollouts"]["metrics"], _rows(ctx, run.id))
    assert list(steps) == list(TASK_STEPS)
    plan, rolled = steps["tasks"]["metrics"], steps["rollouts"]["metrics"]
    assert not set(plan["chosen"]) & set(plan["evaluated"]) and set(plan["evaluated"]) <= heldout
    assert len(plan["confirmation"]) == 1 and set(plan["confirmation"]) <= heldout
    assert not set(plan["confirmation"]) & set(plan["evaluated"] + plan["chosen"])  # disjoint
    assert rolled["rollouts"] == 4 * len(plan["chosen"])
    assert rolled["reward_std"] > 0 and 0 < rolled["solve_rate"] < 1
    assert rolled["distinct_replies"] == 0.5  # per task: two edits alike, two finishes alike
    train = steps["train"]["metrics"]
    assert train["steps"] >= 1 and train["groups"]["dropped_equal"] < len(plan["chosen"])
    assert train["gap_constrained"]["tokens"] > 0 and train["samples"] > 0  # actions: masked
    evaluation = steps["evaluate"]["metrics"]
    assert evaluation["candidate"]["solve_rate"] == 1.0
    assert evaluation["serving"]["solve_rate"] == 0.0 and evaluation["accepted"]
    assert evaluation["decision"] == "deploy" and evaluation["evidence"]["effect"] == 1.0
    assert set(evaluation["selection"]["per_task"]["candidate"]) == set(plan["evaluated"])
    confirmed = evaluation["confirmation"]  # measured, reported, not what decided
    assert confirmed["tasks"] == plan["confirmation"] and confirmed["candidate"]["solve_rate"] == 1
    assert confirmed["serving"]["solve_rate"] == 0.0
    assert oracle.loaded == set(), "the candidate is unloaded after the gate"
    with transaction(ctx.db) as db:
        assert active_deployment(db, backend="embedded").adapter_version == run.adapter_version
    adapters = rollout_adapters(ctx.db, run.id)
    assert all(adapters[i] == {None} for i in plan["chosen"])
    both = {None, f"candidate-run-{run.id}"}
    assert all(adapters[i] == both for i in plan["evaluated"] + plan["confirmation"])

    following, steps = _run(ctx, repo, mutations, oracle)  # the next cycle samples with policy-v1
    chosen = steps["tasks"]["metrics"]["chosen"]
    assert all(rollout_adapters(ctx.db, following.id)[i] == {"policy-v1"} for i in chosen)
    assert steps["evaluate"]["metrics"]["serving"]["adapter"] == "policy-v1"


def test_the_gate_refuses_a_candidate_that_solves_fewer_heldout_tasks(
    ctx: Context, repo: Path, mutations: Path, dev_tokenizer: Any
) -> None:
    tasks = read_tasks(mutations)
    heldout = set(split_tasks(tasks, 0.3).heldout)

    def decide(task: TaskRecord, adapter: str | None, attempt: int) -> bool:
        if task.instance_id in heldout:
            return adapter is None  # the serving model solves them, the candidate does not
        return attempt % 2 == 0

    run, steps = _run(ctx, repo, mutations, Oracle(tasks, decide, len(dev_tokenizer)))
    assert run.status == "failed" and "not better on" in (run.error or ""), run.error
    assert steps["evaluate"]["metrics"]["evidence"]["effect"] == -1.0
    assert steps["evaluate"]["status"] == "failed" and "publish" not in steps
    with transaction(ctx.db) as db:
        assert list_adapters(db) == [] and active_deployment(db, backend="embedded") is None


def test_the_serving_rate_pools_its_fresh_rollouts_of_comparable_runs(
    ctx: Context, repo: Path, mutations: Path, dev_tokenizer: Any
) -> None:
    """Three refused candidates (the base model solves the held-out tasks, they do not): the
    second run's serving rate pools the first run's base rollouts, never a candidate's; the
    third, at another temperature, measures something else and pools nothing."""
    tasks = read_tasks(mutations)
    heldout = set(split_tasks(tasks, 0.3).heldout)

    def decide(task: TaskRecord, adapter: str | None, attempt: int) -> bool:
        if task.instance_id in heldout:
            return adapter is None
        return attempt % 2 == 0

    oracle = Oracle(tasks, decide, len(dev_tokenizer))
    first, steps = _run(ctx, repo, mutations, oracle)
    n = len(steps["tasks"]["metrics"]["evaluated"])
    assert steps["evaluate"]["metrics"]["serving"]["rollouts"] == n  # nothing earlier to pool
    second, steps = _run(ctx, repo, mutations, oracle)
    serving = steps["evaluate"]["metrics"]["serving"]
    assert serving["runs"] == [first.id, second.id] and serving["fresh"]["rollouts"] == n
    assert (serving["rollouts"], serving["solved"]) == (2 * n, 2 * n)
    assert steps["evaluate"]["metrics"]["candidate"]["rollouts"] == n  # its own run's only
    per_task = steps["evaluate"]["metrics"]["selection"]["per_task"]  # what the test compared
    assert all(per_task["serving"][i] == [2, 2] for i in per_task["serving"])  # pooled: 2 runs
    assert all(per_task["candidate"][i] == [0, 1] for i in per_task["candidate"])
    assert "not better on" in (second.error or "")
    _, steps = _run(ctx, repo, mutations, oracle, temperature=0.5)
    assert steps["evaluate"]["metrics"]["serving"]["rollouts"] == n
    assert "runs" not in steps["evaluate"]["metrics"]["serving"]


def test_no_learning_signal_skips_the_cycle_and_keeps_its_rollouts(
    ctx: Context, repo: Path, mutations: Path, dev_tokenizer: Any
) -> None:
    oracle = Oracle(read_tasks(mutations), lambda task, adapter, attempt: False,
                    len(dev_tokenizer))  # fmt: skip
    # the easiest tier, as for a model trained on agent traces: located, no few-shot turns;
    # the outcome reward (1 solved, else 0) reaches every rollout
    run, steps = _run(ctx, repo, mutations, oracle, statement="located", few_shot=False,
                      reward="outcome")  # fmt: skip
    assert run.status == "skipped" and "no learning signal" in (run.error or ""), run.error
    assert steps["train"]["status"] == "skipped"
    first = next(c for c in oracle.calls if c.kind == "agent").messages
    assert [m["role"] for m in first] == ["system", "user"]  # no example turns
    assert "The faulty line: `" in first[1]["content"] or "is missing after" in first[1]["content"]
    with transaction(ctx.db) as db:
        assert get_run(db, run_id=run.id).adapter_version is None
        rows = db.query(TaskRollout).filter(TaskRollout.run_id == run.id).all()
        assert rows and all(r.reward_terms["outcome_only"] for r in rows)  # kept, and scored


def test_a_mixed_cycle_trains_on_feedback_and_rollouts_in_one_update(
    ctx: Context, repo: Path, mutations: Path, dev_tokenizer: Any, dev_model_dir: Path
) -> None:
    seed_feedback(ctx.db, dev_tokenizer, dev_model_dir, 24)
    oracle = Oracle(read_tasks(mutations), candidate_solves_heldout(mutations),
                    len(dev_tokenizer))  # fmt: skip
    run, steps = _run(ctx, repo, mutations, oracle, kind="mixed")
    # Both gates decide (the feedback one on a dozen held-out outcomes may defer): any verdict
    # but an error, with the steps up to evaluate run.
    assert run.status == "succeeded" or "evaluate" in (run.error or ""), run.error
    assert list(steps)[:4] == ["collect", *TASK_STEPS[:3]]
    assert steps["evaluate"]["metrics"]["tasks"]["decision"] == "deploy"
    train = steps["train"]["metrics"]  # one update (learner/update.py), both objectives
    parts = train["objectives"]
    assert parts["feedback"]["samples"] > 0 and parts["tasks"]["samples"] > 0
    assert len(parts["feedback"]["losses"]) == len(parts["tasks"]["losses"]) == train["steps"] >= 1
    first = parts["feedback"]["losses"][0] + parts["tasks"]["losses"][0]
    assert train["losses"][0] == pytest.approx(first, abs=1e-5)  # the parts' losses, summed
    evaluation = steps["evaluate"]["metrics"]  # both gates looked at it
    assert sum(evaluation["items"].values()) > 0 and evaluation["tasks"]["candidate"]["rollouts"]


def test_a_mixed_cycle_without_enough_feedback_trains_on_its_rollouts_alone(
    ctx: Context, repo: Path, mutations: Path, dev_tokenizer: Any
) -> None:
    oracle = Oracle(read_tasks(mutations), candidate_solves_heldout(mutations),
                    len(dev_tokenizer))  # fmt: skip
    # with advantages: positive, only the solved half of each group is trained on
    run, steps = _run(ctx, repo, mutations, oracle, kind="mixed",
                      update={"advantages": "positive"})  # fmt: skip
    assert run.status == "succeeded", run.error
    assert "labelled samples" in steps["collect"]["metrics"]["left_out"]
    train = steps["train"]["metrics"]
    chosen = steps["tasks"]["metrics"]["chosen"]
    assert train["groups"]["dropped_negative"] == 2 * len(chosen) == train["groups"]["rollouts"] / 2
    assert list(train["objectives"]) == ["tasks"]  # no feedback part
    assert len(train["objectives"]["tasks"]["losses"]) == train["steps"]
