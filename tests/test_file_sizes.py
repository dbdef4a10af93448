"""Files stay small: no Python or TypeScript source over 350 lines, the agent loop at most 200.

A file you can read in one sitting is one you can change safely; past this size a module
usually holds two things that want to be two modules. Counted: every .py file of the
project's packages, tests, benches, scripts and migrations, and every .ts file under
vscode-extension/src and vscode-extension/test (generated code lives outside both).

    .venv/bin/python -m pytest tests/test_file_sizes.py -q
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 350
LOOP = REPO / "agent_server" / "agent" / "loop.py"
MAX_LOOP_LINES = 200  # the loop reads in one sitting (run -> step -> query / execute)

PYTHON_DIRS = (
    "ground", "feedback", "agent_server", "lsp", "learner", "modelbuild", "apprentice",
    "migrations", "tests", "bench", "scripts",
)  # fmt: skip
TYPESCRIPT_DIRS = ("vscode-extension/src", "vscode-extension/test", "dashboard/src")
SKIP = {"__pycache__", "node_modules"}


def sources() -> list[Path]:
    found = sorted(REPO.glob("*.py"))
    for folder in PYTHON_DIRS:
        found += sorted((REPO / folder).rglob("*.py"))
    for folder in TYPESCRIPT_DIRS:
        found += sorted((REPO / folder).rglob("*.ts"))
    return [path for path in found if SKIP.isdisjoint(path.relative_to(REPO).parts)]


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_walk_finds_both_languages() -> None:
    names = {path.relative_to(REPO).as_posix() for path in sources()}
    assert "agent_server/agent/loop.py" in names
    assert "tests/test_file_sizes.py" in names
    assert any(name.startswith("bench/") for name in names)
    assert any(name.startswith("vscode-extension/src/") and name.endswith(".ts") for name in names)
    assert any(name.startswith("vscode-extension/test/") and name.endswith(".ts") for name in names)


def test_no_source_file_is_over_350_lines() -> None:
    too_long = {
        path.relative_to(REPO).as_posix(): lines
        for path in sources()
        if (lines := line_count(path)) > MAX_LINES
    }
    assert not too_long, f"over {MAX_LINES} lines (split them): {too_long}"


def test_the_agent_loop_is_at_most_200_lines() -> None:
    lines = line_count(LOOP)
    assert lines <= MAX_LOOP_LINES, f"{LOOP.relative_to(REPO)} has {lines} lines"
