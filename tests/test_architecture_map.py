"""docs/architecture.md's map of learner/ is true to the tree: every module of learner/ and
learner/synth/ is named in its "`learner/`, module by module" section, and every module the
section names exists.

    .venv/bin/python -m pytest tests/test_architecture_map.py -q
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def section() -> str:
    text = (REPO / "docs" / "architecture.md").read_text()
    start = text.index("### `learner/`, module by module")
    return text[start : text.index("\n## ", start)]


def test_the_learner_map_names_every_module_and_only_modules_that_exist() -> None:
    body = section()
    top, synth = body.split("- `synth/`", 1)
    named_top = set(re.findall(r"`([a-z_]+\.py)`", top))
    named_synth = set(re.findall(r"`([a-z_]+\.py)`", synth))
    on_disk_top = {p.name for p in (REPO / "learner").glob("*.py") if p.name != "__init__.py"}
    on_disk_synth = {
        p.name for p in (REPO / "learner" / "synth").glob("*.py") if p.name != "__init__.py"
    }
    assert on_disk_top - named_top == set(), "learner/ modules missing from the map"
    assert named_top - on_disk_top == set(), "the map names learner/ modules that do not exist"
    assert on_disk_synth - named_synth == set(), "learner/synth/ modules missing from the map"
    assert named_synth - on_disk_synth == set(), "the map names synth/ modules that do not exist"
