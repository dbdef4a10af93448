"""`apprentice tasks mine --kind completion` and `apprentice eval completions` as a person runs
them: real processes, a repository made with `git` (make_history in
tests/learner/synth/test_completion_tasks.py), the dev model with a few tasks.

    .venv/bin/python -m pytest tests/test_cli_eval_completions.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

from learner.synth.completion import read_completion_tasks
from tests.learner.synth.test_completion_tasks import commit, git, make_history
from tests.models.lora import make_lora_adapter
from tests.test_cli import apprentice

FIGURES = ("exact_line", "similarity", "quiet_precision", "quiet_recall", "shown")  # shares


def test_mine_completion_tasks_into_jsonl(tmp_path: Path) -> None:
    repo, out = tmp_path / "shop", tmp_path / "completions.jsonl"
    make_history(repo)
    mined = apprentice("tasks", "mine", "--kind", "completion", str(repo), "--out", str(out),
                       "--heldout-share", "0.4")  # fmt: skip
    assert mined.returncode == 0, mined.stderr
    summary = json.loads(mined.stdout)
    tasks = read_completion_tasks(out)
    assert summary["kind"] == "completion" and summary["tasks"] == len(tasks) > 0
    assert sum(summary["categories"].values()) == sum(summary["splits"].values()) == len(tasks)
    assert summary["splits"]["heldout-time"] == sum(t.split == "heldout-time" for t in tasks) > 0
    assert summary["by_split"]["train"]["next_line"] > 0

    helped = apprentice("tasks", "mine", "--help")
    assert helped.returncode == 0 and "completion" in helped.stdout and "agent" in helped.stdout


def test_eval_completions_side_by_side(tmp_path: Path, dev_model_dir: Path) -> None:
    repo, home = tmp_path / "shop", tmp_path / "home"
    make_history(repo)
    make_lora_adapter(dev_model_dir, home / "adapters" / "policy-v1")  # random: it changes things
    env = {"APPRENTICE_HOME": str(home), "OMP_WAIT_POLICY": "PASSIVE"}
    args = ["--repo", str(repo), "--model", str(dev_model_dir), "--max", "4"]
    ran = apprentice("eval", "completions", *args, "--adapter", "policy-v1", env=env, timeout=300)
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["tasks"] == sum(report["categories"].values()) == 4
    assert report["categories"] == {"next_line": 2, "rest_of_line": 1, "quiet": 1}
    assert report["adapter_name"] == "policy-v1"
    for side in ("base", "adapter"):
        figures = report[side]
        for name in FIGURES:
            assert figures[name] is None or 0.0 <= figures[name] <= 1.0, (side, name, figures)
        assert figures["shown"] is not None and -1.0 <= figures["mean_reward"] <= 1.0
    assert "[1/4] base" in ran.stderr and "[4/4] policy-v1" in ran.stderr  # progress: stderr


def test_eval_completions_bad_input_is_one_error_line(tmp_path: Path, dev_model_dir: Path) -> None:
    env = {"APPRENTICE_HOME": str(tmp_path / "home")}
    model = ["--model", str(dev_model_dir)]
    not_a_repo = apprentice("eval", "completions", "--repo", str(tmp_path), *model, env=env)
    assert not_a_repo.returncode == 2 and "error:" in not_a_repo.stderr
    assert "not a git repository" in not_a_repo.stderr

    prose = tmp_path / "prose"
    prose.mkdir()
    git(prose, "init", "-q")
    commit(prose, {"README.md": "Only prose.\n"}, 1)
    no_lines = apprentice("eval", "completions", "--repo", str(prose), *model, env=env)
    assert no_lines.returncode == 2 and "no commit adds lines" in no_lines.stderr
    mined = apprentice("tasks", "mine", "--kind", "completion", str(prose),
                       "--out", str(tmp_path / "c.jsonl"))  # fmt: skip
    assert mined.returncode == 2 and "error:" in mined.stderr
    assert not (tmp_path / "c.jsonl").exists()

    repo = tmp_path / "shop"
    make_history(repo)
    unknown = apprentice("eval", "completions", "--repo", str(repo), *model,
                         "--adapter", "policy-v99", env=env)  # fmt: skip
    assert unknown.returncode == 2 and "error:" in unknown.stderr and "policy-v99" in unknown.stderr
    for result in (not_a_repo, no_lines, unknown):
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
