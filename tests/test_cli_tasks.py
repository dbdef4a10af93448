"""`apprentice tasks mine | verify | eval` as a person runs them: real processes, a real git
repository with a pytest suite (tests/learner/synth/synth_repo.py), the dev model.

    .venv/bin/python -m pytest tests/test_cli_tasks.py -q
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sqlalchemy import create_engine, func, select
from transformers import AutoTokenizer

from agent_server.agent.prompts import few_shot
from feedback.models.rollouts import RolloutCall, TaskRollout
from learner.synth.records import read_tasks
from tests.learner.synth.synth_repo import make_repo
from tests.test_cli import apprentice


def test_mine_verify_eval_on_a_repository_with_history(tmp_path: Path, dev_model_dir: Path) -> None:
    repo = tmp_path / "shop"
    make_repo(repo)
    out = tmp_path / "tasks.jsonl"
    py = ["--python", sys.executable]
    mined = apprentice("tasks", "mine", str(repo), "--out", str(out), "--max", "3", *py)
    assert mined.returncode == 0, mined.stderr
    assert json.loads(mined.stdout)["tasks"] == len(read_tasks(out)) >= 2
    assert {t.kind for t in read_tasks(out)} == {"revert", "mutate"}

    verified = apprentice("tasks", "verify", str(out), "--repo", str(repo), *py)
    assert verified.returncode == 0, verified.stderr
    report = json.loads(verified.stdout)
    assert report["ok"] and report["passed"] == report["tasks"] == len(read_tasks(out))

    home = tmp_path / "home"
    env = {"APPRENTICE_HOME": str(home), "OMP_WAIT_POLICY": "PASSIVE"}
    args = ["--repo", str(repo), "--model", str(dev_model_dir), "--steps", "2", "--wall-s", "60"]
    args += ["--max-tokens", "64", "--temperature", "0", "--no-few-shot"]  # the loop's knobs
    ran = apprentice("tasks", "eval", str(out), *args, *py, env=env, timeout=600)
    assert ran.returncode == 0, ran.stderr
    figures = json.loads(ran.stdout)
    assert figures["rollouts"] == len(read_tasks(out))
    assert 0.0 <= figures["solve_rate"] <= 1.0
    assert set(figures["per_kind"]) == {"revert", "mutate"}
    # Stored in the embedded database the command migrated: every rollout and its calls.
    engine = create_engine(f"sqlite:///{home / 'apprentice.db'}")
    with engine.connect() as db:
        assert db.scalar(select(func.count()).select_from(TaskRollout)) == figures["rollouts"]
        assert db.scalar(select(func.count()).select_from(RolloutCall)) >= figures["rollouts"]
        prompt = db.scalar(select(RolloutCall.prompt_token_ids).limit(1))
    engine.dispose()
    example = few_shot()[0]["content"][:60]  # --no-few-shot: no example turn in the prompt
    tokenizer = AutoTokenizer.from_pretrained(dev_model_dir)
    assert "The fix belongs in" in tokenizer.decode(prompt) and example not in tokenizer.decode(
        prompt
    )


def test_bad_input_is_one_line_and_nothing_written(tmp_path: Path) -> None:
    out = tmp_path / "tasks.jsonl"
    not_a_repo = apprentice("tasks", "mine", str(tmp_path), "--out", str(out))
    assert not_a_repo.returncode == 2 and "error:" in not_a_repo.stderr
    assert not out.exists()

    repo = tmp_path / "shop"
    make_repo(repo)
    (repo / "shop" / "prices.py").write_text("dirty = True\n")
    dirty = apprentice("tasks", "mine", str(repo), "--out", str(out), "--python", sys.executable)
    assert dirty.returncode == 2 and "error:" in dirty.stderr and not out.exists()

    out.write_text("{not json\n")
    bad = apprentice("tasks", "verify", str(out), "--repo", str(repo))
    assert bad.returncode == 2 and "error:" in bad.stderr and "line 1" in bad.stderr
