"""The code-generation check: the sandbox's verdicts and limits, the HumanEval harness, pass@1
through a backend, the gate's codegen rule, and `apprentice eval codegen` on the dev model.

    .venv/bin/python -m pytest tests/learner/test_codegen.py -q
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from apprentice import cli
from learner.codegen import (
    STOP,
    Problem,
    cut_at_stop,
    evaluate_codegen,
    evaluate_embedded,
    load_problems,
)
from learner.config import GateConfig, LearnerConfig, TrainConfig
from learner.evaluate import codegen_gate, codegen_rule
from learner.sandbox import Limits, run_python

REPO = Path(__file__).resolve().parents[2]
QUICK = Limits(timeout_s=2.0)


# ---- the sandbox ---------------------------------------------------------------------------


def test_a_correct_program_passes_and_a_wrong_one_fails() -> None:
    assert run_python("def f(x):\n    return x + 1\nassert f(1) == 2\n", QUICK).passed
    wrong = run_python("def f(x):\n    return x - 1\nassert f(1) == 2\n", QUICK)
    assert wrong.status == "failed" and "AssertionError" in wrong.detail


def test_an_infinite_loop_is_killed_at_the_timeout() -> None:
    outcome = run_python("while True:\n    pass\n", Limits(timeout_s=1.0))
    assert outcome.status == "timeout" and outcome.seconds < 10


def test_writes_outside_its_directory_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "escaped.txt"
    for program in (
        f"open({str(target)!r}, 'w').write('x')",
        f"import os\nos.close(os.open({str(target)!r}, os.O_CREAT | os.O_WRONLY))",
        f"import shutil\nshutil.rmtree({str(tmp_path)!r})",
        f"import os\nos.rename('solution.py', {str(target)!r})",
    ):
        outcome = run_python(program, QUICK)
        assert outcome.status == "failed" and "sandbox" in outcome.detail, (program, outcome)
    assert not target.exists() and tmp_path.is_dir()
    inside = "open('scratch.txt', 'w').write('x')\nimport tempfile\ntempfile.mkstemp()\n"
    assert run_python(inside, QUICK).passed  # its own directory (and TMPDIR) is fine


def test_memory_exhaustion_fails_cleanly() -> None:
    for program in ("x = bytearray(8 * 2**30)", "x = [0] * (10**10)", "x = 'a' * (2**40)"):
        outcome = run_python(program, Limits(timeout_s=5.0, memory_mb=512))
        assert outcome.status == "failed" and "MemoryError" in outcome.detail, outcome


def test_processes_sockets_and_floods_are_stopped() -> None:
    for program, expected in [
        ("import subprocess\nsubprocess.run(['true'])", "subprocess.Popen"),
        ("import os\nos.system('true')", "os.system"),
        ("import os\nos.fork()", "os.fork"),
        ("import socket\nsocket.socket()", "socket"),
        ("import ctypes", "ctypes"),
        ("while True:\n    print('x' * 4096)", "File too large"),
    ]:
        outcome = run_python(program, Limits(timeout_s=5.0, file_mb=1))
        assert outcome.status == "failed" and expected in outcome.detail, (program, outcome)


# ---- the HumanEval harness -----------------------------------------------------------------


def test_the_problems_ship_with_the_package() -> None:
    problems = load_problems()
    assert len(problems) == 164 and problems[0].task_id == "HumanEval/0"
    assert len({p.task_id for p in problems}) == 164
    assert [p.task_id for p in load_problems(3)] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    with pytest.raises(ValueError):
        load_problems(0)


def test_reference_solutions_pass_and_an_empty_body_fails() -> None:
    # All 164 reference solutions pass under the default limits (checked when this was
    # written, ~16 s); the first ten keep this test quick.
    for problem in load_problems(10):
        outcome = run_python(problem.program("\n" + problem.canonical_solution))
        assert outcome.passed, (problem.task_id, outcome)
    empty = load_problems(1)[0].program("\n    pass\n")
    assert run_python(empty, QUICK).status == "failed"


def test_completions_are_cut_at_the_papers_stop_sequences() -> None:
    body = "    return a + b\n"
    for tail in ("\ndef helper():", "\nclass X:", "\nif __name__ == '__main__':", "\nprint(1)",
                 "\n# tests", "```\nThis function adds"):  # fmt: skip
        assert cut_at_stop(body + tail) == body
    assert cut_at_stop("    if a:\n        return 1\n") == "    if a:\n        return 1\n"
    assert set(STOP) >= {"\nclass", "\ndef", "\n#", "\nif", "\nprint"}


class _Scripted:
    """A backend with a raw-text completion call that answers from a table."""

    model_name = "scripted"

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.seen: list[Any] = []

    async def complete_text(self, prompt: str, *, sampling: Any, adapter: str | None) -> Any:
        self.seen.append((sampling, adapter))
        return type("C", (), {"text": self.answers[prompt]})()


async def test_pass_at_1_counts_the_problems_whose_tests_pass() -> None:
    problems = load_problems(4)
    answers = {p.text: "\n" + p.canonical_solution for p in problems[:3]}
    answers[problems[3].text] = "\n    return None\n\ndef unused():\n    pass\n"
    backend = _Scripted(answers)
    report = await evaluate_codegen(backend, problems, adapter="policy-v2")  # type: ignore[arg-type]
    assert (report.passed, report.total, report.pass_at_1) == (3, 4, 0.75)
    assert report.results[3].completion == "\n    return None\n"  # cut at "\ndef"
    sampling, adapter = backend.seen[0]
    assert sampling.temperature == 0 and tuple(sampling.stop) == STOP and adapter == "policy-v2"
    summary = report.summary()
    assert summary["pass@1"] == 0.75 and summary["passed_ids"] == [p.task_id for p in problems[:3]]


# ---- the gate ------------------------------------------------------------------------------


def test_the_gate_refuses_a_codegen_drop_beyond_the_margin() -> None:
    config = GateConfig(codegen_problems=20, codegen_margin=0.05)
    assert codegen_rule(0.30, 0.30, config) == []
    assert codegen_rule(0.25, 0.30, config) == []  # one problem in twenty: within the margin
    reasons = codegen_rule(0.20, 0.30, config)
    assert len(reasons) == 1 and "HumanEval pass@1 0.200" in reasons[0]


def test_the_codegen_check_is_off_by_default(tmp_path: Path) -> None:
    assert LearnerConfig().gate.codegen_problems == 0
    assert codegen_gate(tmp_path, tmp_path, None, GateConfig()) == ({}, [])


def test_the_gate_runs_both_adapters_on_the_same_problems(
    dev_model_dir: Path, base_model: Any, tmp_path: Path
) -> None:
    import copy

    from learner.train import make_policy, save_adapter

    policy, _ = make_policy(copy.deepcopy(base_model), TrainConfig())  # B = 0: equals the base
    save_adapter(policy, tmp_path / "candidate")
    config = GateConfig(codegen_problems=1)
    candidate = tmp_path / "candidate"
    metrics, reasons = codegen_gate(dev_model_dir, candidate, None, config, max_tokens=16)
    assert reasons == []
    assert metrics["candidate"]["total"] == metrics["serving"]["total"] == 1
    assert metrics["candidate"]["adapter"] == "candidate" and metrics["serving"]["adapter"] is None
    assert metrics["candidate"]["pass@1"] == metrics["serving"]["pass@1"]


def test_embedded_reports_stop_like_the_paper(dev_model_dir: Path) -> None:
    problems = [Problem("t/0", "def add(a, b):\n", "def check(f):\n    pass\n", "add")]
    reports = asyncio.run(evaluate_embedded(dev_model_dir, problems, {"base": None},
                                            max_tokens=48))  # fmt: skip
    completion = reports["base"].results[0].completion
    assert not any(stop in completion for stop in STOP), completion


# ---- the command line ----------------------------------------------------------------------


def test_eval_codegen_prints_pass_at_1_on_the_dev_model(dev_model_dir: Path) -> None:
    # In-process (typer's runner): the model loads in this process, already holding torch.
    args = ["eval", "codegen", "--model", str(dev_model_dir), "--limit", "2", "--max-tokens", "32"]
    run = CliRunner().invoke(cli.app, [*args, "--json"])
    assert run.exit_code == 0, run.output
    out = json.loads(run.stdout)
    (only,) = out["runs"]
    assert out["benchmark"] == "HumanEval" and only["total"] == 2
    assert 0 <= only["pass@1"] <= 1 and only["passed"] == len(only["passed_ids"])
    assert "[2/2] HumanEval/1" in run.stderr  # progress on stderr
    text = CliRunner().invoke(cli.app, args[:-4] + ["--limit", "1", "--max-tokens", "8"])
    assert text.exit_code == 0 and text.stdout.startswith("pass@1 "), text.output
    assert "(0/1)" in text.stdout or "(1/1)" in text.stdout


def test_eval_codegen_names_a_missing_adapter(dev_model_dir: Path, tmp_path: Path) -> None:
    env = {**os.environ, "NO_COLOR": "1", "APPRENTICE_HOME": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-m", "apprentice.cli", "eval", "codegen", "--model",
         str(dev_model_dir), "--adapter", "policy-v9", "--limit", "1"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=300,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert run.returncode == 2 and "policy-v9" in run.stderr, run.stderr
