"""The agent tests' shared fixture: `root`, a small real project folder."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "a.py").write_text("def f():\n    return 1\n")
    lines = [f"line {i}\n" for i in range(1, 31)]
    (tmp_path / "long.txt").write_text("".join(lines))
    return tmp_path
